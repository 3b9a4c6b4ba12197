package sandbox

// SimulateNoSeccomp leaves the seccomp filter out of every confinement
// from then on (false: puts it back), to show what Landlock and the
// separate identity hold alone. Tests only.
func SimulateNoSeccomp(on bool) { noSeccomp.Store(on) }

// RunnerPid is the pid of a runner StartRunner started, for tests that
// kill it: 0 while it is being restarted.
func (r *Runner) RunnerPid() int { return r.child.pid() }
