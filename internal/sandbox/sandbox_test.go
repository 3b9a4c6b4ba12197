//go:build linux

package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// Entries of the test binary: Command runs it again in these modes.
func init() {
	if m := os.Getenv(confiningParentEnv); m != "" {
		// Not an entry: an unconfined parent for TestParentDeath,
		// started with exec.Command.
		os.Exit(confiningParent(m))
	}
	switch {
	case sandbox.Entry("test-alloc"):
		os.Exit(entryAlloc(os.Args[1:]))
	case sandbox.Entry("test-net"):
		os.Exit(entryNet(os.Args[1], os.Args[2]))
	case sandbox.Entry("test-fork"):
		os.Exit(entryFork(os.Args[1]))
	case sandbox.Entry("test-signal-parent"):
		os.Exit(entrySignalParent())
	case sandbox.Entry("test-wait-stdin"):
		// Blocks until stdin closes: a live confined Go process to
		// inspect from outside.
		_, _ = bytes.NewBuffer(nil).ReadFrom(os.Stdin)
		os.Exit(0)
	case sandbox.Entry("test-true"):
		os.Exit(0)
	case sandbox.Entry("test-privileges"):
		os.Exit(entryPrivileges())
	}
}

// entryAlloc allocates os.Args[1] MiB and prints "ok"; with a second
// argument "touch" it also writes every page (so the memory is used, not
// only reserved); with "pieces" it allocates it in 64 KiB objects.
func entryAlloc(args []string) int {
	mib, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if len(args) > 1 && args[1] == "pieces" {
		// As a rendering allocates: many objects, the heap growing arena
		// by arena.
		pieces := make([][]byte, 0, mib*16)
		for range mib * 16 {
			pieces = append(pieces, make([]byte, 64<<10))
		}
		fmt.Println("ok", len(pieces)*64<<10)
		return 0
	}
	b := make([]byte, mib<<20)
	if len(args) > 1 && args[1] == "touch" {
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
	}
	fmt.Println("ok", len(b))
	if len(args) > 2 && args[2] == "wait" {
		_, _ = bytes.NewBuffer(nil).ReadFrom(os.Stdin)
	}
	return 0
}

// entryNet tries the network operation mode on addr and prints the
// outcome: it returns 3 when refused, 0 when it got through.
func entryNet(mode, addr string) int {
	var err error
	switch mode {
	case "tcp-connect", "unix-connect":
		var c net.Conn
		network := strings.TrimSuffix(mode, "-connect")
		if c, err = net.DialTimeout(network, addr, 5*time.Second); err == nil {
			c.Close()
		}
	case "mptcp-connect":
		// What native code could do: Landlock checks TCP sockets only.
		var fd int
		if fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, unix.IPPROTO_MPTCP); err == nil {
			defer syscall.Close(fd)
			ap := netip.MustParseAddrPort(addr)
			err = syscall.Connect(fd, &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
		}
	case "tcp-listen":
		var l net.Listener
		if l, err = net.Listen("tcp", addr); err == nil {
			l.Close()
		}
	default:
		fmt.Println("unknown mode", mode)
		return 2
	}
	if err != nil {
		fmt.Println("refused:", err)
		return 3
	}
	fmt.Println("got through")
	return 0
}

// forkModes are the ways entryFork creates a process.
func forkModes() []string {
	modes := []string{"clone", "vfork-like clone", "clone3"}
	for m := range archForkCalls {
		modes = append(modes, m)
	}
	slices.Sort(modes)
	return modes
}

