//go:build !linux

package sandbox

import (
	"context"
	"os/exec"
)

// Command cannot confine anything outside Linux.
func Command(ctx context.Context, spec Spec) (*exec.Cmd, error) { return nil, ErrUnsupported }

// Entry is never true outside Linux: no process is started in an entry
// mode.
func Entry(name string) bool { return false }

// Available reports nothing available outside Linux.
func Available() Capabilities {
	return Capabilities{LandlockReason: "not Linux", SeccompReason: "not Linux"}
}

// Runner is never available outside Linux.
type Runner struct{}

// UseRunner does nothing outside Linux.
func UseRunner(*Runner) {}

// WorkDir is os.TempDir outside Linux.
func WorkDir() string { return "" }

// ShareDir does nothing outside Linux.
func ShareDir(string) error { return nil }

// ServeRunner cannot run outside Linux.
func ServeRunner(context.Context, string, int) error { return ErrUnsupported }
