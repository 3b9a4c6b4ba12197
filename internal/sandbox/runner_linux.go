package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A runner starts confined processes under another identity than the
// server's (the third layer, beside Landlock and seccomp). The server does
// not fork the trampoline itself: Command starts a small proxy (this binary
// with argv[0] proxyArg0) whose standard input, output and error are the
// pipes the caller set up; the proxy hands the three descriptors (SCM_RIGHTS)
// and the Spec to the runner over a SOCK_SEQPACKET Unix socket, one
// connection per process. The runner starts the trampoline with them as its
// stdio, so every protocol spoken over the pipes stays as it is, and answers
// the pid, then the exit status. The proxy exits as the process did, so
// that exec.Cmd's Wait, Kill and context cancellation keep their meaning:
// when the proxy dies (killed by the caller's context, or with the server)
// its connection closes and the runner kills the process with SIGKILL.
//
// The runner serves one user id only, the server's, checked with
// SO_PEERCRED on every connection: the confined processes run as the
// runner's user, never the server's, so even one that could open the
// socket (seccomp refuses Unix sockets) could not start anything through
// it.

const (
	// runnerArg0 is argv[0] of a runner StartRunner started (this binary
	// again); argv[1] is its runnerConfig. Recognised in init, like the
	// trampoline, so that test binaries can run one too.
	runnerArg0 = "gatehouse-sandbox-runner"
	// proxyArg0 is argv[0] of the proxy Command starts when a runner is in
	// use; argv[1] is its proxyConfig.
	proxyArg0 = "gatehouse-sandbox-proxy"
	// maxRequest bounds a request packet (a Spec: a program, arguments,
	// a few paths and variables).
	maxRequest = 1 << 20
	// RunnerSocket is the socket's name in a runner's directory.
	RunnerSocket = "runner.sock"
	// runnerWork is the directory beneath a runner's directory where the
	// server puts what confined processes read (ShareDir).
	runnerWork = "work"
)

// request is what the proxy sends, with its three descriptors.
type request struct {
	// Ping asks only whether the runner serves this caller (no
	// descriptors, no process).
	Ping bool `json:",omitempty"`
	Spec Spec `json:",omitzero"`
	// LandlockLimit is the server's LimitLandlockABI (-1: none): a
	// simulated kernel holds in the runner too.
	LandlockLimit int64
	// NoSeccomp leaves the seccomp filter out: only tests set it
	// (simulateNoSeccomp), to show what the other layers hold alone.
	NoSeccomp bool `json:",omitempty"`
}

// reply is one answer of the runner: first Pid (or Error), then Status.
type reply struct {
	Pid    int    `json:",omitempty"`
	Error  string `json:",omitempty"`
	Status *int   `json:",omitempty"` // syscall.WaitStatus
	// CPU is the process's CPU time (user and system), with Status: the
	// proxy reports it on the process's stderr when the process was
	// killed (CPUTime).
	CPU time.Duration `json:",omitempty"`
	// UID and GID are the runner's, in the answer to a Ping;
	// ProcessUIDs the range its processes' user ids come from (none:
	// they run as the runner).
	UID, GID    int      `json:",omitempty"`
	ProcessUIDs UIDRange `json:",omitzero"`
}

// Runner is a runner the server starts confined processes through.
type Runner struct {
	// Dir holds the socket (RunnerSocket) and the shared work directory.
	Dir string
	// child is the runner process and its supervisor, when StartRunner
	// started it.
	child *runnerChild
	// uid, gid are the runner's, as its answer to the ping said;
	// processUIDs the range of its processes' user ids.
	uid, gid    int
	processUIDs UIDRange
}

// Socket is the runner's socket.
func (r *Runner) Socket() string { return filepath.Join(r.Dir, RunnerSocket) }

// WorkDir is where the server puts directories confined processes read:
// beneath it, ShareDir makes them readable by the runner's group and by no
// one else.
func (r *Runner) WorkDir() string { return filepath.Join(r.Dir, runnerWork) }

// Identity is the runner's user and group id.
func (r *Runner) Identity() (uid, gid int) { return r.uid, r.gid }

// ProcessUIDs is the range of user ids the runner gives its processes,
// one each (Count 0: they run as the runner's user).
func (r *Runner) ProcessUIDs() UIDRange { return r.processUIDs }