// entryFork creates a process with a raw system call, as native code
// would; the child starts a new session (out of reach of a process group
// kill) and sleeps forever. It prints the refusal and returns 3, or
// returns 0 if a child was created. Only the child of "vfork" and
// "vfork-like clone" would block the parent until killed.
func entryFork(mode string) int {
	var r1 uintptr
	var errno syscall.Errno
	switch nr, ok := archForkCalls[mode]; {
	case ok:
		r1, _, errno = syscall.RawSyscall(nr, 0, 0, 0)
	case mode == "clone":
		r1, _, errno = syscall.RawSyscall6(unix.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	case mode == "vfork-like clone":
		// posix_spawn's flags, without CLONE_VM (the child runs Go
		// code on a copy of the stack).
		r1, _, errno = syscall.RawSyscall6(unix.SYS_CLONE, unix.CLONE_VFORK|uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	case mode == "clone3":
		// struct clone_args, version 0: flags, pidfd, child_tid,
		// parent_tid, exit_signal, stack, stack_size, tls.
		var args [8]uint64
		args[4] = uint64(syscall.SIGCHLD)
		r1, _, errno = syscall.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
	default:
		fmt.Println("unknown mode", mode)
		return 2
	}
	if errno != 0 {
		fmt.Println("refused:", errno.Error())
		return 3
	}
	if r1 == 0 {
		// The child: only raw system calls after a fork of a Go process.
		syscall.RawSyscall(syscall.SYS_SETSID, 0, 0, 0)
		ts := syscall.Timespec{Sec: 1000}
		for {
			syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		}
	}
	fmt.Println("created", r1)
	return 0
}

// entrySignalParent sends signal 0 to its parent (the test process) and
// to itself.
func entrySignalParent() int {
	if err := syscall.Kill(os.Getpid(), 0); err != nil {
		fmt.Println("self:", err)
		return 2
	}
	if err := syscall.Kill(os.Getppid(), 0); err != nil {
		fmt.Println("parent:", err)
		return 3
	}
	fmt.Println("parent signalled")
	return 0
}

// requireConfinement fails (never skips) the test where the kernel
// cannot give the guarantees the test checks.
func requireConfinement(t testing.TB) {
	t.Helper()
	caps := sandbox.Available()
	if !caps.Complete() || caps.LandlockABI < 6 {
		t.Fatalf("this kernel cannot confine fully (Landlock ABI %d, seccomp %v): missing %s. "+
			"The confinement tests need Landlock (ABI 6 to test every level) and seccomp filters, as the CI kernel has; "+
			"they fail rather than skip so that a weaker kernel cannot pass them silently",
			caps.LandlockABI, caps.Seccomp, strings.Join(caps.Missing(), "; "))
	}
}

// marker returns a string unique to this test run, to find processes by.
func marker(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "gatehouse-sandbox-test-" + hex.EncodeToString(b)
}

// result is the outcome of a confined run.
type result struct {
	stdout, stderr string
	err            error
	pid            int
}

// exitCode is the exit status, or -1 when killed by a signal.
func (r result) exitCode() int {
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		return ee.ExitCode()
	}
	if r.err != nil {
		return -2
	}
	return 0
}

// runTimeout bounds every run: a confinement that fails can leave a
// process blocked (a vfork child that never execs); the test then fails on
// what it checks instead of hanging.
const runTimeout = 30 * time.Second

// run starts spec confined and waits for it.
func run(t testing.TB, ctx context.Context, spec sandbox.Spec) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	cmd, err := sandbox.Command(ctx, spec)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	err = cmd.Wait()
	r := result{stdout: stdout.String(), stderr: stderr.String(), err: err, pid: cmd.Process.Pid}
	if r.exitCode() == sandbox.ExitSetup {
		t.Fatalf("the confinement could not be set up: %s", r.stderr)
	}
	return r
}

// sh runs script with the confined /bin/sh; extra are its $0, $1, ...
func sh(t testing.TB, ctx context.Context, spec sandbox.Spec, script string, extra ...string) result {
	t.Helper()
	spec.Path = "/bin/sh"
	spec.Args = append([]string{"-c", script}, extra...)
	if spec.Dir == "" {
		spec.Dir = t.TempDir()
	}
	return run(t, ctx, spec)
}

