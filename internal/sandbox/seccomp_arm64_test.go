package sandbox

// archForkCalls: arm64 has no fork or vfork system call.
var archForkCalls []uint32

// archPrivilegedCalls: arm64 has no port I/O calls.
var archPrivilegedCalls []uint32
