package main

import (
	"fmt"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// sandboxLandlockABIFlag confines configcheck's checks and renderings as an
// older kernel would. Nodes run Landlock ABI 0 (the LSM not enabled), 1
// (Ubuntu 22.04), 3 (Azure Linux 3.0), 4 (Ubuntu 24.04) and so on; this
// reproduces a node's confinement on a newer kernel, for an operator who
// wants to see what a config can do there, and for the tests that attack at
// every level.
const sandboxLandlockABIFlag = "sandbox-landlock-abi"

const sandboxLandlockABIUsage = "Confine configcheck's checks and renderings as a kernel offering at most this Landlock ABI would (0: no Landlock), with the gaps closed as on such a kernel: to reproduce a node's confinement on a newer kernel (docs/configcheck.md, Kernels and platforms). Default: the kernel's own."

// parseSandboxLandlockABI applies the flag at once: the configcheck module
// reads sandbox.Available when it starts, after the flags.
func parseSandboxLandlockABI(s string) error {
	abi, err := strconv.Atoi(s)
	if err != nil || abi < 0 {
		return fmt.Errorf("%q: want a Landlock ABI version, 0 or more", s)
	}
	sandbox.LimitLandlockABI(abi)
	return nil
}
