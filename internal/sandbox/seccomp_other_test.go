//go:build linux && !amd64 && !arm64

package sandbox

// archForkCalls: no table for this architecture; TestSeccompTableMatchesXSys
// fails and says so.
var archForkCalls []uint32

var archPrivilegedCalls []uint32
