package sandbox

import (
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter does what Landlock cannot:
//
//   - It forbids creating processes: fork and vfork, and clone without
//     CLONE_THREAD, fail with EPERM; clone3 fails with ENOSYS (its flags
//     live in memory a filter cannot read, and ENOSYS makes glibc fall back
//     to clone, whose flags it can). Threads still work: Go, glibc and
//     haproxy need them, and a thread cannot outlive its process.
//   - unshare and setns fail with EPERM: namespaces are how an
//     unprivileged process gains capabilities (in a new user namespace),
//     and nothing confined needs them.
//   - socket() is limited to IPv4/IPv6 datagram sockets of protocol UDP
//     (haproxy -c resolves server names over DNS). Netlink is refused:
//     NETLINK_SOCK_DIAG lists every TCP and Unix socket of the network
//     namespace (the host's, for `gatehouse test` on a CI runner) with
//     their owners, NETLINK_ROUTE its addresses, routes and neighbours,
//     and nothing confined needs them: haproxy 2.6's -c opens none
//     (strace), and glibc's getaddrinfo, which asks NETLINK_ROUTE which
//     address families are configured (AI_ADDRCONFIG, and to sort several
//     answers), assumes both when the socket is refused. Stream sockets are refused, TCP included: Landlock refuses TCP
//     connect and bind only from ABI 4, and nothing confined needs TCP
//     (a DNS answer too large for UDP fails the check, as a connect would
//     under Landlock). Unix sockets are refused too:
//     Landlock does not restrict connecting to a pathname one (a CI
//     runner's docker.sock, a node's containerd socket), nor, below ABI 6,
//     to an abstract one, and nothing confined needs them (socketpair,
//     which reaches no one, stays). MPTCP and SMC sockets, which Landlock
//     does not recognise as TCP even at ABI 4, are stream sockets too.
//     Other families fail with EAFNOSUPPORT, other types and protocols
//     with EPROTONOSUPPORT, which
//     programs take as "not supported here".
//   - Privileged calls fail with EPERM, as they would for a process
//     without capabilities (the trampoline drops them all; this holds
//     even if a capability were left): loading kernel modules, kexec,
//     reboot, mounting (mount and the new mount API), swap, accounting,
//     quotas, setting the clocks and the host's names, port I/O,
//     open_by_handle_at (which opens a file by handle past path checks:
//     the "shocker" escape), bpf, perf_event_open, ptrace,
//     process_vm_readv/writev, kcmp and the calls that act on a pidfd
//     (pidfd_getfd, pidfd_send_signal, process_madvise,
//     process_mrelease: a pidfd can also be a /proc/<pid> directory where
//     Landlock is missing), which read or steer another process of the
//     same user where Landlock's ptrace scoping is missing; System V
//     shared memory, semaphores and message queues and POSIX message
//     queues (Landlock does not confine them, their ids are small
//     numbers to guess, and a process of root's user id reaches every
//     root-owned object: on a CI runner where `gatehouse test` runs as
//     root, the host's); the kernel keyring,
//     userfaultfd (a tool of kernel exploits), the kernel log and
//     vhangup; and truncate by path, which Landlock handles only from ABI
//     3 (ftruncate of a descriptor opened for writing stays). Docker's default profile refuses the same, and haproxy -c,
//     a rendering or a test needs none of them.
//   - io_uring fails with ENOSYS: its operations (IORING_OP_SOCKET) make
//     sockets without the socket() system call this filter checks.
//   - A system call of another ABI (i386 through int 0x80, x32) kills the
//     process: it would bypass the numbers checked here, and no confined
//     program makes one.
//
//   - The calls that signal or change another process may name only the
//     process itself, by pid or as its process group (0, -pid; it leads
//     a session of its own); any other target, -1 (every process)
//     included, fails with EPERM. The kernel lets a process act on every
//     process of its user (every root process when `gatehouse test` runs
//     as root, capabilities dropped or not; the runner and the other
//     checks it runs): signals (kill, tkill, tgkill, rt_sigqueueinfo,
//     rt_tgsigqueueinfo, pidfd_open, and F_SETOWN, whose SIGIO, or the
//     signal F_SETSIG names, goes to the owner when the file is ready:
//     for an owner that was root, to any process), resource limits
//     (prlimit64: a limit lowered kills or starves the target), priority
//     (setpriority; PRIO_USER, every process of the user, is refused
//     whatever it names), scheduling (sched_setaffinity,
//     sched_setparam, sched_setscheduler, sched_setattr), I/O priority
//     (ioprio_set; IOPRIO_WHO_USER refused), memory placement
//     (migrate_pages, move_pages) and get_robust_list (an address in
//     another process). Landlock scopes signals only from ABI 6 and
//     none of the rest but the ptrace-checked ones. F_SETOWN_EX and the
//     ioctls FIOSETOWN and SIOCSPGRP, whose owner lies in memory a
//     filter cannot read, fail with EPERM. The calls that only read
//     (getpriority, ioprio_get, sched_get*, getpgid, getsid) stay: glibc
//     and the race detector read a thread's affinity by its thread id
//     (pthread_getattr_np), which this filter cannot tell from another
//     process's pid.
//
// So TCP, Unix sockets, netlink and signals hold at every Landlock ABI,
// even none;
// files are Landlock's alone: without it (ABI 0) they are protected by
// file permissions only.
//
// Everything else is allowed; files, TCP ports and signals are Landlock's.
// The filter is a short BPF program assembled with golang.org/x/net/bpf;
// libseccomp would need cgo in the trampoline and brings no rule this
// needs.

// seccompTable is what the filter needs to know of one architecture.
// Numbers are from the kernel's tables (arch/x86/entry/syscalls/
// syscall_64.tbl; include/uapi/asm-generic/unistd.h for arm64), written
// out rather than taken from x/sys/unix so that the program of every
// architecture can be built and tested on any; a test checks them against
// x/sys/unix for the architecture it runs on.
type seccompTable struct {
	auditArch uint32
	// eperm are refused with EPERM whatever their arguments.
	eperm []uint32
	// enosys are refused with ENOSYS whatever their arguments.
	enosys []uint32
	clone  uint32
	socket uint32
	// signals are the calls that signal a process or thread group named
	// by their first argument (kill, tkill, tgkill, rt_sigqueueinfo,
	// rt_tgsigqueueinfo, pidfd_open), restricted where Landlock cannot
	// scope signals.
	signals []uint32
	// pidCalls are the other calls whose first argument names the
	// process they change (0: the caller): prlimit64, the sched_set*
	// calls, migrate_pages, move_pages, get_robust_list. Restricted as
	// signals are.
	pidCalls []uint32
	// setpriority and ioprioSet name their target by a kind (process,
	// group, user) and an id; fcntl and ioctl can set the owner a file
	// signals.
	setpriority, ioprioSet, fcntl, ioctl uint32
	// x32 marks amd64, whose x32 ABI numbers (bit 30 set) reach the
	// same entry points with the same audit architecture.
	x32 bool
}

var seccompTables = map[string]seccompTable{
	"amd64": {
		auditArch: unix.AUDIT_ARCH_X86_64,
		eperm: []uint32{
			57,  // fork
			58,  // vfork
			272, // unshare
			308, // setns
			// privileged calls (below)
			175, // init_module
			313, // finit_module
			176, // delete_module
			246, // kexec_load
			320, // kexec_file_load
			169, // reboot
			165, // mount
			166, // umount2
			155, // pivot_root
			428, // open_tree
			429, // move_mount
			430, // fsopen
			431, // fsconfig
			432, // fsmount
			433, // fspick
			442, // mount_setattr
			167, // swapon
			168, // swapoff
			163, // acct
			179, // quotactl
			443, // quotactl_fd
			164, // settimeofday
			227, // clock_settime
			305, // clock_adjtime
			159, // adjtimex
			170, // sethostname
			171, // setdomainname
			172, // iopl
			173, // ioperm
			304, // open_by_handle_at
			321, // bpf
			298, // perf_event_open
			101, // ptrace
			310, // process_vm_readv
			311, // process_vm_writev
			312, // kcmp
			424, // pidfd_send_signal
			438, // pidfd_getfd
			440, // process_madvise
			448, // process_mrelease
			// System V and POSIX IPC (below)
			29,  // shmget
			30,  // shmat
			31,  // shmctl
			67,  // shmdt
			64,  // semget
			65,  // semop
			66,  // semctl
			220, // semtimedop
			68,  // msgget
			69,  // msgsnd
			70,  // msgrcv
			71,  // msgctl
			240, // mq_open
			241, // mq_unlink
			242, // mq_timedsend
			243, // mq_timedreceive
			244, // mq_notify
			245, // mq_getsetattr
			248, // add_key
			249, // request_key
			250, // keyctl
			323, // userfaultfd
			103, // syslog
			153, // vhangup
			76,  // truncate
		},
		enosys: []uint32{
			435, // clone3
			425, // io_uring_setup
			426, // io_uring_enter
			427, // io_uring_register
		},
		clone:  56,
		socket: 41,
		signals: []uint32{
			62,  // kill
			200, // tkill
			234, // tgkill
			129, // rt_sigqueueinfo
			297, // rt_tgsigqueueinfo
			434, // pidfd_open
		},
		pidCalls: []uint32{
			302, // prlimit64
			203, // sched_setaffinity
			142, // sched_setparam
			144, // sched_setscheduler
			314, // sched_setattr
			256, // migrate_pages
			279, // move_pages
			274, // get_robust_list
		},
		setpriority: 141,
		ioprioSet:   251,
		fcntl:       72,
		ioctl:       16,
		x32:         true,
	},
	"arm64": {
		auditArch: unix.AUDIT_ARCH_AARCH64,
		eperm: []uint32{
			97,  // unshare
			268, // setns
			// privileged calls (below)
			105, // init_module
			273, // finit_module
			106, // delete_module
			104, // kexec_load
			294, // kexec_file_load
			142, // reboot
			40,  // mount
			39,  // umount2
			41,  // pivot_root
			428, // open_tree
			429, // move_mount
			430, // fsopen
			431, // fsconfig
			432, // fsmount
			433, // fspick
			442, // mount_setattr
			224, // swapon
			225, // swapoff
			89,  // acct
			60,  // quotactl
			443, // quotactl_fd
			170, // settimeofday
			112, // clock_settime
			266, // clock_adjtime
			171, // adjtimex
			161, // sethostname
			162, // setdomainname
			265, // open_by_handle_at
			280, // bpf
			241, // perf_event_open
			117, // ptrace
			270, // process_vm_readv
			271, // process_vm_writev
			272, // kcmp
			424, // pidfd_send_signal
			438, // pidfd_getfd
			440, // process_madvise
			448, // process_mrelease
			// System V and POSIX IPC (below)
			194, // shmget
			196, // shmat
			195, // shmctl
			197, // shmdt
			190, // semget
			193, // semop
			191, // semctl
			192, // semtimedop
			186, // msgget
			189, // msgsnd
			188, // msgrcv
			187, // msgctl
			180, // mq_open
			181, // mq_unlink
			182, // mq_timedsend
			183, // mq_timedreceive
			184, // mq_notify
			185, // mq_getsetattr
			217, // add_key
			218, // request_key
			219, // keyctl
			282, // userfaultfd
			116, // syslog
			58,  // vhangup
			45,  // truncate
		},
		enosys: []uint32{
			435, // clone3
			425, // io_uring_setup
			426, // io_uring_enter
			427, // io_uring_register
		},
		clone:  220,
		socket: 198,
		signals: []uint32{
			129, // kill
			130, // tkill
			131, // tgkill
			138, // rt_sigqueueinfo
			240, // rt_tgsigqueueinfo
			434, // pidfd_open
		},
		pidCalls: []uint32{
			261, // prlimit64
			122, // sched_setaffinity
			118, // sched_setparam
			119, // sched_setscheduler
			274, // sched_setattr
			238, // migrate_pages
			239, // move_pages
			100, // get_robust_list
		},
		setpriority: 140,
		ioprioSet:   30,
		fcntl:       25,
		ioctl:       29,
	},
}

// Offsets in struct seccomp_data; an argument's low 32 bits come first on
// little-endian machines (both tables are). clone's flags and socket's
// arguments are read by the kernel as 32-bit values, so the low word is
// the whole story.
const (
	seccompNr     = 0
	seccompArch   = 4
	x32SyscallBit = 0x40000000
)

func seccompArgLow(n uint32) uint32 { return 16 + 8*n }

func seccompErrno(errno unix.Errno) uint32 {
	return unix.SECCOMP_RET_ERRNO | uint32(errno)&unix.SECCOMP_RET_DATA
}

// seccompProgram builds the filter for one architecture, for the process
// pid (which the confined program keeps through execve).
func seccompProgram(t seccompTable, pid uint32) ([]bpf.RawInstruction, error) {
	var a assembler
	a.load(seccompArch)
	a.jumpIf(bpf.JumpNotEqual, t.auditArch, "kill", "")
	a.load(seccompNr)
	if t.x32 {
		a.jumpIf(bpf.JumpBitsSet, x32SyscallBit, "kill", "")
	}
	for _, nr := range t.eperm {
		a.jumpIf(bpf.JumpEqual, nr, "eperm", "")
	}
	for _, nr := range t.enosys {
		a.jumpIf(bpf.JumpEqual, nr, "enosys", "")
	}
	a.jumpIf(bpf.JumpEqual, t.clone, "clone", "")
	a.jumpIf(bpf.JumpEqual, t.socket, "socket", "")
	for _, nr := range slices.Concat(t.signals, t.pidCalls) {
		a.jumpIf(bpf.JumpEqual, nr, "signal", "")
	}
	a.jumpIf(bpf.JumpEqual, t.setpriority, "setpriority", "")
	a.jumpIf(bpf.JumpEqual, t.ioprioSet, "ioprio_set", "")
	a.jumpIf(bpf.JumpEqual, t.fcntl, "fcntl", "")
	a.jumpIf(bpf.JumpEqual, t.ioctl, "ioctl", "")
	a.ret(unix.SECCOMP_RET_ALLOW)

	a.label("fcntl")
	a.load(seccompArgLow(1)) // cmd
	a.jumpIf(bpf.JumpEqual, unix.F_SETOWN_EX, "eperm", "")
	a.jumpIf(bpf.JumpEqual, unix.F_SETOWN, "", "allow")
	a.load(seccompArgLow(2)) // the owner: pid, or -pgid
	a.jump("self")

	a.label("signal")
	a.load(seccompArgLow(0)) // pid, tid or tgid (an int: the low word)
	a.label("self")          // is the accumulator the process itself?
	a.jumpIf(bpf.JumpEqual, pid, "allow", "")
	a.jumpIf(bpf.JumpEqual, 0, "allow", "")         // itself, or its own process group
	a.jumpIf(bpf.JumpEqual, -pid, "allow", "eperm") // its group, by number

	a.label("setpriority")
	a.load(seccompArgLow(0)) // which
	a.jumpIf(bpf.JumpEqual, unix.PRIO_PROCESS, "who", "")
	a.jumpIf(bpf.JumpEqual, unix.PRIO_PGRP, "who", "eperm")
	a.label("ioprio_set")
	a.load(seccompArgLow(0)) // which
	a.jumpIf(bpf.JumpEqual, ioprioWhoProcess, "who", "")
	a.jumpIf(bpf.JumpEqual, ioprioWhoPgrp, "who", "eperm")
	a.label("who")
	a.load(seccompArgLow(1))
	a.jumpIf(bpf.JumpEqual, pid, "allow", "")
	a.jumpIf(bpf.JumpEqual, 0, "allow", "eperm")

	a.label("ioctl")
	a.load(seccompArgLow(1)) // request
	a.jumpIf(bpf.JumpEqual, fioSetOwn, "eperm", "")
	a.jumpIf(bpf.JumpEqual, unix.SIOCSPGRP, "eperm", "allow")

	a.label("clone")
	a.load(seccompArgLow(0))
	a.jumpIf(bpf.JumpBitsSet, unix.CLONE_THREAD, "allow", "eperm")

	a.label("socket")
	a.load(seccompArgLow(0)) // domain
	a.jumpIf(bpf.JumpEqual, unix.AF_INET, "inet", "")
	a.jumpIf(bpf.JumpEqual, unix.AF_INET6, "inet", "eafnosupport")
	a.label("inet")
	a.load(seccompArgLow(1)) // type, with SOCK_NONBLOCK and SOCK_CLOEXEC
	a.add(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: sockTypeMask})
	a.jumpIf(bpf.JumpEqual, unix.SOCK_DGRAM, "protocol", "eprotonosupport")
	a.label("protocol")
	a.load(seccompArgLow(2))
	a.jumpIf(bpf.JumpEqual, 0, "allow", "") // the datagram default: UDP
	a.jumpIf(bpf.JumpEqual, unix.IPPROTO_UDP, "allow", "eprotonosupport")

	a.label("allow")
	a.ret(unix.SECCOMP_RET_ALLOW)
	a.label("eperm")
	a.ret(seccompErrno(unix.EPERM))
	a.label("enosys")
	a.ret(seccompErrno(unix.ENOSYS))
	a.label("eafnosupport")
	a.ret(seccompErrno(unix.EAFNOSUPPORT))
	a.label("eprotonosupport")
	a.ret(seccompErrno(unix.EPROTONOSUPPORT))
	a.label("kill")
	a.ret(unix.SECCOMP_RET_KILL_PROCESS)
	return a.assemble()
}

