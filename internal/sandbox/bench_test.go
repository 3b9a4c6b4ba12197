//go:build linux

package sandbox_test

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// BenchmarkPlainStart is the floor: starting /bin/true unconfined.
func BenchmarkPlainStart(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConfinedStart starts /bin/true confined and, in the same loop,
// unconfined, and reports both and their ratio, so that the comparison
// holds under whatever else the machine is doing.
func BenchmarkConfinedStart(b *testing.B) {
	requireConfinement(b)
	var confined, plain time.Duration
	for b.Loop() {
		start := time.Now()
		cmd, err := sandbox.Command(b.Context(), sandbox.Spec{Path: "/bin/true", Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		confined += time.Since(start)
		start = time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		plain += time.Since(start)
	}
	b.ReportMetric(float64(confined.Microseconds())/float64(b.N), "confined-µs/op")
	b.ReportMetric(float64(plain.Microseconds())/float64(b.N), "plain-µs/op")
	b.ReportMetric(float64(confined)/float64(plain), "confined/plain")
}

// BenchmarkConfinedEntryStart starts this (Go) binary confined in an entry
// mode that exits at once: the cost of a render worker's start.
func BenchmarkConfinedEntryStart(b *testing.B) {
	requireConfinement(b)
	for b.Loop() {
		cmd, err := sandbox.Command(b.Context(), sandbox.Spec{Entry: "test-true"})
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunnerStart starts /bin/true confined through a runner under
// another user and, in the same loop, confined by this process, and
// reports their ratio: what the separate identity adds to a check's start
// (a proxy process and a round trip over the runner's socket).
func BenchmarkRunnerStart(b *testing.B) {
	requireConfinement(b)
	if os.Geteuid() != 0 {
		b.Fatal("starting a runner under another user needs root")
	}
	r, err := sandbox.StartRunner(b.Context(), sandbox.RunnerOptions{UID: 65534, GID: 65534})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var runner, direct time.Duration
	for b.Loop() {
		for _, via := range []*sandbox.Runner{r, nil} {
			start := time.Now()
			cmd, err := sandbox.Command(b.Context(), sandbox.Spec{Path: "/bin/true", Runner: via})
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			if via != nil {
				runner += time.Since(start)
			} else {
				direct += time.Since(start)
			}
		}
	}
	b.ReportMetric(float64(runner.Microseconds())/float64(b.N), "runner-µs/op")
	b.ReportMetric(float64(direct.Microseconds())/float64(b.N), "direct-µs/op")
	b.ReportMetric(float64(runner)/float64(direct), "runner/direct")
}
