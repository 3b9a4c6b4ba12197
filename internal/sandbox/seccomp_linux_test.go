package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData encodes struct seccomp_data for x/net/bpf's VM, which loads
// words big-endian: each 32-bit field is written big-endian at the offset
// where a little-endian kernel keeps it, so the VM sees what the kernel's
// filter would.
func seccompData(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[seccompNr:], nr)
	binary.BigEndian.PutUint32(b[seccompArch:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[seccompArgLow(uint32(i)):], uint32(a))
		binary.BigEndian.PutUint32(b[seccompArgLow(uint32(i))+4:], uint32(a>>32))
	}
	return b
}

// TestSeccompProgram runs the filter of every architecture in a BPF
// virtual machine over the calls an escaping program would make.
func TestSeccompProgram(t *testing.T) {
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	kill := uint32(unix.SECCOMP_RET_KILL_PROCESS)
	eperm := seccompErrno(unix.EPERM)
	enosys := seccompErrno(unix.ENOSYS)
	eafnosupport := seccompErrno(unix.EAFNOSUPPORT)
	eprotonosupport := seccompErrno(unix.EPROTONOSUPPORT)
	const (
		threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
			unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS |
			unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
		cloexec = unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK
	)
	for arch, table := range seccompTables {
		t.Run(arch, func(t *testing.T) {
			const pid = 4242
			raw, err := seccompProgram(table, pid)
			if err != nil {
				t.Fatal(err)
			}
			ins, ok := bpf.Disassemble(raw)
			if !ok {
				t.Fatal("the program does not disassemble")
			}
			vm, err := bpf.NewVM(ins)
			if err != nil {
				t.Fatal(err)
			}
			a := table.auditArch
			cases := []struct {
				name string
				data []byte
				want uint32
			}{
				{"an ordinary call (write)", seccompData(a, map[string]uint32{"amd64": 1, "arm64": 64}[arch]), allow},
				{"other architecture", seccompData(unix.AUDIT_ARCH_I386, 2), kill},
				{"other architecture's clone", seccompData(unix.AUDIT_ARCH_I386, 120, threadFlags), kill},
				{"thread", seccompData(a, table.clone, threadFlags), allow},
				{"fork by clone", seccompData(a, table.clone, uint64(unix.SIGCHLD)), eperm},
				{"posix_spawn's clone", seccompData(a, table.clone, unix.CLONE_VM|unix.CLONE_VFORK|uint64(unix.SIGCHLD)), eperm},
				{"CLONE_THREAD in the ignored high word", seccompData(a, table.clone, unix.CLONE_THREAD<<32|uint64(unix.SIGCHLD)), eperm},
				{"TCP", seccompData(a, table.socket, unix.AF_INET, unix.SOCK_STREAM|cloexec, 0), eprotonosupport},
				{"TCP6", seccompData(a, table.socket, unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP), eprotonosupport},
				{"UDP (DNS)", seccompData(a, table.socket, unix.AF_INET, unix.SOCK_DGRAM|cloexec, unix.IPPROTO_UDP), allow},
				{"UDP6 by default", seccompData(a, table.socket, unix.AF_INET6, unix.SOCK_DGRAM, 0), allow},
				{"TCP as a datagram protocol", seccompData(a, table.socket, unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_TCP), eprotonosupport},
				{"Unix (docker.sock)", seccompData(a, table.socket, unix.AF_UNIX, unix.SOCK_STREAM|cloexec, 0), eafnosupport},
				{"Unix datagram", seccompData(a, table.socket, unix.AF_UNIX, unix.SOCK_DGRAM, 0), eafnosupport},
				{"netlink route", seccompData(a, table.socket, unix.AF_NETLINK, unix.SOCK_RAW|cloexec, unix.NETLINK_ROUTE), eafnosupport},
				{"netlink sock_diag", seccompData(a, table.socket, unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_SOCK_DIAG), eafnosupport},
				{"MPTCP", seccompData(a, table.socket, unix.AF_INET, unix.SOCK_STREAM|cloexec, unix.IPPROTO_MPTCP), eprotonosupport},
				{"MPTCP6", seccompData(a, table.socket, unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), eprotonosupport},
				{"SMC over IPv4", seccompData(a, table.socket, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SMC), eprotonosupport},
				{"SCTP", seccompData(a, table.socket, unix.AF_INET, unix.SOCK_SEQPACKET, 0), eprotonosupport},
				{"raw IP", seccompData(a, table.socket, unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_TCP), eprotonosupport},
				{"ping", seccompData(a, table.socket, unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP), eprotonosupport},
				{"protocol in the ignored high word", seccompData(a, table.socket, unix.AF_INET, unix.SOCK_STREAM, 1<<32|unix.IPPROTO_MPTCP), eprotonosupport},
				{"SMC family", seccompData(a, table.socket, unix.AF_SMC, unix.SOCK_STREAM, 0), eafnosupport},
				{"packet", seccompData(a, table.socket, unix.AF_PACKET, unix.SOCK_RAW, 0), eafnosupport},
				{"vsock", seccompData(a, table.socket, unix.AF_VSOCK, unix.SOCK_STREAM, 0), eafnosupport},
			}
			for _, nr := range slices.Concat(table.signals, table.pidCalls) {
				for _, c := range []struct {
					target uint64
					want   uint32
				}{
					{pid, allow},                        // itself
					{0, allow},                          // its process group
					{uint64(-pid & 0xffffffff), allow},  // the same
					{1, eperm},                          // init
					{4241, eperm},                       // its parent, say
					{0xffffffff, eperm},                 // -1: every process it may signal
					{uint64(-4241 & 0xffffffff), eperm}, // another group
				} {
					cases = append(cases, struct {
						name string
						data []byte
						want uint32
					}{fmt.Sprintf("call %d on %d", nr, int32(c.target)), seccompData(a, nr, c.target, uint64(unix.SIGKILL)), c.want})
				}
			}
			const (
				prioUser   = 2 // PRIO_USER
				ioprioUser = 3 // IOPRIO_WHO_USER
			)
			for _, c := range []struct {
				name string
				nr   uint32
				args []uint64
				want uint32
			}{
				{"setpriority of itself", table.setpriority, []uint64{unix.PRIO_PROCESS, 0, 19}, allow},
				{"setpriority of itself by pid", table.setpriority, []uint64{unix.PRIO_PROCESS, pid, 19}, allow},
				{"setpriority of its group", table.setpriority, []uint64{unix.PRIO_PGRP, 0, 19}, allow},
				{"setpriority of its parent", table.setpriority, []uint64{unix.PRIO_PROCESS, 4241, 19}, eperm},
				{"setpriority of another group", table.setpriority, []uint64{unix.PRIO_PGRP, 4241, 19}, eperm},
				{"setpriority of its user", table.setpriority, []uint64{prioUser, 0, 19}, eperm},
				{"setpriority of user 1000", table.setpriority, []uint64{prioUser, 1000, 19}, eperm},
				{"ioprio_set of itself", table.ioprioSet, []uint64{ioprioWhoProcess, 0, 0}, allow},
				{"ioprio_set of its group by pid", table.ioprioSet, []uint64{ioprioWhoPgrp, pid, 0}, allow},
				{"ioprio_set of its parent", table.ioprioSet, []uint64{ioprioWhoProcess, 4241, 0}, eperm},
				{"ioprio_set of its user", table.ioprioSet, []uint64{ioprioUser, 0, 0}, eperm},
				{"fcntl F_GETFL", table.fcntl, []uint64{3, unix.F_GETFL}, allow},
				{"fcntl F_SETFL O_ASYNC", table.fcntl, []uint64{3, unix.F_SETFL, unix.O_ASYNC}, allow},
				{"F_SETOWN itself", table.fcntl, []uint64{3, unix.F_SETOWN, pid}, allow},
				{"F_SETOWN its group", table.fcntl, []uint64{3, unix.F_SETOWN, uint64(-pid & 0xffffffff)}, allow},
				{"F_SETOWN nobody", table.fcntl, []uint64{3, unix.F_SETOWN, 0}, allow},
				{"F_SETOWN its parent", table.fcntl, []uint64{3, unix.F_SETOWN, 4241}, eperm},
				{"F_SETOWN init", table.fcntl, []uint64{3, unix.F_SETOWN, 1}, eperm},
				{"F_SETOWN another group", table.fcntl, []uint64{3, unix.F_SETOWN, uint64(-4241 & 0xffffffff)}, eperm},
				{"F_SETOWN_EX", table.fcntl, []uint64{3, unix.F_SETOWN_EX, 0x7fff0000}, eperm},
				{"ioctl FIONREAD", table.ioctl, []uint64{3, 0x541b}, allow},
				{"ioctl FIOSETOWN", table.ioctl, []uint64{3, fioSetOwn, 0x7fff0000}, eperm},
				{"ioctl SIOCSPGRP", table.ioctl, []uint64{3, unix.SIOCSPGRP, 0x7fff0000}, eperm},
			} {
				cases = append(cases, struct {
					name string
					data []byte
					want uint32
				}{c.name, seccompData(a, c.nr, c.args...), c.want})
			}
			if table.x32 {
				cases = append(cases, struct {
					name string
					data []byte
					want uint32
				}{"x32 fork", seccompData(a, x32SyscallBit|57), kill})
			}
			for _, nr := range table.eperm {
				cases = append(cases, struct {
					name string
					data []byte
					want uint32
				}{"refused call", seccompData(a, nr), eperm})
			}
			for _, nr := range table.enosys {
				cases = append(cases, struct {
					name string
					data []byte
					want uint32
				}{"absent call", seccompData(a, nr), enosys})
			}
			for _, c := range cases {
				got, err := vm.Run(c.data)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if uint32(got) != c.want {
					t.Errorf("%s: filter returns %#x, want %#x", c.name, uint32(got), c.want)
				}
			}
		})
	}
}

