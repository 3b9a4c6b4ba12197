package testenv

import (
	"bytes"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// TestConfinedEntriesRunInABinaryThatLinksEnvtest starts configcheck's
// render worker entry, confined, from this test binary, which links envtest
// (whose init creates /tmp/kubebuilder-envtest in an empty environment, and
// cannot under Landlock): the worker must start and, given no request, end
// cleanly. Served from this very binary, the worker panicked on every
// machine where that directory did not exist yet (and where it did, this
// binary has no render worker to run at all).
func TestConfinedEntriesRunInABinaryThatLinksEnvtest(t *testing.T) {
	if caps := sandbox.Available(); !caps.Complete() {
		t.Fatalf("this kernel cannot confine (%v): the confinement tests need Landlock ABI 6 and seccomp", caps.Missing())
	}
	cmd, err := sandbox.Command(t.Context(), sandbox.Spec{
		Entry:  "render-worker", // internal/configcheck/renderproc's entry
		Dir:    t.TempDir(),
		Env:    []string{"GOMAXPROCS=1"},
		Limits: sandbox.Limits{Data: 512 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stdin = bytes.NewReader(nil)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the render worker did not end cleanly on an empty input: %v; stderr:\n%s", err, stderr.Bytes())
	}
}
