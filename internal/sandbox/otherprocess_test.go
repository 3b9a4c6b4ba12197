//go:build linux

package sandbox_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

func init() {
	switch {
	case sandbox.Entry("test-touch-process"):
		pid, _ := strconv.Atoi(os.Args[1])
		os.Exit(entryTouchProcess(pid))
	case sandbox.Entry("test-shm"):
		id, _ := strconv.Atoi(os.Args[1])
		os.Exit(entryShm(id))
	case sandbox.Entry("test-netlink"):
		port, _ := strconv.Atoi(os.Args[1])
		os.Exit(entryNetlink(port))
	}
}

// touches are what entryTouchProcess tries on another process, in the
// order it prints them.
var touches = []string{"prlimit", "setpriority", "sched_setaffinity", "ioprio_set", "f_setown"}

// entryTouchProcess acts on the process pid as native code in a check
// would on Gatehouse, the runner or another tenant's check of the same
// user, and prints "what: ok" or the error for each attempt. Every change
// writes back what it read, so an attempt that gets through changes
// nothing: the kernel checks the permission all the same.
func entryTouchProcess(pid int) int {
	say := func(what string, err error) {
		if err == nil {
			fmt.Printf("%s: ok\n", what)
		} else {
			fmt.Printf("%s: %v\n", what, err)
		}
	}
	// A lowered RLIMIT_NOFILE or RLIMIT_CPU starves or kills the target.
	var lim unix.Rlimit
	err := unix.Prlimit(pid, unix.RLIMIT_CORE, nil, &lim)
	if err == nil {
		err = unix.Prlimit(pid, unix.RLIMIT_CORE, &lim, nil)
	}
	say("prlimit", err)
	// A raised niceness takes the CPU from the target. (PRIO_USER, every
	// process of the user at once, is TestSeccompProgram's: here it
	// would touch every root process of the machine.)
	raw, err := unix.Getpriority(unix.PRIO_PROCESS, pid)
	if err == nil {
		err = unix.Setpriority(unix.PRIO_PROCESS, pid, 20-raw)
	}
	say("setpriority", err)
	var set unix.CPUSet
	err = unix.SchedGetaffinity(pid, &set)
	if err == nil {
		err = unix.SchedSetaffinity(pid, &set)
	}
	say("sched_setaffinity", err)
	const ioprioWhoProcess = 1
	prio, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(pid), 0)
	if errno == 0 {
		_, _, errno = unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(pid), prio)
	}
	say("ioprio_set", errnoErr(errno))
	// F_SETOWN makes a file signal its owner when it is ready: SIGIO,
	// which ends a process that does not handle it, or the signal
	// F_SETSIG names (SIGWINCH here, which the test counts), past the
	// filter's rule for kill and past Landlock below ABI 6.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		say("f_setown", err)
		return 0
	}
	_, err = unix.FcntlInt(uintptr(p[0]), unix.F_SETSIG, int(syscall.SIGWINCH))
	if err == nil {
		_, err = unix.FcntlInt(uintptr(p[0]), unix.F_SETOWN, pid)
	}
	say("f_setown", err)
	if err == nil {
		if _, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETFL, unix.O_ASYNC); err == nil {
			_, _ = unix.Write(p[1], []byte{1})
		}
	}
	return 0
}

// entryShm reads the System V shared memory segment id (its id guessed,
// or listed in /proc/sysvipc/shm where /proc is readable), as native code
// would another process's of its user, and prints "shm: " and what it
// read or the error.
func entryShm(id int) int {
	b, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
	if err != nil {
		fmt.Printf("shm: %v\n", err)
		return 0
	}
	fmt.Printf("shm: read %q\n", strings.TrimRight(string(b[:64]), "\x00"))
	_ = unix.SysvShmDetach(b)
	return 0
}

