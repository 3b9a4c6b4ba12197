package haproxy

import (
	"context"
	"os/exec"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// Confinement bounds one haproxy -c run. The Policy keeps directives that
// run code or read files out of a rendering; confinement is the second,
// independent layer for whatever the policy misses or an administrator
// allows (Lua): through internal/sandbox the process gets an empty
// environment, may read only its directory, its own program and libraries
// and the resolver's files, cannot execute another program, start a
// process, open a TCP connection or signal anything outside itself, runs
// at a lower CPU priority than the server under CPU-time and address-space
// limits, and is killed with everything it started when the check's
// context ends.
type Confinement struct {
	// CPUTime is the hard CPU-time limit of a run (RLIMIT_CPU). Default
	// 30 s: far above any real check; the context's deadline normally
	// ends a run first.
	CPUTime time.Duration
	// AddressSpace is the run's address-space limit (RLIMIT_AS; haproxy
	// is a C program, for which it is exact). Default 1 GiB: haproxy -c
	// of a 1,000-backend configuration needs far less (32 MiB of address
	// space for a small one).
	AddressSpace uint64
	// Nice is added to the run's niceness, so that cache-served decisions
	// of the other modules never queue behind a check. Default 10.
	Nice int
}

func (c Confinement) withDefaults() Confinement {
	if c.CPUTime == 0 {
		c.CPUTime = 30 * time.Second
	}
	if c.AddressSpace == 0 {
		c.AddressSpace = 1 << 30
	}
	if c.Nice == 0 {
		c.Nice = 10
	}
	return c
}

// command returns the confined haproxy command for one run in dir; root,
// when set, is the unpacked root file system binary comes from
// (sandbox.Spec.Root).
func (c Confinement) command(ctx context.Context, root, binary string, args []string, dir string) (*exec.Cmd, error) {
	return sandbox.Command(ctx, sandbox.Spec{
		Root: root,
		Path: binary,
		Args: args,
		Dir:  dir,
		// haproxy -c resolves server host names (strict DNS).
		Read: sandbox.ResolverFiles,
		Limits: sandbox.Limits{
			CPUTime:      c.CPUTime,
			AddressSpace: c.AddressSpace,
			Nice:         c.Nice,
		},
	})
}