// sockTypeMask is the kernel's SOCK_TYPE_MASK: the type without its
// flags.
const sockTypeMask = 0xf

// Constants x/sys/unix lacks: include/uapi/linux/ioprio.h's targets of
// ioprio_set, and include/uapi/linux/sockios.h's FIOSETOWN (the same
// request number on every architecture, as SIOCSPGRP).
const (
	ioprioWhoProcess = 1
	ioprioWhoPgrp    = 2
	fioSetOwn        = 0x8901
)

// assembler resolves named jump targets into the relative skips of
// classic BPF (x/net/bpf has none); targets are always forward.
type assembler struct {
	ins    []bpf.Instruction
	labels map[string]int
	jumps  map[int][2]string // instruction index: true, false targets
}

func (a *assembler) add(i bpf.Instruction) { a.ins = append(a.ins, i) }
func (a *assembler) load(off uint32)       { a.add(bpf.LoadAbsolute{Off: off, Size: 4}) }
func (a *assembler) ret(v uint32)          { a.add(bpf.RetConstant{Val: v}) }

func (a *assembler) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.ins)
}

// jumpIf jumps to ifTrue or ifFalse; "" is the next instruction.
func (a *assembler) jumpIf(cond bpf.JumpTest, val uint32, ifTrue, ifFalse string) {
	if a.jumps == nil {
		a.jumps = map[int][2]string{}
	}
	a.jumps[len(a.ins)] = [2]string{ifTrue, ifFalse}
	a.add(bpf.JumpIf{Cond: cond, Val: val})
}

