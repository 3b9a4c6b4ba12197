package sandbox

import "golang.org/x/sys/unix"

// archForkCalls are this architecture's process-creating calls besides
// clone and clone3.
var archForkCalls = []uint32{unix.SYS_FORK, unix.SYS_VFORK}
