package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// serveRunnerEnv makes the test binary `gatehouse sandbox-runner`: it
// serves DIR for the user in the variable (DIR:UID), as the chart's runner
// container does.
const serveRunnerEnv = "GATEHOUSE_TEST_SERVE_RUNNER"

// standInEnv makes the test binary a stand-in for a non-root server
// (MODE:RUNNERDIR:KEYFILE): it runs the attack entry against itself,
// started by itself (MODE direct) or through the runner serving RUNNERDIR
// (MODE runner), without Landlock or seccomp, and prints what the attack
// got.
const standInEnv = "GATEHOUSE_TEST_STANDIN_SERVER"

func init() {
	if v := os.Getenv(standInEnv); v != "" {
		os.Exit(standInServer(strings.SplitN(v, ":", 3)))
	}
	if v := os.Getenv(serveRunnerEnv); v != "" {
		dir, uid, _ := strings.Cut(v, ":")
		n, _ := strconv.Atoi(uid)
		if err := sandbox.ServeRunner(context.Background(), dir, n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	switch {
	case sandbox.Entry("test-attack-server"):
		os.Exit(entryAttackServer(os.Args[1], os.Args[2]))
	case sandbox.Entry("test-identity"):
		groups, _ := os.Getgroups()
		b, err := os.ReadFile(os.Args[1])
		fmt.Printf("%d %d %v %q %v\n", os.Getuid(), os.Getgid(), groups, b, err)
		os.Exit(0)
	}
}

// entryAttackServer attacks the server (pid) and its key file the way a
// confined process that got past the check policy would, and prints what
// each attempt got: "ok" or the error.
func entryAttackServer(pidArg, keyFile string) int {
	pid, _ := strconv.Atoi(pidArg)
	say := func(what string, err error) {
		if err == nil {
			fmt.Printf("%s: ok\n", what)
		} else {
			fmt.Printf("%s: %v\n", what, err)
		}
	}
	_, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	say("environ", err)
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err == nil {
		f.Close()
	}
	say("mem", err)
	_, err = os.ReadFile(keyFile)
	say("key", err)
	say("kill-0", syscall.Kill(pid, 0))
	say("kill-term", syscall.Kill(pid, syscall.SIGTERM))
	// PTRACE_SEIZE does not stop the server; the attachment ends when
	// this process exits.
	_, _, errno := syscall.Syscall6(syscall.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, 0, 0, 0)
	say("ptrace", errnoErr(errno))
	return 0
}

// requireRoot fails a test that needs to start processes under another
// user: CI runs the tests as root, as this machine does.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test starts a sandbox runner under user 65534, which needs root (CI runs the tests as root); it fails rather than skips so that an unprivileged run cannot pass it silently")
	}
}