// lockedBuffer is a bytes.Buffer that a test may read while os/exec
// writes the process's output into it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// processesWith lists the pids of live processes whose argv contains s.
func processesWith(t testing.TB, s string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		if bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// requireNoProcesses fails if a process whose argv holds m is alive.
func requireNoProcesses(t testing.TB, m string) {
	t.Helper()
	if pids := processesWith(t, m); len(pids) > 0 {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("processes %v with marker %s outlived the confined run", pids, m)
	}
}

func TestShellCannotReadOutsideItsFiles(t *testing.T) {
	requireConfinement(t)
	// Control: the files exist and the test itself can read them.
	for _, f := range []string{"/etc/passwd", fmt.Sprintf("/proc/%d/environ", os.Getpid())} {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatalf("control: the test cannot read %s itself: %v", f, err)
		}
	}
	dir, other := t.TempDir(), t.TempDir()
	for path, content := range map[string]string{
		filepath.Join(dir, "mine"):       "own file",
		filepath.Join(other, "granted"):  "granted file",
		filepath.Join(other, "withheld"): "withheld file",
	} {
		if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := sh(t, t.Context(), sandbox.Spec{Dir: dir, Read: []string{filepath.Join(other, "granted")}}, `
		read l < mine && echo "own:$l"
		read l < "$1/granted" && echo "granted:$l"
		if read l < "$1/withheld"; then echo "LEAK withheld:$l"; fi
		if ls "$1" >/dev/null; then echo "LEAK listed a granted file's directory"; fi
		if read l < /etc/passwd; then echo "LEAK passwd:$l"; fi
		if read l < /proc/$PPID/environ; then echo "LEAK environ:$l"; fi
		if read l < /proc/self/environ; then echo "LEAK self-environ"; fi
		if ls / >/dev/null; then echo "LEAK listed /"; fi
		if echo x > written; then echo "LEAK wrote a file"; fi
		if echo x > /tmp/`+marker(t)+`; then echo "LEAK wrote /tmp"; fi
		echo done`, "sh", other)
	if r.err != nil {
		t.Fatalf("sh failed: %v\nstdout: %s\nstderr: %s", r.err, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "own:own file") || !strings.Contains(r.stdout, "granted:granted file") || !strings.Contains(r.stdout, "done") {
		t.Fatalf("sh could not read its own directory (the rules are too tight to mean anything):\n%s\n%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "LEAK") {
		t.Errorf("confined sh got through:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("expected permission denials on stderr, got:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "written")); err == nil {
		t.Errorf("confined sh created a file in its directory")
	}
}

func TestShellCannotExecOtherPrograms(t *testing.T) {
	requireConfinement(t)
	// exec replaces the shell without forking: only Landlock's execute
	// right stands in the way.
	r := sh(t, t.Context(), sandbox.Spec{}, `exec /bin/cat /dev/null`)
	if r.exitCode() == 0 {
		t.Fatalf("exec /bin/cat succeeded under confinement")
	}
	if !strings.Contains(r.stderr, "Permission denied") {
		t.Fatalf("exec /bin/cat: want a permission denial, got exit %d, stderr %q", r.exitCode(), r.stderr)
	}
	// Library directories are readable, not executable: libc is also a
	// program.
	libc := map[string]string{"amd64": "/lib/x86_64-linux-gnu/libc.so.6", "arm64": "/lib/aarch64-linux-gnu/libc.so.6"}[runtime.GOARCH]
	if out, err := exec.Command(libc).CombinedOutput(); err != nil {
		t.Fatalf("control: %s does not run unconfined: %v\n%s", libc, err, out)
	}
	r = sh(t, t.Context(), sandbox.Spec{}, `exec `+libc)
	if r.exitCode() == 0 || !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("exec %s: want a permission denial, got exit %d, stdout %q, stderr %q", libc, r.exitCode(), r.stdout, r.stderr)
	}
	// The dynamic linker may execute (it is the program's interpreter),
	// but cannot read another program to run it.
	ldso := map[string]string{"amd64": "/lib64/ld-linux-x86-64.so.2", "arm64": "/lib/ld-linux-aarch64.so.1"}[runtime.GOARCH]
	if out, err := exec.Command(ldso, "/bin/cat", "/dev/null").CombinedOutput(); err != nil {
		t.Fatalf("control: %s /bin/cat does not run unconfined: %v\n%s", ldso, err, out)
	}
	r = sh(t, t.Context(), sandbox.Spec{}, `exec `+ldso+` /bin/cat /dev/null`)
	if r.exitCode() == 0 || !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("running /bin/cat through the dynamic linker: want a permission denial, got exit %d, stderr %q", r.exitCode(), r.stderr)
	}
}

func TestShellCannotFork(t *testing.T) {
	requireConfinement(t)
	// Each script forks; the forked copies of sh need no exec to live on
	// (a loop), so only the ban on creating processes stops them. $0 is
	// the marker, in the argv of every copy.
	for name, script := range map[string]string{
		"subshell":     `(while :; do :; done) & echo started`,
		"group":        `{ while :; do :; done; } & echo started`,
		"substitution": `x=$(echo started); echo "$x"`,
		"pipeline":     `echo started | while read l; do echo "$l"; done`,
		"setsid":       `setsid sleep 100 "$0"; echo started`,
	} {
		t.Run(name, func(t *testing.T) {
			m := marker(t)
			r := sh(t, t.Context(), sandbox.Spec{}, script, m)
			if strings.Contains(r.stdout, "started") {
				t.Errorf("the shell created a process:\nstdout %q\nstderr %q", r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, "fork") {
				t.Errorf("want a fork failure on stderr, got %q (exit %d)", r.stderr, r.exitCode())
			}
			requireNoProcesses(t, m)
		})
	}
}

// TestForkSyscallsRefused forks with the raw system calls, as native code
// would: the child would start a new session, out of reach of a process
// group kill, and live on.
func TestForkSyscallsRefused(t *testing.T) {
	requireConfinement(t)
	for _, mode := range forkModes() {
		t.Run(mode, func(t *testing.T) {
			m := marker(t)
			r := run(t, t.Context(), sandbox.Spec{Entry: "test-fork", Args: []string{mode, m}})
			want := "operation not permitted"
			if mode == "clone3" {
				want = "function not implemented"
			}
			if r.exitCode() != 3 || !strings.Contains(r.stdout, want) {
				t.Errorf("%s: want refusal %q (exit 3), got exit %d, stdout %q, stderr %q", mode, want, r.exitCode(), r.stdout, r.stderr)
			}
			requireNoProcesses(t, m)
		})
	}
}

func TestEnvironmentIsEmpty(t *testing.T) {
	requireConfinement(t)
	secret := marker(t)
	t.Setenv("GATEHOUSE_TEST_SECRET", secret)
	r := sh(t, t.Context(), sandbox.Spec{}, `export -p; set`)
	if r.err != nil {
		t.Fatalf("sh: %v: %s", r.err, r.stderr)
	}
	if strings.Contains(r.stdout, secret) || strings.Contains(r.stdout, "GATEHOUSE_TEST_SECRET") {
		t.Errorf("the parent's environment reached the confined process:\n%s", r.stdout)
	}
	// dash exports PWD itself; anything else exported came in.
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "export ") && !strings.HasPrefix(line, "export PWD=") {
			t.Errorf("inherited variable in the confined environment: %s", line)
		}
	}
	// Spec.Env is the whole environment.
	r = sh(t, t.Context(), sandbox.Spec{Env: []string{"ONLY=this"}}, `export -p`)
	if !strings.Contains(r.stdout, "ONLY='this'") || strings.Contains(r.stdout, secret) {
		t.Errorf("Spec.Env not passed as the whole environment:\n%s", r.stdout)
	}
}

