package sandbox

// RunnerOptions configure StartRunner.
type RunnerOptions struct {
	// UID and GID are the runner's identity, and so the confined
	// processes'. Default 65534 (nobody, nogroup).
	UID, GID int
	// ProcessUIDs is the range of user ids the runner gives the
	// processes it starts, one each while it runs (their group is the
	// runner's, which reads the work directory). Default
	// DefaultProcessUIDs; where that range is not mapped in this
	// process's user namespace (a rootless container), the processes run
	// as the runner's user instead.
	ProcessUIDs UIDRange
	// OnRestart, if not nil, is told each time the runner ended on its
	// own and is started again (ended says how; err is the new start's
	// failure, nil when it serves again), so that the server can log it.
	OnRestart func(ended string, err error)
}

// DefaultProcessUIDs are the user ids a runner StartRunner started gives
// its processes: far above the ids of users and of the system (nobody is
// 65534), below 2^31 (some tools take ids as signed), and beneath the
// ranges container runtimes hand out to user namespaces (/etc/subuid
// ranges start at 100000 and are 65536 wide). 1024 exceeds any number of
// checks and render workers Gatehouse runs at once.
var DefaultProcessUIDs = UIDRange{First: 2_000_000_000, Count: 1024}
