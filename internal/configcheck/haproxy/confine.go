package haproxy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Confinement bounds one haproxy -c run. The Policy keeps directives that
// run code or read files out of a rendering; confinement is the second,
// independent layer for whatever the policy misses or an administrator
// allows (Lua): the process gets an empty environment, may read only its
// directory and the system files haproxy itself needs, cannot execute
// another program, start a process or open a TCP connection, runs at a
// lower CPU priority than the server, and is killed with everything it
// started when the check's context ends.
type Confinement struct {
	// CPUTime is the hard CPU-time limit of a run (RLIMIT_CPU). Default
	// 30 s: far above any real check; the context's deadline normally
	// ends a run first.
	CPUTime time.Duration
	// AddressSpace is the run's address-space limit (RLIMIT_AS). Default
	// 1 GiB.
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

// command returns the confined haproxy command for one run in dir.
func (c Confinement) command(ctx context.Context, binary string, args []string, dir string) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return os.ErrProcessDone
			}
			return err
		}
		return nil
	}
	return cmd, nil
}