// entryNetlink lists the TCP sockets of its network namespace through
// NETLINK_SOCK_DIAG, as `ss -t` does, and prints whether one bound to
// port is among them; then it opens a NETLINK_ROUTE socket (addresses,
// routes, neighbours).
func entryNetlink(port int) int {
	found, err := tcpSocketListed(port)
	switch {
	case err != nil:
		fmt.Printf("sock_diag: %v\n", err)
	case found:
		fmt.Printf("sock_diag: listed port %d\n", port)
	default:
		fmt.Printf("sock_diag: port %d not listed\n", port)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err == nil {
		unix.Close(fd)
		fmt.Println("route: ok")
	} else {
		fmt.Printf("route: %v\n", err)
	}
	return 0
}

// tcpSocketListed dumps the IPv4 TCP sockets (every state) over
// NETLINK_SOCK_DIAG and reports whether one has the local port.
func tcpSocketListed(port int) (bool, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	// struct nlmsghdr, then struct inet_diag_req_v2: family, protocol,
	// ext, pad, states, and a zero struct inet_diag_sockid (48 bytes).
	req := make([]byte, unix.NLMSG_HDRLEN+56)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	req[16], req[17] = unix.AF_INET, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(req[20:], 0xffffffff)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, err
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return false, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return false, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return false, nil
			case unix.NLMSG_ERROR:
				return false, errors.New("sock_diag answered an error")
			}
			// struct inet_diag_msg: family, state, timer, retrans, then
			// the socket id, whose source port comes first (big-endian).
			if len(m.Data) >= 6 && int(binary.BigEndian.Uint16(m.Data[4:])) == port {
				return true, nil
			}
		}
	}
}

// touchProcess runs entryTouchProcess against pid, confined as spec says
// otherwise.
func touchProcess(t *testing.T, spec sandbox.Spec, pid int) string {
	t.Helper()
	spec.Entry, spec.Args = "test-touch-process", []string{strconv.Itoa(pid)}
	r := run(t, t.Context(), spec)
	if r.err != nil {
		t.Fatalf("test-touch-process %d: %v: %s %s", pid, r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

// requireTouchesRefused fails unless every attempt of entryTouchProcess
// was refused with EPERM.
func requireTouchesRefused(t *testing.T, target, out string) {
	t.Helper()
	for _, what := range touches {
		if !strings.Contains(out, what+": operation not permitted\n") {
			t.Errorf("%s on %s: want refused with EPERM, got:\n%s", what, target, out)
		}
	}
}

// startSibling starts another confined process, as another config's
// check runs beside this one under the same user, and returns its pid.
func startSibling(t *testing.T, spec sandbox.Spec) int {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	spec.Path, spec.Args = "/bin/sh", []string{"-c", "read x", marker(t)}
	cmd, err := sandbox.Command(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cancel(); _ = cmd.Wait() })
	m := spec.Args[2]
	for range 1000 {
		for _, pid := range processesWith(t, m) {
			// The shell itself, not the runner's proxy (whose argument
			// holds the marker too).
			if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(cmdline), "sh\x00") {
				return pid
			}
		}
		if ctx.Err() != nil {
			break
		}
		syscall.Nanosleep(&syscall.Timespec{Nsec: 10e6}, nil)
	}
	t.Fatalf("the sibling %s did not start", m)
	return 0
}

// TestCannotTouchOtherProcesses: a confined process acts on Gatehouse
// (its parent) and on another check, both of its user (root here, as in
// CI and `gatehouse test` run as root, where that user's processes are
// every root process), with the calls the kernel allows on a same-user
// process: each is refused, with Landlock and without it (ABI 0, where
// only the seccomp filter stands). The control runs the same attempts
// without seccomp and Landlock: they get through (on the parent, which
// holds capabilities the confined process lacks, the kernel itself
// refuses the priority and scheduling calls: prlimit64 and F_SETOWN
// remain), and the signal F_SETOWN arranged reaches the test process.
func TestCannotTouchOtherProcesses(t *testing.T) {
	requireConfinement(t)
	t.Cleanup(func() { sandbox.LimitLandlockABI(-1); sandbox.SimulateNoSeccomp(false) })
	winch := make(chan os.Signal, 16)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)

	t.Run("control", func(t *testing.T) {
		sandbox.LimitLandlockABI(0)
		sandbox.SimulateNoSeccomp(true)
		defer sandbox.SimulateNoSeccomp(false)
		parent := touchProcess(t, sandbox.Spec{}, os.Getpid())
		for _, what := range []string{"prlimit", "f_setown"} {
			if !strings.Contains(parent, what+": ok\n") {
				t.Errorf("without seccomp and Landlock, want %s on the parent to get through (the premise of this test): %s", what, parent)
			}
		}
		select {
		case <-winch:
		case <-t.Context().Done():
			t.Fatalf("the control's F_SETOWN signal never reached the test process")
		}
		sibling := touchProcess(t, sandbox.Spec{}, startSibling(t, sandbox.Spec{}))
		for _, what := range touches {
			if !strings.Contains(sibling, what+": ok\n") {
				t.Errorf("without seccomp and Landlock, want %s on another confined process to get through (the premise of this test): %s", what, sibling)
			}
		}
	})
	for _, level := range []int{0, -1} {
		name := "landlock-abi-0"
		if level < 0 {
			name = "landlock-of-the-kernel"
		}
		t.Run(name, func(t *testing.T) {
			sandbox.LimitLandlockABI(level)
			requireTouchesRefused(t, "its parent", touchProcess(t, sandbox.Spec{}, os.Getpid()))
			sibling := startSibling(t, sandbox.Spec{})
			requireTouchesRefused(t, "another confined process", touchProcess(t, sandbox.Spec{}, sibling))
		})
	}
}

