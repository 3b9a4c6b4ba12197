//go:build linux && !amd64

package sandbox_test

// archForkCalls: only clone and clone3 create processes here.
var archForkCalls = map[string]uintptr{}
