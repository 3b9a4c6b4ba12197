package sandbox_test

import "golang.org/x/sys/unix"

// archForkCalls are this architecture's fork-like system calls besides
// clone and clone3.
var archForkCalls = map[string]uintptr{"fork": unix.SYS_FORK, "vfork": unix.SYS_VFORK}