// Close stops a runner StartRunner started (it kills what it runs);
// nothing for one that runs in its own container.
func (r *Runner) Close() error {
	if r.child == nil {
		return nil
	}
	r.child.close()
	return os.RemoveAll(r.Dir)
}

// ConnectRunner checks the runner serving in dir (a directory shared with
// it, such as an emptyDir both containers mount) and returns it: the
// runner must answer, serve this process's user and run as another user
// and group, or it is no separation.
//
// A runner in another container may start after the server: until ctx
// ends, a socket that is not there yet or refuses connections is tried
// again.
func ConnectRunner(ctx context.Context, dir string) (*Runner, error) {
	r := &Runner{Dir: dir}
	for {
		err := r.ping(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waited until %w)", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := os.MkdirAll(r.WorkDir(), 0o750); err != nil {
		return nil, fmt.Errorf("sandbox: the runner's work directory: %w", err)
	}
	return r, nil
}

// ping asks the runner who it is, and checks the answer.
func (r *Runner) ping(ctx context.Context) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unixpacket", r.Socket())
	if err != nil {
		return fmt.Errorf("sandbox: reaching the sandbox runner: %w", err)
	}
	defer c.Close()
	conn := c.(*net.UnixConn)
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// The runner's identity as the kernel knows it, not as it says.
	cred, err := peerCred(conn)
	if err != nil {
		return err
	}
	if err := writeJSON(conn, request{Ping: true, LandlockLimit: -1}, nil); err != nil {
		return fmt.Errorf("sandbox: asking the sandbox runner: %w", err)
	}
	var rep reply
	if _, err := readJSON(conn, &rep, 0); err != nil {
		return fmt.Errorf("sandbox: the sandbox runner did not answer: %w", err)
	}
	if rep.Error != "" {
		return fmt.Errorf("sandbox: the sandbox runner refused: %s", rep.Error)
	}
	if int(cred.Uid) == os.Geteuid() || int(cred.Uid) == 0 {
		return fmt.Errorf("sandbox: the sandbox runner runs as user %d, which is no separation from this process (user %d)", cred.Uid, os.Geteuid())
	}
	if int(cred.Gid) == os.Getegid() || int(cred.Gid) == 0 {
		return fmt.Errorf("sandbox: the sandbox runner runs in group %d, which is no separation from this process (group %d)", cred.Gid, os.Getegid())
	}
	if u := rep.ProcessUIDs; u.Count > 0 && (u.contains(os.Geteuid()) || u.contains(int(cred.Uid)) || u.contains(0)) {
		return fmt.Errorf("sandbox: the sandbox runner gives its processes user ids %v, which hold this process's user, the runner's or root", u)
	}
	r.uid, r.gid, r.processUIDs = int(cred.Uid), int(cred.Gid), rep.ProcessUIDs
	return nil
}