// TestCannotListTheHostsSockets: NETLINK_SOCK_DIAG lists every TCP socket
// of the network namespace (on a CI runner, the host's: `gatehouse test`),
// NETLINK_ROUTE its addresses and routes; a confined process opens
// neither. The control lists the test's own listener unconfined.
func TestCannotListTheHostsSockets(t *testing.T) {
	requireConfinement(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if found, err := tcpSocketListed(port); err != nil || !found {
		t.Fatalf("control: sock_diag did not list the listener on port %d (%v), so the test proves nothing", port, err)
	}
	t.Cleanup(func() { sandbox.LimitLandlockABI(-1) })
	for _, level := range []int{0, -1} {
		name := "landlock-abi-0"
		if level < 0 {
			name = "landlock-of-the-kernel"
		}
		t.Run(name, func(t *testing.T) {
			sandbox.LimitLandlockABI(level)
			r := run(t, t.Context(), sandbox.Spec{Entry: "test-netlink", Args: []string{strconv.Itoa(port)}})
			for _, want := range []string{"sock_diag: address family not supported by protocol\n", "route: address family not supported by protocol\n"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("want %q: %s %s", want, r.stdout, r.stderr)
				}
			}
		})
	}
}

// TestHAProxyChecksWithoutNetlink: haproxy -c resolves names without
// netlink (glibc asks NETLINK_ROUTE only for AI_ADDRCONFIG, or to sort
// several addresses, and assumes both families when refused): a name from
// /etc/hosts still resolves, and one that does not exist still fails.
func TestHAProxyChecksWithoutNetlink(t *testing.T) {
	requireConfinement(t)
	r := checkHAProxy(t, map[string]string{"haproxy.cfg": haproxyBase + "  server s2 localhost:81\n  server s3 ipv4@localhost:82\n"})
	if r.err != nil {
		t.Errorf("haproxy -c of a valid config naming localhost failed confined: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	r = checkHAProxy(t, map[string]string{"haproxy.cfg": haproxyBase + "  server s2 no-such-host.invalid:81\n"})
	var ee *exec.ExitError
	if !errors.As(r.err, &ee) || !strings.Contains(r.stderr, "could not resolve address 'no-such-host.invalid'") {
		t.Errorf("a name that does not resolve: want haproxy -c to fail on it, got %v\n%s%s", r.err, r.stdout, r.stderr)
	}
}

// TestCannotReachIPCObjects: a System V shared memory segment that only
// its user may read (0600), as a database or another process of the user
// Gatehouse or `gatehouse test` runs as keeps one, is out of reach of a
// confined process, whose user is the same. The control attaches it with
// neither seccomp nor Landlock (Landlock never covers IPC).
func TestCannotReachIPCObjects(t *testing.T) {
	requireConfinement(t)
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	b, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	secret := marker(t)
	copy(b, secret)
	_ = unix.SysvShmDetach(b)
	attack := sandbox.Spec{Entry: "test-shm", Args: []string{strconv.Itoa(id)}}

	t.Cleanup(func() { sandbox.LimitLandlockABI(-1); sandbox.SimulateNoSeccomp(false) })
	sandbox.SimulateNoSeccomp(true)
	if r := run(t, t.Context(), attack); !strings.Contains(r.stdout, secret) {
		t.Errorf("without seccomp, want the segment read (the premise of this test): %s %s", r.stdout, r.stderr)
	}
	sandbox.SimulateNoSeccomp(false)
	for _, level := range []int{0, -1} {
		sandbox.LimitLandlockABI(level)
		if r := run(t, t.Context(), attack); r.stdout != "shm: operation not permitted\n" {
			t.Errorf("Landlock limited to %d: want the segment refused, got %q %q", level, r.stdout, r.stderr)
		}
	}
}
