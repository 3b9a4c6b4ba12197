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