// stat returns the fields of /proc/<pid>/stat (or a task's) after the
// command name, so that field n (1-based, as in proc(5)) is fields[n-3].
func stat(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		t.Fatalf("%s: no command name in %q", path, b)
	}
	return strings.Fields(string(b[i+1:]))
}

// niceOf is the nice value (field 19) of a /proc stat file.
func niceOf(t testing.TB, path string) int {
	t.Helper()
	n, err := strconv.Atoi(stat(t, path)[19-3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startBlocked starts spec with a stdin pipe, waits until the program
// (argv[0], not the trampoline's) runs, and returns the command and a
// function closing its stdin.
func startBlocked(t *testing.T, spec sandbox.Spec, argv0 string) (*exec.Cmd, func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	t.Cleanup(cancel)
	cmd, err := sandbox.Command(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(lockedBuffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitForArgv0(t, cmd.Process.Pid, argv0, stderr)
	return cmd, stdin.Close
}

// waitForArgv0 waits until process pid runs the program whose argv[0] is
// argv0 (the trampoline has executed it).
func waitForArgv0(t *testing.T, pid int, argv0 string, stderr *lockedBuffer) {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/cmdline", pid)
	for deadline := time.Now().Add(runTimeout); ; time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if first, _, _ := bytes.Cut(b, []byte{0}); err == nil && string(first) == argv0 {
			return
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("the confined %s did not start: %v; stderr: %s", argv0, err, stderr.String())
		}
	}
}

func TestNiceness(t *testing.T) {
	requireConfinement(t)
	const added = 7
	parent := niceOf(t, "/proc/thread-self/stat")
	want := min(parent+added, 19)
	if want == parent {
		t.Fatalf("the test runs at nice %d already: it cannot tell an added niceness", parent)
	}
	for _, spec := range []sandbox.Spec{
		{Path: "/bin/sh", Args: []string{"-c", "read x; exit 0"}, Dir: t.TempDir(), Limits: sandbox.Limits{Nice: added}},
		// Go starts threads of its own: every thread must have it,
		// niceness being per thread on Linux.
		{Entry: "test-wait-stdin", Dir: t.TempDir(), Limits: sandbox.Limits{Nice: added}},
	} {
		argv0 := "sh"
		if spec.Entry != "" {
			argv0 = "gatehouse-sandbox-entry:" + spec.Entry
		}
		cmd, closeStdin := startBlocked(t, spec, argv0)
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", cmd.Process.Pid))
		if err != nil || len(tasks) == 0 {
			t.Fatalf("no tasks of %d: %v", cmd.Process.Pid, err)
		}
		for _, task := range tasks {
			if got := niceOf(t, task); got != want {
				t.Errorf("%s %s: nice %d, want the parent's %d + %d = %d", argv0, task, got, parent, added, want)
			}
		}
		closeStdin()
		if err := cmd.Wait(); err != nil {
			t.Errorf("%s: %v", argv0, err)
		}
	}
}

func TestCancelKillsEverything(t *testing.T) {
	requireConfinement(t)
	m := marker(t)
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd, err := sandbox.Command(ctx, sandbox.Spec{Path: "/bin/sh", Args: []string{"-c", "while :; do :; done", m}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(lockedBuffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	statPath := fmt.Sprintf("/proc/%d/stat", pid)
	// Wait until the loop has used CPU: it runs, as sh.
	for deadline := time.Now().Add(runTimeout); ; time.Sleep(10 * time.Millisecond) {
		f := stat(t, statPath)
		utime, _ := strconv.Atoi(f[14-3])
		stime, _ := strconv.Atoi(f[15-3])
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "sh" && utime+stime > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the busy loop used no CPU; stderr: %s", stderr.String())
		}
	}
	cancel()
	canceled := time.Now()
	err = cmd.Wait()
	if waited := time.Since(canceled); waited > time.Second {
		t.Errorf("Wait returned %v after the context ended, want within a second", waited)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("want the loop killed by SIGKILL, got %v", err)
	}
	if _, err := os.Stat(statPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid %d still exists after Wait (%v): its CPU time has not stopped", pid, err)
	}
	requireNoProcesses(t, m)
}

func TestCPUTimeLimit(t *testing.T) {
	requireConfinement(t)
	// The context is a backstop only: the process must die of its CPU
	// limit long before it.
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd, err := sandbox.Command(ctx, sandbox.Spec{Path: "/bin/sh", Args: []string{"-c", "while :; do :; done"},
		Dir: t.TempDir(), Limits: sandbox.Limits{CPUTime: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the loop ran until the context ended (%v): RLIMIT_CPU did not stop it", runTimeout)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("want the loop killed by SIGKILL at its CPU limit, got %v", err)
	}
	ru := ee.SysUsage().(*syscall.Rusage)
	// The kernel kills at 1 s of its precise CPU clock, while rusage
	// reports user and system time scaled from tick samples: on a busy
	// machine they came to 899 ms at the kill. Well under that would be
	// a kill by something else (the context, a signal).
	if used := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()); used < 750*time.Millisecond {
		t.Errorf("killed after %v of CPU: not by RLIMIT_CPU (1s)", used)
	}
}

func TestOpenFilesLimit(t *testing.T) {
	requireConfinement(t)
	r := sh(t, t.Context(), sandbox.Spec{Limits: sandbox.Limits{OpenFiles: 17}}, "ulimit -n; ulimit -Hn; ulimit -c; ulimit -f")
	if r.err != nil {
		t.Fatalf("sh: %v: %s", r.err, r.stderr)
	}
	if got, want := strings.Fields(r.stdout), []string{"17", "17", "0", "0"}; !slices.Equal(got, want) {
		t.Errorf("ulimit -n, -Hn, -c, -f = %v, want %v", got, want)
	}
	// Without a limit the program gets the usual soft default, not the
	// hard limit the Go runtime raised the trampoline's soft limit to.
	var hard syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &hard); err != nil {
		t.Fatal(err)
	}
	r = sh(t, t.Context(), sandbox.Spec{}, "ulimit -n; ulimit -Hn")
	want := []string{strconv.FormatUint(min(hard.Max, 1024), 10), strconv.FormatUint(hard.Max, 10)}
	if hard.Max == unix.RLIM_INFINITY {
		want[1] = "unlimited"
	}
	if got := strings.Fields(r.stdout); !slices.Equal(got, want) {
		t.Errorf("without a limit: ulimit -n, -Hn = %v, want %v", got, want)
	}
}

// refusedNet says whether test-net was refused (exit 3) by the
// confinement: Landlock (permission denied) or the seccomp filter (not
// permitted, family or protocol not supported).
func refusedNet(r result) bool {
	return r.exitCode() == 3 && (strings.Contains(r.stdout, "permission denied") || strings.Contains(r.stdout, "not permitted") ||
		strings.Contains(r.stdout, "protocol not supported") || strings.Contains(r.stdout, "address family not supported"))
}

// pathSocket listens on a pathname Unix socket, as a CI runner's
// docker.sock or a node's containerd socket, accepting until the test ends.
func pathSocket(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	c.Close()
	return path
}

// countingListener is a TCP listener on loopback that counts the
// connections it accepts, until the test ends.
func countingListener(t *testing.T) (net.Listener, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := new(atomic.Int32)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return l, accepted
}

func TestNetwork(t *testing.T) {
	requireConfinement(t)
	l, accepted := countingListener(t)
	// Control: the listener takes connections.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	c.Close()
	abstract := "@" + marker(t)
	ul, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	uc, err := net.Dial("unix", abstract)
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	uc.Close()

	for _, tc := range []struct{ mode, addr string }{
		{"tcp-connect", l.Addr().String()},
		{"mptcp-connect", l.Addr().String()},
		{"tcp-listen", "127.0.0.1:0"},
		{"tcp-listen", freePort(t)},
		{"unix-connect", abstract},
		{"unix-connect", pathSocket(t)},
	} {
		r := run(t, t.Context(), sandbox.Spec{Entry: "test-net", Args: []string{tc.mode, tc.addr}})
		if !refusedNet(r) {
			t.Errorf("%s %s: want a refusal, got exit %d: %s %s", tc.mode, tc.addr, r.exitCode(), r.stdout, r.stderr)
		}
	}
	time.Sleep(50 * time.Millisecond) // let a connection that got through be counted
	if n := accepted.Load(); n != 1 {
		t.Errorf("the listener accepted %d connections, want only the control's", n)
	}
}

// freePort returns a local TCP address nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestCannotSignalOutside(t *testing.T) {
	requireConfinement(t)
	r := sh(t, t.Context(), sandbox.Spec{}, `kill -0 $$ && echo self-ok; if kill -0 $PPID; then echo PARENT-SIGNALLED; fi`)
	if !strings.Contains(r.stdout, "self-ok") {
		t.Fatalf("the shell could not signal itself (the check means nothing): %q %q", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "PARENT-SIGNALLED") || !strings.Contains(r.stderr, "Operation not permitted") {
		t.Errorf("kill -0 $PPID: want refused, got stdout %q stderr %q", r.stdout, r.stderr)
	}
	r = run(t, t.Context(), sandbox.Spec{Entry: "test-signal-parent"})
	if r.exitCode() != 3 || !strings.Contains(r.stdout, "operation not permitted") {
		t.Errorf("Go entry signalling its parent: want refused (exit 3), got exit %d: %q %q", r.exitCode(), r.stdout, r.stderr)
	}
}

// entryPrivileges prints the confined process's capability sets and what
// the privileged calls an escaping program would try answer, one
// "name: result" per line.
func entryPrivileges() int {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		fmt.Println("capget:", err)
		return 2
	}
	fmt.Printf("effective: %#x\npermitted: %#x\ninheritable: %#x\n",
		uint64(data[1].Effective)<<32|uint64(data[0].Effective),
		uint64(data[1].Permitted)<<32|uint64(data[0].Permitted),
		uint64(data[1].Inheritable)<<32|uint64(data[0].Inheritable))
	var bounding, ambient uint64
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if v, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && v == 1 {
			bounding |= 1 << c
		}
		if v, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0); err == nil && v == 1 {
			ambient |= 1 << c
		}
	}
	fmt.Printf("bounding: %#x\nambient: %#x\n", bounding, ambient)
	errText := func(err error) string {
		if err == nil {
			return "allowed"
		}
		return err.Error()
	}
	dir, err := os.MkdirTemp("", "mount-target")
	if err == nil {
		defer os.Remove(dir)
	}
	fmt.Println("mount:", errText(unix.Mount("none", dir, "tmpfs", 0, "")))
	fmt.Println("init_module:", errText(unix.InitModule(nil, "")))
	// An invalid magic: were the call let through with CAP_SYS_BOOT, the
	// kernel would answer EINVAL, and nothing reboots.
	_, _, e := unix.Syscall6(unix.SYS_REBOOT, 0, 0, 0, 0, 0, 0)
	fmt.Println("reboot:", errText(errnoErr(e)))
	fmt.Println("sethostname:", errText(unix.Sethostname([]byte("confined"))))
	fmt.Println("ptrace parent:", errText(unix.PtraceAttach(os.Getppid())))
	return 0
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// TestNoPrivilegeSurvivesIntoTheConfinement: whatever user runs the tests
// (CI and make run run as root, with every capability), the confined
// process holds no capability in any set, and the privileged calls an
// escape would use are refused.
func TestNoPrivilegeSurvivesIntoTheConfinement(t *testing.T) {
	requireConfinement(t)
	r := run(t, t.Context(), sandbox.Spec{Entry: "test-privileges"})
	if r.err != nil {
		t.Fatalf("test-privileges: %v\n%s%s", r.err, r.stdout, bound(r.stderr))
	}
	t.Logf("as uid %d:\n%s", os.Geteuid(), r.stdout)
	for _, set := range []string{"effective", "permitted", "inheritable", "bounding", "ambient"} {
		if !strings.Contains(r.stdout, set+": 0x0\n") {
			t.Errorf("the %s capability set is not empty in the confined process", set)
		}
	}
	for _, call := range []string{"mount", "init_module", "reboot", "sethostname", "ptrace parent"} {
		if !strings.Contains(r.stdout, call+": operation not permitted\n") {
			t.Errorf("%s was not refused with EPERM", call)
		}
	}
}

// TestConfinementAtEveryLandlockLevel runs the attacks on the confinement
// as the kernels platforms run would confine them (LimitLandlockABI): none
// (a kernel without the LSM, or with it not enabled: GKE's COS by default,
// OpenShift 4), 1 (Ubuntu 22.04's 5.15: files only), 4 (6.7-6.11: TCP
// too) and 6 (6.12 and later: signals and abstract sockets scoped). What
// Landlock lacks at a level, the seccomp filter and the dropped
// capabilities hold; files alone need Landlock (level 0 leaves them to file
// permissions, which configcheck answers by refusing Lua there).
func TestConfinementAtEveryLandlockLevel(t *testing.T) {
	requireConfinement(t)
	t.Cleanup(func() { sandbox.LimitLandlockABI(-1) })
	l, accepted := countingListener(t)
	abstract := "@" + marker(t)
	ul, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	dockerSock := pathSocket(t)
	secret := marker(t)
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte(secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, level := range []int{0, 1, 4, 6} {
		t.Run(fmt.Sprintf("landlock-abi-%d", level), func(t *testing.T) {
			sandbox.LimitLandlockABI(level)
			if got := sandbox.Available().LandlockABI; got != level {
				t.Fatalf("Available reports ABI %d under the limit %d", got, level)
			}
			for _, tc := range []struct{ mode, addr string }{
				{"tcp-connect", l.Addr().String()},
				{"mptcp-connect", l.Addr().String()},
				{"tcp-listen", "127.0.0.1:0"},
				{"unix-connect", abstract},
				{"unix-connect", dockerSock},
			} {
				if r := run(t, t.Context(), sandbox.Spec{Entry: "test-net", Args: []string{tc.mode, tc.addr}}); !refusedNet(r) {
					t.Errorf("%s %s: want a refusal, got exit %d: %s %s", tc.mode, tc.addr, r.exitCode(), r.stdout, r.stderr)
				}
			}
			if r := run(t, t.Context(), sandbox.Spec{Entry: "test-signal-parent"}); r.exitCode() != 3 || !strings.Contains(r.stdout, "operation not permitted") {
				t.Errorf("signalling its parent (Gatehouse): want refused, got exit %d: %q %q", r.exitCode(), r.stdout, r.stderr)
			}
			for _, mode := range forkModes() {
				if r := run(t, t.Context(), sandbox.Spec{Entry: "test-fork", Args: []string{mode}}); r.exitCode() != 3 {
					t.Errorf("fork by %s: want refused (exit 3), got exit %d: %q %q", mode, r.exitCode(), r.stdout, r.stderr)
				}
			}
			r := run(t, t.Context(), sandbox.Spec{Entry: "test-privileges"})
			for _, set := range []string{"effective", "permitted", "bounding", "ambient"} {
				if !strings.Contains(r.stdout, set+": 0x0\n") {
					t.Errorf("the %s capability set is not empty: %s %s", set, r.stdout, r.stderr)
				}
			}
			for _, call := range []string{"mount", "init_module", "reboot", "ptrace parent"} {
				if !strings.Contains(r.stdout, call+": operation not permitted\n") {
					t.Errorf("%s was not refused: %s", call, r.stdout)
				}
			}
			// Files: Landlock's alone.
			r = sh(t, t.Context(), sandbox.Spec{}, `read line < "$1" && echo "read: $line"`, "sh", outside)
			if level == 0 {
				if !strings.Contains(r.stdout, "read: "+secret) {
					t.Errorf("without Landlock a world-readable file outside is read (file permissions only): this test's premise changed: %q %q", r.stdout, r.stderr)
				}
			} else if strings.Contains(r.stdout, secret) || !strings.Contains(r.stderr, "Permission denied") {
				t.Errorf("a file outside its directory was read at Landlock ABI %d: %q %q", level, r.stdout, r.stderr)
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // let a connection that got through be counted
	if n := accepted.Load(); n != 0 {
		t.Errorf("the TCP listener accepted %d connections from confined processes", n)
	}
}

// memoryUse runs the test-alloc entry on 10 MiB without a limit and
// returns, once it has allocated, its peak address space (VmPeak) and its
// data (VmData, what RLIMIT_DATA counts).
func memoryUse(t *testing.T) (peak, data uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd, err := sandbox.Command(ctx, sandbox.Spec{Entry: "test-alloc", Args: []string{"10", "touch", "wait"}})
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if !strings.HasPrefix(line, "ok") {
		t.Fatalf("test-alloc 10: %q, %v", line, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	field := func(name string) uint64 {
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return kb << 10
			}
		}
		t.Fatalf("no %s in %s", name, status)
		return 0
	}
	return field("VmPeak"), field("VmData")
}

func TestAddressSpaceLimit(t *testing.T) {
	requireConfinement(t)
	// A Go runtime reserves much address space at start (heap arena
	// index, page allocator summaries, scavenger index: about 1.2 GiB on
	// amd64), and does with less when a reservation fails, by accident
	// rather than design: below that, whether it starts depends on the
	// limit non-monotonically. So the limit here is what the entry
	// reserved without one, plus 256 MiB.
	peak, _ := memoryUse(t)
	limits := sandbox.Limits{AddressSpace: peak + 256<<20}
	t.Logf("test-alloc 10 peaks at %d MiB of address space unlimited (race detector: %v); limit %d MiB",
		peak>>20, raceEnabled, limits.AddressSpace>>20)

	holdsMemoryLimit(t, limits)
	// Control: without the limit the same gigabyte (reserved, not
	// touched) is fine, so the limit is what stopped it.
	r := run(t, t.Context(), sandbox.Spec{Entry: "test-alloc", Args: []string{"1024"}})
	if r.err != nil {
		t.Errorf("control: 1 GiB without a limit: %v\n%s", r.err, bound(r.stderr))
	}
}

func TestDataLimit(t *testing.T) {
	requireConfinement(t)
	// RLIMIT_DATA counts writable private memory mapped, not PROT_NONE
	// reservations: a Go program of this size needs about 120 MiB (most
	// of it thread stacks and the heap arena index), monotonically. The
	// race detector's shadow memory is writable, so the limit here is the
	// entry's own use plus 256 MiB.
	_, data := memoryUse(t)
	limits := sandbox.Limits{Data: data + 256<<20}
	t.Logf("test-alloc 10 maps %d MiB of data unlimited (race detector: %v); limit %d MiB",
		data>>20, raceEnabled, limits.Data>>20)
	// In pieces, as a rendering allocates. One 1 GiB allocation is not
	// refused by itself in about one run in ten: the runtime maps it over
	// address space it reserved (PROT_NONE), and Linux checks a MAP_FIXED
	// mapping against RLIMIT_DATA net of what it replaces, while counting
	// it whole; the next new mapping then fails, which a program that
	// prints and exits may never make. docs/security.md's known gaps.
	holdsMemoryLimit(t, limits, "pieces")
}

// holdsMemoryLimit runs the allocating entry under limits: 10 MiB (touched)
// fits, 1 GiB is refused by the runtime running out of memory.
func holdsMemoryLimit(t *testing.T, limits sandbox.Limits, big ...string) {
	t.Helper()
	r := run(t, t.Context(), sandbox.Spec{Entry: "test-alloc", Args: []string{"10", "touch"}, Limits: limits})
	if r.err != nil || !strings.HasPrefix(r.stdout, "ok") {
		t.Errorf("10 MiB: %v\n%s%s", r.err, r.stdout, bound(r.stderr))
	}
	r = run(t, t.Context(), sandbox.Spec{Entry: "test-alloc", Args: append([]string{"1024"}, big...), Limits: limits})
	if r.err == nil || !outOfMemory(r.stderr) {
		t.Errorf("1 GiB %v: want the Go runtime out of memory, got %v\n%s%s", big, r.err, r.stdout, bound(r.stderr))
	}
}

// outOfMemory reports whether stderr is the death of a Go program that
// could not map memory: the runtime's own words, or the race detector's
// (ENOMEM is errno 12).
func outOfMemory(stderr string) bool {
	// Under RLIMIT_DATA a new thread's stack may be what cannot be
	// mapped: cgo's pthread_create then fails with EAGAIN.
	for _, s := range []string{"out of memory", "cannot allocate memory", "too many address space collisions", "(errno: 12)",
		"pthread_create failed: Resource temporarily unavailable"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	// Go 1.26's garbage collector does not check the mapping of a new GC
	// span queue (runtime.newSpanSPMC's sysAlloc): refused under
	// RLIMIT_DATA, its ring is nil, and the collector's next drain into it
	// faults at address 0 (about one run in twenty of TestDataLimit,
	// idle or loaded). The process died of the limit all the same.
	return strings.Contains(stderr, "SIGSEGV: segmentation violation") && strings.Contains(stderr, "addr=0x0") &&
		strings.Contains(stderr, "runtime.(*spanQueue).tryDrain")
}

// bound keeps the first lines of a Go traceback.
func bound(s string) string {
	if lines := strings.SplitN(s, "\n", 6); len(lines) == 6 {
		return strings.Join(lines[:5], "\n") + "\n..."
	}
	return s
}

func TestSpecRefused(t *testing.T) {
	dir := t.TempDir()
	toProc := filepath.Join(dir, "proc")
	if err := os.Symlink("/proc/self", toProc); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", filepath.Join(dir, "home"))
	for name, spec := range map[string]sandbox.Spec{
		"no program":              {},
		"both":                    {Path: "/bin/sh", Entry: "test-true"},
		"relative path":           {Path: "bin/sh"},
		"not ELF":                 {Path: "/etc/hostname"},
		"bad entry":               {Entry: "a b"},
		"relative dir":            {Path: "/bin/sh", Dir: "tmp"},
		"relative read":           {Path: "/bin/sh", Read: []string{"etc/hosts"}},
		"negative nice":           {Path: "/bin/sh", Limits: sandbox.Limits{Nice: -1}},
		"NUL":                     {Path: "/bin/sh", Args: []string{"a\x00b"}},
		"read /":                  {Path: "/bin/sh", Read: []string{"/"}},
		"read /etc":               {Path: "/bin/sh", Read: []string{"/etc"}},
		"read /etc/passwd":        {Path: "/bin/sh", Read: []string{"/etc/passwd"}},
		"read /proc/self/environ": {Path: "/bin/sh", Read: []string{"/proc/self/environ"}},
		"read /proc via symlink":  {Path: "/bin/sh", Read: []string{toProc}},
		"read secrets":            {Path: "/bin/sh", Read: []string{"/var/run"}},
		"read above home":         {Path: "/bin/sh", Read: []string{dir}},
		"dir /":                   {Path: "/bin/sh", Dir: "/"},
		"dir /root":               {Path: "/bin/sh", Dir: "/root"},
	} {
		if _, err := sandbox.Command(t.Context(), spec); err == nil {
			t.Errorf("%s: Command accepted %+v", name, spec)
		}
	}
	// Beneath the home directory is fine (a temporary directory may be
	// there), as is a path that does not exist.
	home := filepath.Join(dir, "home", "work")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.Command(t.Context(), sandbox.Spec{Path: "/bin/sh", Dir: home, Read: []string{"/nonexistent/file"}}); err != nil {
		t.Errorf("a directory beneath $HOME: %v", err)
	}
}

// confiningParentEnv makes the test binary a parent that starts a
// confined sleeper and waits to be killed.
const confiningParentEnv = "GATEHOUSE_SANDBOX_TEST_CONFINING_PARENT"

func confiningParent(m string) int {
	cmd, err := sandbox.Command(context.Background(), sandbox.Spec{
		Path: "/bin/sh", Args: []string{"-c", "echo started; read x; while :; do read x; done", m}, Dir: os.TempDir()})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	cmd.Stdout = os.Stdout
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		return 2
	}
	select {} // until killed
}

// TestParentDeath kills Gatehouse (a parent that started a confined
// process) with SIGKILL: the confined process must not outlive it.
func TestParentDeath(t *testing.T) {
	requireConfinement(t)
	m := marker(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	parent := exec.CommandContext(ctx, self, "-test.run=^$")
	parent.Env = append(os.Environ(), confiningParentEnv+"="+m)
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "started\n" {
		parent.Process.Kill()
		t.Fatalf("the confined child did not start: %q %v", line, err)
	}
	if len(processesWith(t, m)) != 1 {
		t.Fatalf("want the confined child alive, found %v", processesWith(t, m))
	}
	parent.Process.Kill()
	parent.Wait()
	// The kernel delivers the parent-death signal as the parent exits;
	// the child may take a moment to be reaped by init.
	for deadline := time.Now().Add(5 * time.Second); len(processesWith(t, m)) > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	requireNoProcesses(t, m)
}

// TestEntryRefusedUnconfined runs the test binary in an entry mode by
// hand, as an attacker with a shell in the Pod could: it must refuse
// rather than serve unconfined.
func TestEntryRefusedUnconfined(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: self, Args: []string{"gatehouse-sandbox-entry:test-signal-parent"}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != sandbox.ExitSetup || !strings.Contains(string(out), "not started by sandbox.Command") {
		t.Errorf("unconfined entry: want exit %d and a refusal, got %v: %s", sandbox.ExitSetup, err, out)
	}
}