// StartRunner starts a runner as a child of this process, under opts' user
// and group (setgroups, setgid, setuid before it runs: it holds no
// capability), for a server that runs as root (make run, a root
// Deployment), where a confined process would otherwise own every root-owned
// file. It listens on a socket in a new directory that only this process
// and the runner's group may enter. Needs root (CAP_SETUID, CAP_SETGID,
// CAP_CHOWN).
func StartRunner(ctx context.Context, opts RunnerOptions) (r *Runner, err error) {
	if opts.UID == 0 {
		opts.UID = 65534
	}
	if opts.GID == 0 {
		opts.GID = 65534
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("sandbox: starting a sandbox runner under another user needs root; run one in its own container instead (sandbox-runner)")
	}
	if opts.UID == os.Geteuid() || opts.GID == os.Getegid() {
		return nil, fmt.Errorf("sandbox: the runner's identity %d:%d is this process's", opts.UID, opts.GID)
	}
	if opts.ProcessUIDs.Count == 0 {
		opts.ProcessUIDs = DefaultProcessUIDs
	}
	if u := opts.ProcessUIDs; u.First <= 0 || u.Count < 0 || u.contains(opts.UID) || u.contains(os.Geteuid()) {
		return nil, fmt.Errorf("sandbox: the processes' user ids %v hold root, the runner's user or this process's", u)
	}
	if !uidsMapped(opts.ProcessUIDs) {
		opts.ProcessUIDs = UIDRange{}
	}
	dir, err := os.MkdirTemp("", "gatehouse-sandbox-*")
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	// The runner's group may enter (not list) the directory, to reach
	// work/; the socket stays this process's (0600): the runner gets the
	// listening descriptor, never needs the path.
	if err := os.Chown(dir, 0, opts.GID); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := os.Chmod(dir, 0o710); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	work := filepath.Join(dir, runnerWork)
	if err := os.Mkdir(work, 0o750); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	// setgid: what the server creates beneath belongs to the runner's
	// group; ShareDir lets the group read it.
	if err := os.Chown(work, 0, opts.GID); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := os.Chmod(work, 0o750|fs.ModeSetgid); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	// Bound here, listened on by the runner: SO_PEERCRED names the
	// process that called listen, and the server checks that it is the
	// runner (another user).
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	lf := os.NewFile(uintptr(fd), "runner socket")
	// Kept open while the runner runs: a restarted runner listens on it.
	defer func() {
		if err != nil {
			_ = lf.Close()
		}
	}()
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(dir, RunnerSocket)}); err != nil {
		return nil, fmt.Errorf("sandbox: binding the runner's socket: %w", err)
	}
	if err := os.Chmod(filepath.Join(dir, RunnerSocket), 0o600); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	child := &runnerChild{listen: lf, opts: opts, stop: make(chan struct{}), done: make(chan struct{})}
	cmd, err := child.start(ctx)
	if err != nil {
		return nil, err
	}
	child.cmd = cmd
	r = &Runner{Dir: dir, child: child}
	if err := r.ping(ctx); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	go child.supervise()
	return r, nil
}

// Restarting a runner that ended on its own: the first restart waits
// runnerRestartMin, each further one twice as long up to runnerRestartMax,
// and a runner that served runnerRestartReset starts the count again.
const (
	runnerRestartMin   = 200 * time.Millisecond
	runnerRestartMax   = 30 * time.Second
	runnerRestartReset = time.Minute
)

// runnerChild is a runner StartRunner started and keeps running: a
// runner that dies (killed, or crashed) is started again on the same
// listening socket, so that the checks it runs fail only while it is
// away, as the chart's container, which the kubelet restarts, does.
// Connections made meanwhile wait in the socket's backlog for the new
// runner; a process the dead runner ran died with it (its proxy says so).
type runnerChild struct {
	// listen is the bound socket every runner process listens on.
	listen *os.File
	opts   RunnerOptions
	// stop is closed by close; done when supervise returned.
	stop, done chan struct{}

	mu      sync.Mutex
	cmd     *exec.Cmd // the runner process now; nil between restarts
	closing bool
}

// start starts one runner process on c.listen and returns once it
// listens.
func (c *runnerChild) start(ctx context.Context) (*exec.Cmd, error) {
	// The runner says it listens by writing a byte here (or dies).
	ready, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer ready.Close()
	defer readyW.Close()
	cfg, err := json.Marshal(runnerConfig{ServeUID: os.Geteuid(), ListenFD: 3, ReadyFD: 4, ProcessUIDs: c.opts.ProcessUIDs})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(selfExe)
	cmd.Args = []string{runnerArg0, string(cfg)}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{c.listen, readyW}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setsid:     true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: &syscall.Credential{Uid: uint32(c.opts.UID), Gid: uint32(c.opts.GID), Groups: []uint32{}},
	}
	if c.opts.ProcessUIDs.Count > 0 {
		// Kept across the change of user (ambient), these three and no
		// other: to start each process under a user of its own
		// (CAP_SETUID, CAP_SETGID for its groups) and to kill it, which
		// another user may not otherwise (CAP_KILL). The trampoline
		// drops them before anything of the program runs.
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_KILL}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: starting the sandbox runner: %w", err)
	}
	_ = readyW.Close()
	started := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := ready.Read(b[:])
		started <- err
	}()
	select {
	case err = <-started:
		if err != nil {
			err = fmt.Errorf("sandbox: the sandbox runner ended before it listened: %w", err)
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return cmd, nil
}

// supervise waits for the runner process and starts another when it
// ended on its own, until close.
func (c *runnerChild) supervise() {
	defer close(c.done)
	delay := runnerRestartMin
	for {
		c.mu.Lock()
		cmd := c.cmd
		c.mu.Unlock()
		ended := "it was not running"
		if cmd != nil {
			began := time.Now()
			err := cmd.Wait()
			ended = fmt.Sprintf("pid %d: %v", cmd.Process.Pid, err)
			if time.Since(began) >= runnerRestartReset {
				delay = runnerRestartMin
			}
		}
		c.mu.Lock()
		c.cmd = nil
		closing := c.closing
		c.mu.Unlock()
		if closing {
			return
		}
		select {
		case <-c.stop:
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, runnerRestartMax)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		next, err := c.start(ctx)
		cancel()
		if c.opts.OnRestart != nil {
			c.opts.OnRestart(ended, err)
		}
		c.mu.Lock()
		if c.closing && next != nil {
			_ = next.Process.Kill()
			_ = next.Wait()
			next = nil
		}
		c.cmd = next
		c.mu.Unlock()
	}
}

// close stops the runner and its supervisor; what it runs dies with it.
func (c *runnerChild) close() {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.done
		return
	}
	c.closing = true
	if c.cmd != nil {
		_ = c.cmd.Process.Kill()
	}
	c.mu.Unlock()
	close(c.stop)
	<-c.done
	_ = c.listen.Close()
}

