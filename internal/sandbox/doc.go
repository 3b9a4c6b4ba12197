// Package sandbox runs a program confined: haproxy -c on a configuration
// rendered from a config author's templates, or this binary again in an
// entry mode (a render worker), so that even input that passes every
// policy cannot run other programs, read files outside its directory,
// reach the network over TCP, hog the CPU or memory, or leave anything
// running.
//
// # How
//
// [Command] returns an *exec.Cmd that starts this very binary
// (/proc/self/exe) with argv[0] "gatehouse-sandbox" and the resolved plan
// in argv[1], in its own session, with an empty environment and
// Pdeathsig SIGKILL. The package's init recognises argv[0] and, before
// main (or a test harness) runs and while the main goroutine is locked to
// the main thread, confines that thread and executes the program with
// [Spec].Env:
//
//  1. lowers its CPU priority by [Limits].Nice (niceness is per thread on
//     Linux; execve keeps it, and Go's threads inherit it);
//  2. sets no_new_privs;
//  3. applies a Landlock ruleset;
//  4. installs a seccomp filter;
//  5. sets the resource limits;
//  6. calls execve. Landlock, seccomp and no_new_privs belong to the
//     thread; the thread that executes passes them to the new image, whole.
//
// For [Spec].Entry the program is /proc/self/exe again, with argv[0]
// naming the entry, so that [Entry] is true in the new image. No psx or
// AllThreadsSyscall is needed: only one thread is confined, and it is the
// one that executes. Nothing in the trampoline reads the environment,
// flags or anything a test harness sets up, so it works the same in test
// binaries, with cgo and with the race detector.
//
// # What each layer stops
//
//   - Empty environment: nothing of Gatehouse's environment reaches the
//     program (a config's "${VAR}", Lua's os.getenv).
//   - Landlock (files): every filesystem right of the running ABI is
//     handled, so denied unless granted. The process may read (and list)
//     beneath [Spec].Dir and [Spec].Read; read beneath the directories of
//     its shared libraries (found from the ELF headers) and
//     /etc/ld.so.cache; read and execute its program and the program's
//     ELF interpreter, and nothing else. A program from an unpacked root
//     file system ([Spec].Root: another release's haproxy, whose glibc the
//     host lacks) runs through the root's own loader with the root's
//     library directories only; the host's libraries and /etc/ld.so.cache
//     are then not readable. It may write, create, remove,
//     rename or link nothing. /proc is not readable, so neither
//     Gatehouse's /proc/<pid>/environ nor its own; Landlock also refuses
//     ptrace and /proc access to processes outside the domain. Command
//     refuses a Dir or Read that is, lies beneath or lies above /proc,
//     /var/run/secrets, /etc/passwd, /etc/shadow or /root, or that is
//     Gatehouse's home directory or above it.
//   - Landlock (ABI 4, TCP): bind and connect of TCP sockets are denied
//     (no port is allowed); the seccomp filter refuses TCP sockets at
//     every ABI besides.
//   - Landlock (ABI 6, scopes): signals to processes outside the domain
//     (Gatehouse, anything else) and connections to abstract Unix sockets
//     outside it are denied; the seccomp filter holds both at every ABI
//     besides (no Unix socket; signals to the process itself only).
//   - seccomp: no process can be created (fork, vfork, clone without
//     CLONE_THREAD: EPERM; clone3: ENOSYS, so glibc falls back to clone);
//     threads still work. So a program cannot start a shell (Lua's
//     os.execute, io.popen), and nothing it starts can outlive it, setsid
//     or not: there is nothing to outlive it. unshare and setns: EPERM.
//     socket() is limited to IPv4/IPv6 UDP (no TCP, MPTCP, SMC, Unix or
//     netlink socket); the calls that signal or change a process
//     (prlimit64, setpriority, sched_set*, F_SETOWN, ...) may name only
//     the process itself; IPC objects, privileged calls and truncate by
//     path: EPERM. io_uring:
//     ENOSYS (it makes sockets without socket()). System calls of another
//     ABI (i386, x32) kill the process. See seccomp_linux.go.
//   - Capabilities: every set emptied before the program runs (caps_linux.go).
//   - Resource limits, each soft = hard so the process cannot raise them:
//     RLIMIT_CPU ([Limits].CPUTime; SIGKILL when used up), RLIMIT_AS
//     ([Limits].AddressSpace), RLIMIT_DATA ([Limits].Data),
//     RLIMIT_NOFILE ([Limits].OpenFiles), RLIMIT_CORE = 0 and
//     RLIMIT_FSIZE = 0. RLIMIT_NPROC is not used: it counts every process
//     and thread of the user (Gatehouse's included) and root ignores it;
//     seccomp is the limit on processes, and it is zero.
//   - Niceness: the process runs [Limits].Nice lower than the thread that
//     started it, so the server's threads (cache-served decisions of other
//     modules) win the CPU from a render or a check.
//   - Session and kill: the process leads its own session and process
//     group; when the context ends, Cancel sends SIGKILL to the group
//     and Wait returns within WaitDelay (1s) even if a pipe were held.
//     Pdeathsig kills it if Gatehouse dies.
//
// # Without privileges
//
// Gatehouse runs in a Pod as a non-root user with no capabilities and the
// RuntimeDefault seccomp profile. All of the above holds there: Landlock
// and seccomp filters need no privilege once no_new_privs is set;
// lowering resource limits, raising niceness and setsid need none either.
// Namespaces (user, PID, mount, network) do need privilege, or
// unprivileged user namespaces that the runtime's default profile refuses
// (unshare, setns and clone with namespace flags are allowed only with
// CAP_SYS_ADMIN), so this package does not use them: instead of a PID
// namespace that would collect what a program starts, the program can
// start nothing.
//
// The default profiles of the container runtimes (moby's
// profiles/seccomp/default.json and containerd's
// contrib/seccomp/seccomp_default.go, both since January 2022) allow
// landlock_create_ruleset, landlock_add_rule and landlock_restrict_self,
// seccomp, prctl, setrlimit/prlimit64, setpriority and setsid; they
// answer clone3 with ENOSYS without CAP_SYS_ADMIN, as this filter does,
// and no longer allow io_uring (containerd since November 2023). Filters
// stack: the runtime's profile and this one both apply.
//
// Run as root or with capabilities (make run, a root Deployment), the
// trampoline empties every capability set before it executes the program
// (bounding, inheritable, permitted, effective, ambient; securebits make
// root not special, locked) and checks that they are empty: the confined
// program holds no privilege whatever user Gatehouse runs as. The seccomp
// filter refuses the privileged calls besides (kernel modules, kexec,
// reboot, mount, ptrace, bpf, ...), so neither layer alone stands between
// a confined program and the kernel's privileged interfaces. Still, run
// Gatehouse as non-root without capabilities, as its chart does.
//
// # Separate identity
//
// With a [Runner] ([UseRunner], or [Spec].Runner), the process runs under
// the runner's user and group instead of Gatehouse's: the kernel's user-id
// checks then refuse it Gatehouse's files (0600 keys, the token), its /proc
// entries, signals and ptrace, with or without Landlock and seccomp.
// Command then returns a command that starts a proxy (this binary, argv[0]
// "gatehouse-sandbox-proxy") with the caller's stdio; the proxy hands them
// (SCM_RIGHTS) and the Spec to the runner over its SOCK_SEQPACKET socket,
// the runner starts the trampoline with them and reports the exit status,
// which the proxy exits with. Closing the connection (the proxy killed by
// the context, or dead with Gatehouse) makes the runner kill the process.
// The runner serves one user, Gatehouse's (SO_PEERCRED), and is not
// dumpable. [StartRunner] starts one as a child under another user (for a
// root Gatehouse, and the offline commands run as root), started again
// when it dies; it keeps CAP_SETUID, CAP_SETGID and CAP_KILL to start each
// process under a user of its own ([RunnerOptions].ProcessUIDs), so that
// no process shares its user with the runner, another process or root.
// [ServeRunner] serves in a container of its own (`gatehouse
// sandbox-runner`), without capabilities: its processes share its user,
// and the seccomp filter and Landlock keep them apart. Directories the
// process reads go beneath [WorkDir], made readable by the runner's group
// with [ShareDir].
//
// # Older kernels
//
// [Available] probes once what the kernel offers. Command confines with
// what there is and never less: the trampoline applies exactly what
// Available reported, or fails. Without Landlock, files are protected by
// file permissions only, TCP and signals not at all; Landlock ABI 1-3
// lacks TCP rules, ABI 4-5 lacks the scopes (a same-user process such as
// Gatehouse can then be signalled). Without seccomp filters, processes can
// be created and can outlive the check (a setsid child escapes the group
// kill). [Capabilities.Complete] is false then and
// [Capabilities.Missing] says what is missing: the caller should refuse
// to run untrusted input unless an administrator allows it.
//
// # Not confined
//
//   - UDP: haproxy -c resolves server names, over UDP DNS
//     through the resolver's files ([ResolverFiles]); Landlock has no UDP
//     rules. A program can therefore send datagrams anywhere the Pod's
//     network policy lets it; use a NetworkPolicy for egress.
//   - Pathname Unix sockets: Landlock (up to ABI 7) does not restrict
//     connecting to one; a Pod's filesystem has few.
//   - Metadata: Landlock does not restrict stat, readlink or access, so a
//     program can learn whether a path exists ("Permission denied" versus
//     "No such file").
//   - What the process may execute: its program and its ELF interpreter.
//     The interpreter can load any readable ELF file, such as a library,
//     as a program; it runs in the same confinement.
//   - Its own directory and the files in Read, which it may read whole.
//   - Wall-clock time: bounded by the caller's context, not here.
//
// # Memory limits and Go programs
//
// A Go runtime reserves address space up front (heap arena index, page
// allocator summaries, scavenger index) and, under a lower RLIMIT_AS,
// does with less only by accident of a failed reservation: whether it
// starts is then neither monotonic in the limit nor repeatable. Measured
// on amd64 with Go 1.26 (an entry that allocates 10 MiB, 5-10 runs per
// limit): the gatehouse binary (78 MB, cgo) starts with 832 MiB in 4 runs
// of 5, never with 1216 or 1440 MiB, and reliably only from about 1.7
// GiB; a small test binary starts with 832 MiB every time but never with
// 1152-1216 MiB. RLIMIT_AS therefore suits C programs such as haproxy, not
// Go. For a Go entry use [Limits].Data (RLIMIT_DATA: writable memory
// actually mapped, reservations excluded): the gatehouse binary needs 160
// MiB of it (128 MiB: 2 runs of 5), a small test binary 120 MiB, most of it
// thread stacks (8 MiB per thread: set GOMAXPROCS in [Spec].Env, which
// also bounds how fast the process spends its CPU time) and the heap arena
// index. Set Data to that plus the working set. The race detector's shadow
// memory counts as data too (about 430 MiB for a small test binary).
//
// In an entry the Go runtime cannot read /proc or /sys: GOMAXPROCS falls
// back to the CPU count (not the cgroup's quota) unless Env sets it.
//
// # Using it
//
// Stdout and Stderr must not be regular files (RLIMIT_FSIZE is 0): leave
// them io.Writers, and os/exec gives the process pipes. The trampoline
// exits with [ExitSetup] (125) and a "sandbox: " message on stderr when it
// cannot confine or execute; treat that status as a failure, never as the
// program's verdict.
//
// A confined start costs a start of this binary first: with the gatehouse
// binary as trampoline, /bin/true took 10-15 ms confined against 1.3 ms
// directly, and a Go entry 40-55 ms (all package inits run before the
// entry's), on a loaded two-CPU machine; with the small test binary,
// about 3 ms against 0.6 ms (BenchmarkConfinedStart). The trampoline's
// init runs after about 130 packages (7 ms into the start).
package sandbox
