//go:build unix

package renderproc

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// takeStdout returns the protocol's output, a copy of fd 1, and points fd
// 1 at stderr, so that a stray write to os.Stdout by any package of the
// binary cannot corrupt the protocol.
func takeStdout() (*os.File, error) {
	fd, err := unix.Dup(1)
	if err != nil {
		return nil, fmt.Errorf("dup stdout: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := redirectStdout(); err != nil {
		return nil, fmt.Errorf("point stdout at stderr: %w", err)
	}
	return os.NewFile(uintptr(fd), "renderproc-out"), nil
}