// pid is the runner process's pid, 0 between restarts.
func (c *runnerChild) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// runnerConfig is argv[1] of a runner StartRunner started.
type runnerConfig struct {
	ServeUID int
	ListenFD int
	ReadyFD  int
	// ProcessUIDs, when not empty, are the user ids of the processes,
	// one each (the runner holds CAP_SETUID and CAP_SETGID for them).
	ProcessUIDs UIDRange `json:",omitzero"`
}

// ServeRunner listens on dir/RunnerSocket and serves the user serveUID
// until ctx ends: the `gatehouse sandbox-runner` command, in a container
// of its own that shares dir (an emptyDir) with the server's. The socket
// is open to every user (0666): SO_PEERCRED decides who is served.
func ServeRunner(ctx context.Context, dir string, serveUID int) error {
	if serveUID == os.Geteuid() {
		return fmt.Errorf("sandbox: the runner would serve its own user %d: run it as another user than the server", serveUID)
	}
	path := filepath.Join(dir, RunnerSocket)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sandbox: %w", err)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		_ = ln.Close()
		return fmt.Errorf("sandbox: %w", err)
	}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	err = serve(ln, serveUID, nil)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// serve accepts connections until ln fails; ids, when not nil, gives each
// process a user id of its own.
func serve(ln *net.UnixListener, serveUID int, ids *uidPool) error {
	// Nothing the runner starts may gain privileges (a set-user-ID
	// program). prctl sets no_new_privs on this thread only, and Go starts
	// processes from any thread: what holds for every process is the
	// trampoline, which sets it for itself before anything else. This is
	// why the runner runs in a process of its own, never inside one that
	// starts other children (its tests too).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: setting no_new_privs: %w", err)
	}
	// The processes it starts run as its user: not dumpable, its /proc
	// entries belong to root and it cannot be traced or its memory read
	// by them (it holds their descriptors and the server's requests).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: clearing dumpable: %w", err)
	}
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			return fmt.Errorf("sandbox: accepting: %w", err)
		}
		go serveConn(conn, serveUID, ids)
	}
}

// runnerMain is the runner StartRunner started; it never returns.
func runnerMain(arg string) {
	var cfg runnerConfig
	if err := json.Unmarshal([]byte(arg), &cfg); err != nil {
		setupFailed(fmt.Errorf("runner: decoding its configuration: %w", err))
	}
	if err := unix.Listen(cfg.ListenFD, 128); err != nil {
		setupFailed(fmt.Errorf("runner: listen: %w", err))
	}
	f := os.NewFile(uintptr(cfg.ListenFD), "listener")
	l, err := net.FileListener(f)
	_ = f.Close()
	if err != nil {
		setupFailed(fmt.Errorf("runner: %w", err))
	}
	ln, ok := l.(*net.UnixListener)
	if !ok {
		setupFailed(errors.New("runner: the listener is not a Unix socket"))
	}
	var ids *uidPool
	if cfg.ProcessUIDs.Count > 0 {
		if err := holdsCapabilities(unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_KILL); err != nil {
			setupFailed(fmt.Errorf("runner: giving its processes user ids of their own: %w", err))
		}
		ids = &uidPool{uids: cfg.ProcessUIDs, used: make(map[int]bool)}
	}
	ready := os.NewFile(uintptr(cfg.ReadyFD), "ready")
	_, _ = ready.Write([]byte{1})
	_ = ready.Close()
	setupFailed(serve(ln, cfg.ServeUID, ids))
}

