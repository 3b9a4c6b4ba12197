//go:build !linux

package sandbox

import (
	"context"
	"os/exec"
	"runtime"
)

// Command cannot confine anything outside Linux.
func Command(ctx context.Context, spec Spec) (*exec.Cmd, error) { return nil, ErrUnsupported }

// Entry is never true outside Linux: no process is started in an entry
// mode.
func Entry(name string) bool { return false }

// Available reports nothing available outside Linux.
func Available() Capabilities {
	return Capabilities{
		Unsupported:    "Gatehouse confines processes with Linux's Landlock and seccomp; this is " + runtime.GOOS,
		LandlockReason: "not Linux", SeccompReason: "not Linux",
	}
}

// Runner is never available outside Linux.
type Runner struct{}

// StartRunner cannot start a runner outside Linux.
func StartRunner(context.Context, RunnerOptions) (*Runner, error) { return nil, ErrUnsupported }

// ConnectRunner cannot reach a runner outside Linux.
func ConnectRunner(context.Context, string) (*Runner, error) { return nil, ErrUnsupported }

// Close does nothing: no Runner is ever made outside Linux.
func (r *Runner) Close() error { return nil }

// Identity is never asked of a Runner outside Linux.
func (r *Runner) Identity() (uid, gid int) { return 0, 0 }

// ProcessUIDs is never asked of a Runner outside Linux.
func (r *Runner) ProcessUIDs() UIDRange { return UIDRange{} }

// UseRunner does nothing outside Linux.
func UseRunner(*Runner) {}

// WorkDir is os.TempDir outside Linux.
func WorkDir() string { return "" }

// ShareDir does nothing outside Linux.
func ShareDir(string) error { return nil }

// ServeRunner cannot run outside Linux.
func ServeRunner(context.Context, string, int) error { return ErrUnsupported }

// LimitLandlockABI does nothing outside Linux: nothing is confined.
func LimitLandlockABI(int) {}