// TestSeccompTableMatchesXSys checks the written-out numbers of this
// architecture against x/sys/unix.
func TestSeccompTableMatchesXSys(t *testing.T) {
	table, ok := seccompTables[runtime.GOARCH]
	if !ok {
		t.Fatalf("no seccomp table for %s", runtime.GOARCH)
	}
	if table.clone != unix.SYS_CLONE || table.socket != unix.SYS_SOCKET {
		t.Errorf("clone %d, socket %d; x/sys/unix says %d, %d", table.clone, table.socket, unix.SYS_CLONE, unix.SYS_SOCKET)
	}
	for _, nr := range []uint32{unix.SYS_UNSHARE, unix.SYS_SETNS} {
		if !slices.Contains(table.eperm, nr) {
			t.Errorf("system call %d is not refused with EPERM", nr)
		}
	}
	for _, nr := range []uint32{unix.SYS_CLONE3, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER} {
		if !slices.Contains(table.enosys, nr) {
			t.Errorf("system call %d is not refused with ENOSYS", nr)
		}
	}
	privileged := append([]uint32{
		unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
		unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
		unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT,
		unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
		unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD,
		unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
		unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME, unix.SYS_OPEN_BY_HANDLE_AT,
		unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
		unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_KEYCTL, unix.SYS_USERFAULTFD, unix.SYS_SYSLOG, unix.SYS_VHANGUP, unix.SYS_TRUNCATE,
	}, archPrivilegedCalls...)
	for _, nr := range privileged {
		if !slices.Contains(table.eperm, uint32(nr)) {
			t.Errorf("privileged system call %d is not refused with EPERM", nr)
		}
	}
	for _, nr := range []uint32{unix.SYS_KILL, unix.SYS_TKILL, unix.SYS_TGKILL, unix.SYS_RT_SIGQUEUEINFO, unix.SYS_RT_TGSIGQUEUEINFO, unix.SYS_PIDFD_OPEN} {
		if !slices.Contains(table.signals, nr) {
			t.Errorf("signalling system call %d is not restricted to the process itself", nr)
		}
	}
	for _, nr := range []uint32{unix.SYS_SHMGET, unix.SYS_SHMAT, unix.SYS_SHMCTL, unix.SYS_SHMDT, unix.SYS_SEMGET, unix.SYS_SEMOP, unix.SYS_SEMCTL, unix.SYS_SEMTIMEDOP,
		unix.SYS_MSGGET, unix.SYS_MSGSND, unix.SYS_MSGRCV, unix.SYS_MSGCTL,
		unix.SYS_MQ_OPEN, unix.SYS_MQ_UNLINK, unix.SYS_MQ_TIMEDSEND, unix.SYS_MQ_TIMEDRECEIVE, unix.SYS_MQ_NOTIFY, unix.SYS_MQ_GETSETATTR} {
		if !slices.Contains(table.eperm, nr) {
			t.Errorf("IPC system call %d is not refused with EPERM", nr)
		}
	}
	for _, nr := range []uint32{unix.SYS_KCMP, unix.SYS_PIDFD_SEND_SIGNAL, unix.SYS_PIDFD_GETFD, unix.SYS_PROCESS_MADVISE, unix.SYS_PROCESS_MRELEASE} {
		if !slices.Contains(table.eperm, nr) {
			t.Errorf("system call %d, which acts on another process, is not refused with EPERM", nr)
		}
	}
	for _, nr := range []uint32{unix.SYS_PRLIMIT64, unix.SYS_SCHED_SETAFFINITY, unix.SYS_SCHED_SETPARAM, unix.SYS_SCHED_SETSCHEDULER,
		unix.SYS_SCHED_SETATTR, unix.SYS_MIGRATE_PAGES, unix.SYS_MOVE_PAGES, unix.SYS_GET_ROBUST_LIST} {
		if !slices.Contains(table.pidCalls, nr) {
			t.Errorf("system call %d, which names a process, is not restricted to the process itself", nr)
		}
	}
	if table.setpriority != unix.SYS_SETPRIORITY || table.ioprioSet != unix.SYS_IOPRIO_SET || table.fcntl != unix.SYS_FCNTL || table.ioctl != unix.SYS_IOCTL {
		t.Errorf("setpriority %d, ioprio_set %d, fcntl %d, ioctl %d; x/sys/unix says %d, %d, %d, %d", table.setpriority, table.ioprioSet, table.fcntl, table.ioctl,
			unix.SYS_SETPRIORITY, unix.SYS_IOPRIO_SET, unix.SYS_FCNTL, unix.SYS_IOCTL)
	}
	for _, nr := range archForkCalls {
		if !slices.Contains(table.eperm, nr) {
			t.Errorf("fork-like system call %d is not refused with EPERM", nr)
		}
	}
}