// startRunner starts a runner under 65534:65534, stopped at the test's end.
func startRunner(t *testing.T) *sandbox.Runner {
	t.Helper()
	requireRoot(t)
	r, err := sandbox.StartRunner(t.Context(), sandbox.RunnerOptions{UID: 65534, GID: 65534})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// keyFile is a stand-in for the server's TLS key: 0600, owned by the
// server's user, in a directory anyone may enter.
func keyFile(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gatehouse-key-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "tls.key")
	if err := os.WriteFile(key, []byte("-----BEGIN PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return key
}

// TestSeparateIdentityHoldsAlone attacks the server from a confined
// process with neither Landlock (ABI 0, a kernel without the LSM) nor
// seccomp: what stops it then is the runner's identity alone.
func TestSeparateIdentityHoldsAlone(t *testing.T) {
	r := startRunner(t)
	sandbox.LimitLandlockABI(0)
	sandbox.SimulateNoSeccomp(true)
	t.Cleanup(func() { sandbox.LimitLandlockABI(-1); sandbox.SimulateNoSeccomp(false) })
	// A SIGTERM that got through must not end the test binary: it is
	// caught and counted.
	terms := make(chan os.Signal, 16)
	signal.Notify(terms, syscall.SIGTERM)
	defer signal.Stop(terms)
	key := keyFile(t)
	server := strconv.Itoa(os.Getpid())
	attack := sandbox.Spec{Entry: "test-attack-server", Args: []string{server, key}}

	// Control, the same process started by the server itself (its user,
	// root, every capability dropped): the key file is the server's own,
	// and signals are a matter of user ids. /proc and ptrace are refused
	// here by the capability check (the server holds capabilities the
	// confined process lacks), which a non-root server does not have:
	// there only the user id stands between them.
	ctl := run(t, t.Context(), attack)
	for _, want := range []string{"key: ok", "kill-0: ok", "kill-term: ok"} {
		if !strings.Contains(ctl.stdout, want+"\n") {
			t.Errorf("without a runner, want %q (the premise of this test): %s %s", want, ctl.stdout, ctl.stderr)
		}
	}
	<-terms // the control's SIGTERM arrived

	attack.Runner = r
	got := run(t, t.Context(), attack)
	for _, want := range []string{
		"environ: open /proc/" + server + "/environ: permission denied",
		"mem: open /proc/" + server + "/mem: permission denied",
		"key: open " + key + ": permission denied",
		"kill-0: operation not permitted",
		"kill-term: operation not permitted",
		"ptrace: operation not permitted",
	} {
		if !strings.Contains(got.stdout, want+"\n") {
			t.Errorf("under the runner's identity, want %q: %s %s", want, got.stdout, got.stderr)
		}
	}
	select {
	case <-terms:
		t.Errorf("the server received a SIGTERM from a process under the runner's identity")
	default:
	}
}

// TestSeparateIdentityAtEveryLandlockLevel runs the attacks with every
// layer in force at each simulated Landlock level, through the runner.
func TestSeparateIdentityAtEveryLandlockLevel(t *testing.T) {
	requireConfinement(t)
	r := startRunner(t)
	t.Cleanup(func() { sandbox.LimitLandlockABI(-1) })
	key := keyFile(t)
	server := strconv.Itoa(os.Getpid())
	for _, level := range []int{0, 1, 4, 6} {
		t.Run(fmt.Sprintf("landlock-abi-%d", level), func(t *testing.T) {
			sandbox.LimitLandlockABI(level)
			got := run(t, t.Context(), sandbox.Spec{Entry: "test-attack-server", Args: []string{server, key}, Runner: r})
			for _, what := range []string{"environ", "mem", "key", "kill-0", "kill-term", "ptrace"} {
				if !strings.Contains(got.stdout, what+": ") || strings.Contains(got.stdout, what+": ok\n") {
					t.Errorf("%s was not refused: %s %s", what, got.stdout, got.stderr)
				}
			}
		})
	}
}

// TestRunnerRunsAsItsUser checks the identity the process gets: a user of
// its own from the runner's range (a runner StartRunner started holds
// CAP_SETUID), the runner's group, which reads the shared file, and no
// capability, though the runner keeps three; and that Available reports
// the layers once the runner is the default.
func TestRunnerRunsAsItsUser(t *testing.T) {
	r := startRunner(t)
	dir, err := os.MkdirTemp(r.WorkDir(), "check-*")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "haproxy.cfg"), []byte("global\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sandbox.UseRunner(r)
	t.Cleanup(func() { sandbox.UseRunner(nil) })
	if err := sandbox.ShareDir(dir); err != nil {
		t.Fatal(err)
	}
	caps := sandbox.Available()
	if !caps.SeparateIdentity || caps.RunnerUID != 65534 || caps.RunnerGID != 65534 || caps.ProcessUIDs != sandbox.DefaultProcessUIDs {
		t.Errorf("Available: %+v, want the separate identity 65534:65534 and users of their own for the processes", caps)
	}
	got := run(t, t.Context(), sandbox.Spec{Entry: "test-identity", Dir: dir, Args: []string{"haproxy.cfg"}})
	var uid int
	if _, err := fmt.Sscanf(got.stdout, "%d 65534 [] \"global\\n\" <nil>\n", &uid); err != nil || !inRange(uid, sandbox.DefaultProcessUIDs) {
		t.Errorf("want a user of %v, group 65534, no groups and the shared file read, got %q %q", sandbox.DefaultProcessUIDs, got.stdout, got.stderr)
	}
	privileges := run(t, t.Context(), sandbox.Spec{Entry: "test-privileges"})
	for _, set := range []string{"effective", "permitted", "inheritable", "ambient"} {
		if !strings.Contains(privileges.stdout, set+": 0x0\n") {
			t.Errorf("the %s capability set is not empty in a process the runner started: %s %s", set, privileges.stdout, privileges.stderr)
		}
	}
}

// inRange reports whether id is one of u's.
func inRange(id int, u sandbox.UIDRange) bool { return id >= u.First && id < u.First+u.Count }

// uidOf is the real user id of the process pid.
func uidOf(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var uid int
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			if _, err := fmt.Sscan(v, &uid); err != nil {
				t.Fatal(err)
			}
			return uid
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return 0
}

// TestRunnerAndItsProcessesAreOutOfReach: a process the runner started
// acts on the runner and on another process the runner started (another
// tenant's check) with the calls the kernel allows on a process of the
// same user. With every layer, each is refused (the seccomp filter); with
// neither seccomp nor Landlock, the user of its own each process runs
// under refuses them alone (F_SETOWN itself is allowed on any pid: the
// kernel checks the user when the signal is sent, and sends none).
func TestRunnerAndItsProcessesAreOutOfReach(t *testing.T) {
	requireConfinement(t)
	r := startRunner(t)
	t.Cleanup(func() { sandbox.LimitLandlockABI(-1); sandbox.SimulateNoSeccomp(false) })
	sibling := startSibling(t, sandbox.Spec{Runner: r})
	runnerUID, _ := r.Identity()
	if uid := uidOf(t, sibling); uid == runnerUID || !inRange(uid, r.ProcessUIDs()) {
		t.Errorf("the other process runs as %d: want a user of %v, not the runner's %d", uid, r.ProcessUIDs(), runnerUID)
	}
	targets := map[string]int{"the runner": r.RunnerPid(), "another process of the runner": sibling}
	for target, pid := range targets {
		requireTouchesRefused(t, target, touchProcess(t, sandbox.Spec{Runner: r}, pid))
	}
	sandbox.LimitLandlockABI(0)
	sandbox.SimulateNoSeccomp(true)
	for target, pid := range targets {
		out := touchProcess(t, sandbox.Spec{Runner: r}, pid)
		for _, what := range touches {
			if what != "f_setown" && !strings.Contains(out, what+": operation not permitted\n") {
				t.Errorf("without seccomp and Landlock, %s on %s: want refused for its user, got:\n%s", what, target, out)
			}
		}
	}
}

// startSpinning starts, through r, a shell spinning forever whose argv
// carries a marker of its own, and returns once it runs, with the marker
// and what it writes on stderr.
func startSpinning(ctx context.Context, t *testing.T, r *sandbox.Runner) (*exec.Cmd, string, *lockedBuffer) {
	t.Helper()
	m := marker(t)
	cmd, err := sandbox.Command(ctx, sandbox.Spec{Path: "/bin/sh", Args: []string{"-c", "while :; do :; done", m}, Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(lockedBuffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForProcess(t, m, stderr)
	return cmd, m, stderr
}

// TestRunnerCancelKillsTheProcess ends a process's context: the proxy is
// killed, its connection closes, and the runner kills the process.
func TestRunnerCancelKillsTheProcess(t *testing.T) {
	r := startRunner(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd, m, _ := startSpinning(ctx, t, r)
	cancel()
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("want the proxy killed by SIGKILL, got %v", err)
	}
	waitForNoProcess(t, m)
}

// TestRunnerReportsTheCPUTimeOfAProcessKilledForIt: a process that spends
// its RLIMIT_CPU through the runner is killed, and its caller's
// ProcessState is the proxy's, which hardly used any CPU; the CPU time the
// process used reaches the caller on its stderr, which CPUTime reads (and
// takes out), so that a render worker's kill is worded by its CPU time
// through a runner as without one.
func TestRunnerReportsTheCPUTimeOfAProcessKilledForIt(t *testing.T) {
	r := startRunner(t)
	cmd, err := sandbox.Command(t.Context(), sandbox.Spec{Path: "/bin/sh", Args: []string{"-c", "echo spinning >&2; while :; do :; done"},
		Limits: sandbox.Limits{CPUTime: time.Second}, Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(lockedBuffer)
	cmd.Stderr = stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("want the process killed by SIGKILL for its CPU time, got %v (stderr %q)", err, stderr.String())
	}
	proxyOwn := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	used, rest := sandbox.CPUTime(cmd.ProcessState, stderr.String())
	// The kernel kills on CPU time counted in whole ticks, the report is
	// the scheduler's precise runtime: on a loaded machine the two drift
	// apart (killed at 0.86 s reported, seen at load 20). Half the limit
	// still tells the process's time from the proxy's few milliseconds.
	if used < 500*time.Millisecond || used <= proxyOwn {
		t.Fatalf("CPU time %v (the proxy's own %v), want the process's, near its limit of 1s; stderr %q", used, proxyOwn, stderr.String())
	}
	if rest != "spinning\n" {
		t.Fatalf("stderr without the report: %q, want the process's own output alone", rest)
	}
}

// TestRunnerCrashFailsClearly kills the runner under a running process:
// the process dies with it, and its caller gets the sandbox's setup
// failure, saying so, instead of waiting forever. The runner is started
// again, under its user, and later starts succeed (make run's runner, like
// the chart's container, comes back by itself).
func TestRunnerCrashFailsClearly(t *testing.T) {
	r := startRunner(t)
	cmd, m, stderr := startSpinning(t.Context(), t, r)
	crashed := r.RunnerPid()
	if err := syscall.Kill(crashed, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != sandbox.ExitSetup || !strings.Contains(stderr.String(), "sandbox runner") || !strings.Contains(stderr.String(), "crash") {
		t.Errorf("want exit %d and the runner's end on stderr, got %v: %q", sandbox.ExitSetup, err, stderr.String())
	}
	waitForNoProcess(t, m)

	// A start made while the runner is away waits in the socket's
	// backlog for the restarted runner: it is served, not refused.
	after := run2(t, sandbox.Spec{Path: "/usr/bin/id", Args: []string{"-u"}, Runner: r})
	if uid, err := strconv.Atoi(strings.TrimSpace(after.stdout)); after.exitCode() != 0 || err != nil || !inRange(uid, sandbox.DefaultProcessUIDs) {
		t.Errorf("a start after the crash: want it served by a restarted runner, as a user of %v, got exit %d: %q %q", sandbox.DefaultProcessUIDs, after.exitCode(), after.stdout, after.stderr)
	}
	if now := r.RunnerPid(); now == crashed || now == 0 {
		t.Errorf("want a new runner process, got pid %d (the crashed one was %d)", now, crashed)
	}
}

// TestClosedRunnerStaysClosed: Close stops the runner for good, and a
// start afterwards fails clearly instead of waiting for a restart.
func TestClosedRunnerStaysClosed(t *testing.T) {
	requireRoot(t)
	r, err := sandbox.StartRunner(t.Context(), sandbox.RunnerOptions{UID: 65534, GID: 65534})
	if err != nil {
		t.Fatal(err)
	}
	pid := r.RunnerPid()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.RunnerPid() != 0 {
		t.Errorf("a closed runner was restarted: pid %d", r.RunnerPid())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the closed runner's process %d: want it gone, got %v", pid, err)
	}
	after := run2(t, sandbox.Spec{Path: "/bin/true", Runner: r})
	if after.exitCode() != sandbox.ExitSetup || !strings.Contains(after.stderr, "reaching the sandbox runner") {
		t.Errorf("a start after Close: want exit %d, reaching the runner, got %d: %q", sandbox.ExitSetup, after.exitCode(), after.stderr)
	}
}

// TestRunnerRefusesOtherUsers posts a forged request to a runner serving
// another user (as in the chart, where the socket is open to all and the
// confined processes share the runner's user): it is refused, and nothing
// runs.
func TestRunnerRefusesOtherUsers(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	// The runner runs in a process of its own, as it always does: it sets
	// no_new_privs on its thread, which a test process would pass on to
	// the children it starts later (TestEntryRefusedUnconfined's).
	serve := exec.Command("/proc/self/exe")
	serve.Env = []string{serveRunnerEnv + "=" + dir + ":1234"}
	serve.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var serveErr lockedBuffer
	serve.Stderr = &serveErr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	sock := filepath.Join(dir, sandbox.RunnerSocket)
	var conn *net.UnixConn
	for deadline := time.Now().Add(runTimeout); conn == nil; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("unixpacket", sock)
		if err == nil {
			conn = c.(*net.UnixConn)
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	defer conn.Close()
	proof := filepath.Join(t.TempDir(), "ran")
	req, _ := json.Marshal(map[string]any{"Spec": map[string]any{"Path": "/bin/sh", "Args": []string{"-c", "echo > " + proof}}, "LandlockLimit": -1})
	if _, _, err := conn.WriteMsgUnix(req, unix.UnixRights(0, 1, 2), nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Pid   int
		Error string
	}
	if err := json.Unmarshal(buf[:n], &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Pid != 0 || !strings.Contains(rep.Error, "serves user 1234 only") {
		t.Errorf("a request of user %d: want refused, got %+v", os.Geteuid(), rep)
	}
	if _, err := os.Stat(proof); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the forged request ran: %v", err)
	}
	if _, err := sandbox.ConnectRunner(t.Context(), dir); err == nil || !strings.Contains(err.Error(), "serves user 1234 only") {
		t.Errorf("ConnectRunner as another user: want refused, got %v", err)
	}
}

// run2 starts spec and waits, returning setup failures instead of failing.
func run2(t *testing.T, spec sandbox.Spec) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd, err := sandbox.Command(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// waitForProcess waits until the confined sh with marker m runs (not
// only the proxy, whose argv holds it too).
func waitForProcess(t *testing.T, m string, stderr *lockedBuffer) {
	t.Helper()
	running := func() bool {
		for _, pid := range processesWith(t, m) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "sh" {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(runTimeout); !running(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no process with %s started: %s", m, stderr.String())
		}
	}
}

// waitForNoProcess waits until no process with marker m is left (the
// runner kills asynchronously, once the connection has closed).
func waitForNoProcess(t *testing.T, m string) {
	t.Helper()
	for deadline := time.Now().Add(runTimeout); len(processesWith(t, m)) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			requireNoProcesses(t, m)
		}
	}
}

// TestRunnerInItsOwnContainer runs the runner as the chart does: its own
// process under 65533:65533 (a container of its own), serving the server's
// user on a socket in a directory both share (an emptyDir with the runner's
// group as fsGroup). The server connects, writes a check directory there,
// and the process reads it under the runner's identity.
func TestRunnerInItsOwnContainer(t *testing.T) {
	requireRoot(t)
	dir, err := os.MkdirTemp("", "gatehouse-emptydir-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// What the kubelet makes of an emptyDir with fsGroup 65533.
	if err := os.Chown(dir, 0, 65533); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{serveRunnerEnv + "=" + dir + ":" + strconv.Itoa(os.Geteuid())}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65533, Gid: 65533, Groups: []uint32{}}, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The runner may start after the server: ConnectRunner waits for it.
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	r, err := sandbox.ConnectRunner(ctx, dir)
	if err != nil {
		t.Fatalf("%v (runner: %s)", err, stderr.String())
	}
	if uid, gid := r.Identity(); uid != 65533 || gid != 65533 {
		t.Errorf("the runner's identity %d:%d, want 65533:65533", uid, gid)
	}
	sandbox.UseRunner(r)
	t.Cleanup(func() { sandbox.UseRunner(nil) })
	check, err := os.MkdirTemp(sandbox.WorkDir(), "check-*")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(check, "haproxy.cfg"), []byte("global\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.ShareDir(check); err != nil {
		t.Fatal(err)
	}
	got := run(t, t.Context(), sandbox.Spec{Entry: "test-identity", Dir: check, Args: []string{"haproxy.cfg"}})
	if got.stdout != "65533 65533 [] \"global\\n\" <nil>\n" {
		t.Errorf("want the process as 65533:65533 reading the shared file, got %q %q", got.stdout, got.stderr)
	}
}

func standInServer(args []string) int {
	mode, dir, key := args[0], args[1], args[2]
	// A SIGTERM that gets through must not end it before it reports.
	signal.Ignore(syscall.SIGTERM)
	sandbox.LimitLandlockABI(0)
	sandbox.SimulateNoSeccomp(true)
	spec := sandbox.Spec{Entry: "test-attack-server", Args: []string{strconv.Itoa(os.Getpid()), key}}
	if mode == "runner" {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		r, err := sandbox.ConnectRunner(ctx, dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		spec.Runner = r
	}
	cmd, err := sandbox.Command(context.Background(), spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestSeparateIdentityProtectsANonRootServer is the chart's case: the
// server runs as a user without capabilities (65532), the runner as
// another (65533, its own process), and there is neither Landlock nor
// seccomp. Started by the server itself, the attack reads the server's
// environment, memory and key, signals and traces it; through the runner
// every one of them is refused.
func TestSeparateIdentityProtectsANonRootServer(t *testing.T) {
	requireRoot(t)
	const server, runner = 65532, 65533
	dir, err := os.MkdirTemp("", "gatehouse-emptydir-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, 0, runner); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	key := keyFile(t)
	if err := os.Chown(key, server, server); err != nil {
		t.Fatal(err)
	}
	serve := exec.Command("/proc/self/exe")
	serve.Env = []string{serveRunnerEnv + "=" + dir + ":" + strconv.Itoa(server)}
	var serveErr lockedBuffer
	serve.Stderr = &serveErr
	serve.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: runner, Gid: runner, Groups: []uint32{}}, Pdeathsig: syscall.SIGKILL}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })

	attack := func(mode string) string {
		t.Helper()
		cmd := exec.Command("/proc/self/exe")
		cmd.Env = []string{standInEnv + "=" + mode + ":" + dir + ":" + key}
		var stdout, stderr lockedBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		// The runner's group too, as the Pod's fsGroup gives it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: server, Gid: server, Groups: []uint32{runner}}, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Run(); err != nil {
			t.Fatalf("the stand-in server (%s): %v: %s (runner: %s)", mode, err, stderr.String(), serveErr.String())
		}
		return stdout.String()
	}
	direct := attack("direct")
	for _, what := range []string{"environ", "mem", "key", "kill-0", "kill-term", "ptrace"} {
		if !strings.Contains(direct, what+": ok\n") {
			t.Errorf("started by the server itself, without Landlock and seccomp, want %s to get through (the premise): %s", what, direct)
		}
	}
	separated := attack("runner")
	for _, what := range []string{"environ", "mem", "key", "kill-0", "kill-term", "ptrace"} {
		if !strings.Contains(separated, what+": ") || strings.Contains(separated, what+": ok\n") {
			t.Errorf("through the runner, want %s refused: %s", what, separated)
		}
	}
}
