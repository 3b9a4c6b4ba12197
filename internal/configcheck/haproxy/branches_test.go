package haproxy

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// testedHAProxy is one haproxy the tests run: this machine's (Debian 12's
// 2.6, installed by hack/deps.sh) and the image's (Debian 13's 3.0, which
// the Makefile unpacks into bin/haproxy-3.0 from hack/image/debian's
// locked packages: make bin/haproxy-3.0/usr/sbin/haproxy).
type testedHAProxy struct {
	branch string
	// root is the unpacked root file system binary is in ("" for this
	// machine's).
	root, binary string
}

// haproxyRoot30 is where the Makefile unpacks the image's haproxy.
func haproxyRoot30(t testing.TB) string {
	t.Helper()
	// The module's root, above this package's directory (go test's
	// working directory).
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "bin", "haproxy-3.0")
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = filepath.Dir(dir)
	}
}

// testedHAProxies are every branch the policy covers, each run for real.
// A missing one fails the test (never skips): make test builds both.
func testedHAProxies(t testing.TB) []testedHAProxy {
	t.Helper()
	host, err := findBinary("")
	if err != nil {
		t.Fatalf("%v (configcheck's tests run the real haproxy)", err)
	}
	root := haproxyRoot30(t)
	binary, err := binaryInRoot(root, "")
	if err != nil {
		t.Fatalf("%v: the tests run the image's haproxy 3.0 too; make test unpacks it (make %s)", err, filepath.Join(root, fallbackBinary))
	}
	tested := []testedHAProxy{{branch: "2.6", binary: host}, {branch: "3.0", root: root, binary: binary}}
	for _, h := range tested {
		r, err := NewRunner(RunnerOptions{Root: h.root, Binary: strings.TrimPrefix(h.binary, h.root)})
		if err != nil {
			t.Fatal(err)
		}
		if r.Version().Branch != h.branch {
			t.Fatalf("%s is haproxy %s, the tests expect %s there", h.binary, r.Version().Full, h.branch)
		}
	}
	return tested
}

// command is haproxy with args, unconfined (the probes show what haproxy
// itself opens, outside any directory), with an empty environment; a
// root's haproxy runs through the root's loader and libraries, as the
// sandbox runs it.
func (h testedHAProxy) command(t testing.TB, ctx context.Context, args ...string) *exec.Cmd {
	t.Helper()
	if h.root == "" {
		cmd := exec.CommandContext(ctx, h.binary, args...)
		cmd.Env = []string{}
		return cmd
	}
	f, err := elf.Open(h.binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var interp string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	libs := filepath.Join(h.root, "usr/lib", triplet)
	if _, err := os.Stat(libs); err != nil {
		t.Fatal(err)
	}
	loaderArgs := append([]string{"--inhibit-cache", "--library-path", libs, h.binary}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(h.root, interp), loaderArgs...)
	cmd.Env = []string{}
	return cmd
}

// TestTheImagesHAProxyRunsConfinedFromItsRoot: the runner runs Debian 13's
// haproxy 3.0 on this machine through the root's own loader, confined as
// every check is, and it judges: a valid configuration passes, a wrong one
// fails with haproxy's message.
func TestTheImagesHAProxyRunsConfinedFromItsRoot(t *testing.T) {
	root := haproxyRoot30(t)
	r, err := NewRunner(RunnerOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if r.Version().Branch != "3.0" {
		t.Fatalf("the image's haproxy is %+v, want 3.0", r.Version())
	}
	good := probeDefaults + "frontend f\n  bind 127.0.0.1:18080\n  default_backend b\nbackend b\n  server s 127.0.0.1:80\n"
	res, err := r.Run(t.Context(), render.Output{HAProxyConfig: good})
	if err != nil || !res.Valid {
		t.Fatalf("a valid configuration: %+v %v", res, err)
	}
	res, err = r.Run(t.Context(), render.Output{HAProxyConfig: good + "  bogus-keyword\n"})
	if err != nil || res.Valid || !strings.Contains(res.Message, "bogus-keyword") {
		t.Fatalf("a wrong configuration: %+v %v", res, err)
	}
	// Server names resolve (strict DNS) through the root's glibc, reading
	// the host's resolver files as the sandbox allows: localhost from
	// /etc/hosts; a name that resolves nowhere is haproxy's error.
	res, err = r.Run(t.Context(), render.Output{HAProxyConfig: good + "  server named localhost:80\n"})
	if err != nil || !res.Valid {
		t.Fatalf("a server named localhost: %+v %v", res, err)
	}
	res, err = r.Run(t.Context(), render.Output{HAProxyConfig: good + "  server named nowhere.invalid:80\n"})
	if err != nil || res.Valid || !strings.Contains(res.Message, "nowhere.invalid") {
		t.Fatalf("a server name that does not resolve: %+v %v", res, err)
	}
}
