package sandbox

import "golang.org/x/sys/unix"

// archForkCalls are this architecture's process-creating calls besides
// clone and clone3.
var archForkCalls = []uint32{unix.SYS_FORK, unix.SYS_VFORK}

// archPrivilegedCalls are this architecture's own privileged calls: port
// I/O.
var archPrivilegedCalls = []uint32{unix.SYS_IOPL, unix.SYS_IOPERM}