// jump jumps to target unconditionally, forward (a JumpIf whose two
// branches are the same).
func (a *assembler) jump(target string) { a.jumpIf(bpf.JumpEqual, 0, target, target) }

func (a *assembler) assemble() ([]bpf.RawInstruction, error) {
	skip := func(from int, target string) (uint8, error) {
		if target == "" {
			return 0, nil
		}
		to, ok := a.labels[target]
		if !ok {
			return 0, fmt.Errorf("seccomp program: no label %q", target)
		}
		d := to - from - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("seccomp program: jump from %d to %q (%d) out of range", from, target, to)
		}
		return uint8(d), nil
	}
	for i, targets := range a.jumps {
		j := a.ins[i].(bpf.JumpIf)
		var err error
		if j.SkipTrue, err = skip(i, targets[0]); err != nil {
			return nil, err
		}
		if j.SkipFalse, err = skip(i, targets[1]); err != nil {
			return nil, err
		}
		a.ins[i] = j
	}
	return bpf.Assemble(a.ins)
}

// installSeccomp installs the filter on the calling thread (no TSYNC: the
// thread then executes the program, whose image inherits it). The caller
// has set no_new_privs.
func installSeccomp(t seccompTable, pid int) error {
	raw, err := seccompProgram(t, uint32(pid))
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("installing the seccomp filter: %w", err)
	}
	return nil
}

// seccompAvailable reports whether filters with every action the program
// uses can be installed.
func seccompAvailable() (bool, string) {
	if _, ok := seccompTables[runtime.GOARCH]; !ok {
		return false, "no system call table for " + runtime.GOARCH
	}
	for _, action := range []uint32{unix.SECCOMP_RET_ALLOW, unix.SECCOMP_RET_ERRNO, unix.SECCOMP_RET_KILL_PROCESS} {
		a := action
		_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&a)))
		switch errno {
		case 0:
		case unix.ENOSYS:
			return false, "the kernel has no seccomp system call (or a seccomp profile refuses it)"
		case unix.EINVAL:
			return false, "the kernel has no seccomp filters (CONFIG_SECCOMP_FILTER)"
		case unix.EOPNOTSUPP:
			return false, fmt.Sprintf("the kernel lacks the seccomp action %#x", action)
		default:
			return false, "probing seccomp: " + errno.Error()
		}
	}
	return true, ""
}
