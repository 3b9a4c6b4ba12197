package sandbox

// archForkCalls: arm64 has no fork or vfork system call.
var archForkCalls []uint32