// serveConn serves one connection: a ping, or one process.
func serveConn(conn *net.UnixConn, serveUID int, ids *uidPool) {
	defer conn.Close()
	refuse := func(format string, args ...any) {
		_ = writeJSON(conn, reply{Error: fmt.Sprintf(format, args...)}, nil)
	}
	cred, err := peerCred(conn)
	if err != nil {
		refuse("%v", err)
		return
	}
	// The request is read (its descriptors closed) before a refusal, so
	// that the caller reads the answer rather than a broken pipe.
	var req request
	files, err := readJSON(conn, &req, 3)
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	if int(cred.Uid) != serveUID {
		fmt.Fprintf(os.Stderr, "sandbox runner: refused a connection of user %d (pid %d): it serves user %d only\n", cred.Uid, cred.Pid, serveUID)
		refuse("this runner serves user %d only", serveUID)
		return
	}
	if err != nil {
		refuse("reading the request: %v", err)
		return
	}
	if req.Ping {
		rep := reply{UID: os.Geteuid(), GID: os.Getegid()}
		if ids != nil {
			rep.ProcessUIDs = ids.uids
		}
		_ = writeJSON(conn, rep, nil)
		return
	}
	if len(files) != 3 {
		refuse("the request carries %d descriptors, not 3 (stdin, stdout, stderr)", len(files))
		return
	}
	caps := Available()
	if req.LandlockLimit >= 0 && int64(caps.LandlockABI) > req.LandlockLimit {
		caps.LandlockABI = int(req.LandlockLimit)
	}
	if req.NoSeccomp {
		caps.Seccomp = false
	}
	cmd, err := trampoline(context.Background(), req.Spec, caps)
	if err != nil {
		refuse("%v", err)
		return
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[1], files[2]
	// No WaitDelay or Cancel here: the runner waits for the process, not
	// for pipes (the descriptors are passed as they are; the runner
	// closes its copies at once).
	cmd.Cancel, cmd.WaitDelay = nil, 0
	if ids != nil {
		// A user of its own: no other process the runner starts, nor the
		// runner, shares it, so the kernel's user-id checks keep them
		// apart whatever the seccomp filter misses (prlimit64,
		// setpriority, signals, ptrace, /proc). The group stays the
		// runner's, which may read the work directory.
		uid, ok := ids.acquire()
		if !ok {
			refuse("all %d user ids of %v are in use", ids.uids.Count, ids.uids)
			return
		}
		defer ids.release(uid)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(os.Getegid()), Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		refuse("starting the trampoline: %v", err)
		return
	}
	for _, f := range files {
		_ = f.Close()
	}
	files = nil
	pid := cmd.Process.Pid
	if err := writeJSON(conn, reply{Pid: pid}, nil); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	// The connection's end (the proxy died: its caller's context ended,
	// or the server did) kills the process; until the process is reaped,
	// its pid (and group) cannot name another.
	var mu sync.Mutex
	reaped := false
	go func() {
		var b [1]byte
		_, _ = conn.Read(b[:])
		mu.Lock()
		defer mu.Unlock()
		if !reaped {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	mu.Lock()
	reaped = true
	mu.Unlock()
	_ = cmd.Wait()
	status := int(cmd.ProcessState.Sys().(syscall.WaitStatus))
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	_ = writeJSON(conn, reply{Status: &status, CPU: cpu}, nil)
}

// proxyConfig is argv[1] of the proxy.
type proxyConfig struct {
	Socket  string
	Request request
}

// proxyMain is the proxy Command started: it hands its stdio and the Spec
// to the runner and ends as the process ended. Never returns.
func proxyMain(arg string) {
	var cfg proxyConfig
	if err := json.Unmarshal([]byte(arg), &cfg); err != nil {
		setupFailed(fmt.Errorf("decoding the proxy's configuration: %w", err))
	}
	c, err := net.Dial("unixpacket", cfg.Socket)
	if err != nil {
		setupFailed(fmt.Errorf("reaching the sandbox runner: %w", err))
	}
	conn := c.(*net.UnixConn)
	if err := writeJSON(conn, cfg.Request, []int{0, 1, 2}); err != nil {
		setupFailed(fmt.Errorf("sending to the sandbox runner: %w", err))
	}
	var rep reply
	if _, err := readJSON(conn, &rep, 0); err != nil {
		setupFailed(fmt.Errorf("the sandbox runner at %s did not start the process (did it crash?): %w", cfg.Socket, err))
	}
	if rep.Error != "" {
		setupFailed(fmt.Errorf("the sandbox runner refused: %s", rep.Error))
	}
	rep = reply{}
	if _, err := readJSON(conn, &rep, 0); err != nil || rep.Status == nil {
		// The runner's end killed the process (Pdeathsig).
		setupFailed(fmt.Errorf("the sandbox runner at %s ended while the process ran (did it crash?); the process was killed", cfg.Socket))
	}
	ws := syscall.WaitStatus(*rep.Status)
	switch {
	case ws.Exited():
		os.Exit(ws.ExitStatus())
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		// Ends as the process did: the caller reads "signal: killed"
		// (RLIMIT_CPU, the memory limit), and on stderr the CPU time the
		// process used, which its ProcessState (the proxy's) lacks.
		fmt.Fprintf(os.Stderr, "%s%v%s\n", cpuReportPrefix, rep.CPU, cpuReportSuffix)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case ws.Signaled():
		os.Exit(128 + int(ws.Signal()))
	}
	os.Exit(ExitSetup)
}

// peerCred is the connection's other end, as the kernel knows it.
func peerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return cred, nil
}

// writeJSON sends v as one packet, with fds.
func writeJSON(conn *net.UnixConn, v any, fds []int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_, _, err = conn.WriteMsgUnix(b, oob, nil)
	return err
}

// readJSON reads one packet into v, and at most maxFiles descriptors sent
// with it (more, or a truncated packet, is an error: their descriptors are
// closed).
func readJSON(conn *net.UnixConn, v any, maxFiles int) ([]*os.File, error) {
	buf := make([]byte, maxRequest)
	oob := make([]byte, unix.CmsgSpace(4*max(maxFiles, 1)+4*8))
	n, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "fd"+strconv.Itoa(fd)))
			}
		}
	}
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	if n == 0 {
		closeAll()
		return nil, io.EOF
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || len(files) > maxFiles {
		closeAll()
		return nil, errors.New("a truncated packet, or too many descriptors")
	}
	if err := json.Unmarshal(buf[:n], v); err != nil {
		closeAll()
		return nil, err
	}
	return files, nil
}

// uidPool hands out the user ids of a range, each to one live process at a
// time, in turn (an id just released is the last to be handed out again).
type uidPool struct {
	uids UIDRange
	mu   sync.Mutex
	next int
	used map[int]bool
}

func (p *uidPool) acquire() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range p.uids.Count {
		uid := p.uids.First + p.next
		p.next = (p.next + 1) % p.uids.Count
		if !p.used[uid] {
			p.used[uid] = true
			return uid, true
		}
	}
	return 0, false
}

func (p *uidPool) release(uid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.used, uid)
}

// uidsMapped reports whether every id of u is a user of this process's
// user namespace (/proc/self/uid_map): in a rootless container most are
// not, and a process could not be started under them.
func uidsMapped(u UIDRange) bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		var inside, outside, count int
		if n, _ := fmt.Sscan(line, &inside, &outside, &count); n == 3 && u.First >= inside && u.First+u.Count <= inside+count {
			return true
		}
	}
	return false
}

// holdsCapabilities checks that the calling thread's effective set holds
// caps.
func holdsCapabilities(caps ...uintptr) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, c := range caps {
		if data[c/32].Effective&(1<<(c%32)) == 0 {
			return fmt.Errorf("capability %d is not held", c)
		}
	}
	return nil
}
