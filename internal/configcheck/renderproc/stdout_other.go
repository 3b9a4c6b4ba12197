//go:build unix && !linux

package renderproc

import "golang.org/x/sys/unix"

// redirectStdout points fd 1 at stderr. Outside Linux no worker is ever
// started (the sandbox confines nothing there); it only has to compile.
func redirectStdout() error { return unix.Dup2(2, 1) }
