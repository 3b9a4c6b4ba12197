package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Spec describes one confined process.
type Spec struct {
	// Path is the program to execute (absolute), Args its arguments after
	// argv[0]. Path must be an ELF executable: the package reads its ELF
	// interpreter and libraries to allow them.
	Path string
	Args []string
	// Root, when set, is an unpacked root file system holding Path and
	// every library it loads, such as another Debian release's haproxy
	// with its own glibc (Path is then a path inside Root). The program is
	// started through Root's own ELF interpreter, told to load libraries
	// from Root's library directories only (--library-path,
	// --inhibit-cache), so neither the host's loader nor its libraries
	// take part; the process may read Path and Root's library
	// directories, not the host's. A library or link leading outside Root
	// is refused.
	Root string
	// Entry, when set instead of Path, runs this same binary in the entry
	// mode of that name; see [Entry]. The binary is /proc/self/exe, the
	// very file the running process was started from, so an entry always
	// speaks the protocol of the process that starts it (unless
	// [ServeEntriesFrom] named another build of the same source).
	Entry string
	// Dir is the working directory (absolute). The process may read
	// beneath it.
	Dir string
	// Read lists absolute files or directories the process may read
	// (directories: beneath, listing included). Paths that do not exist
	// are skipped, so optional files such as those of [ResolverFiles] may
	// be named. The program, its ELF interpreter, the directories of its
	// shared libraries and /etc/ld.so.cache are added by the package.
	Read []string
	// Env is the whole environment (default: empty).
	Env []string
	// Limits are the resource limits.
	Limits Limits
	// Runner, when set, starts the process under the runner's identity
	// instead of this process's (see [UseRunner], which sets the default
	// for every Spec).
	Runner *Runner `json:"-"`
}

// Limits are the resource limits of a confined process. Each is set as
// both the soft and the hard limit, so the process cannot raise it.
type Limits struct {
	// CPUTime is RLIMIT_CPU, rounded up to whole seconds; the process is
	// killed (SIGKILL) when it has used that much CPU. 0 = no limit.
	CPUTime time.Duration
	// AddressSpace is RLIMIT_AS in bytes; 0 = no limit. It suits C
	// programs such as haproxy; a Go program reserves much address space
	// at start and fails erratically under it (see the package
	// documentation): limit Data instead.
	AddressSpace uint64
	// Data is RLIMIT_DATA in bytes: private writable memory mapped
	// (heap, thread stacks), not address space merely reserved; 0 = no
	// limit. The gatehouse binary needs about 160 MiB of it to start.
	Data uint64
	// OpenFiles is RLIMIT_NOFILE; 0 = the limit Gatehouse was started
	// with.
	OpenFiles uint64
	// Nice is added to the niceness of the process (lower CPU priority),
	// at most up to 19. It cannot be negative: an unprivileged process
	// cannot raise its priority.
	Nice int
}

// ResolverFiles are the files glibc's getaddrinfo reads to resolve a host
// name (haproxy -c resolves server addresses). A Spec that should resolve
// names lists them in Read; the DNS queries themselves go over UDP, which
// the confinement does not restrict.
var ResolverFiles = []string{
	"/etc/resolv.conf",
	"/etc/hosts",
	"/etc/nsswitch.conf",
	"/etc/host.conf",
	"/etc/gai.conf",
}

// ExitSetup is the exit status of a confined process that could not be
// confined (or could not execute its program): the confinement failed,
// nothing of the program ran, and its stderr says why, after "sandbox: ".
// The program itself may also exit with this status, so it is a failure
// either way, never a verdict of the program.
const ExitSetup = 125

// ErrUnsupported is returned by Command where the package cannot confine
// a process (any OS other than Linux, or an architecture without a
// seccomp table).
var ErrUnsupported = errors.New("sandbox: confinement is not supported on this platform")

const (
	// trampolineArg0 is argv[0] of the process Command starts: this
	// binary again, which confines itself in init and executes the
	// target. argv[1] is the encoded plan.
	trampolineArg0 = "gatehouse-sandbox"
	// entryArg0Prefix, followed by the entry's name, is argv[0] of an
	// Entry-mode target.
	entryArg0Prefix = "gatehouse-sandbox-entry:"
)

// validEntryName keeps entry names printable and unambiguous in argv[0].
func validEntryName(name string) bool {
	return name != "" && !strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r == 0x7f
	})
}

// Capabilities says what this kernel offers the confinement, for startup
// logs, metrics and documentation.
type Capabilities struct {
	// Unsupported, when not empty, says why no confined process can be
	// started here at all (an OS other than Linux): Command then always
	// fails, and whatever needs it fails rather than run unconfined.
	Unsupported string
	// LandlockABI is the Landlock ABI version, 0 if Landlock is not
	// available (then LandlockReason says why). ABI 1 confines files,
	// ABI 4 TCP bind/connect, ABI 6 signals and abstract Unix sockets.
	LandlockABI    int
	LandlockReason string
	// Seccomp is true when seccomp filters can be installed (the ban on
	// creating processes); SeccompReason says why not.
	Seccomp       bool
	SeccompReason string
	// SeparateIdentity is true when confined processes run under another
	// user and group than this process, through a runner ([UseRunner]):
	// the kernel's ordinary permission checks then keep them from this
	// process's files, /proc entries, signals and ptrace, whatever
	// Landlock and seccomp hold. RunnerUID and RunnerGID are the runner's.
	SeparateIdentity     bool
	RunnerUID, RunnerGID int
	// ProcessUIDs, when not empty, is the range of user ids the runner
	// gives its processes, one each, so that they are neither the
	// runner's user nor each other's (a runner StartRunner started:
	// it holds CAP_SETUID); empty, they share the runner's user.
	ProcessUIDs UIDRange
}

// UIDRange is Count user ids from First.
type UIDRange struct{ First, Count int }

func (u UIDRange) contains(id int) bool { return id >= u.First && id < u.First+u.Count }

func (u UIDRange) String() string { return fmt.Sprintf("%d-%d", u.First, u.First+u.Count-1) }

// Landlock ABI versions that brought the rights the package handles.
const (
	abiTruncate = 3 // LANDLOCK_ACCESS_FS_TRUNCATE
	abiNet      = 4 // TCP bind and connect
	abiIoctlDev = 5 // LANDLOCK_ACCESS_FS_IOCTL_DEV
	abiScope    = 6 // signals and abstract Unix sockets
)

// Complete reports whether every guarantee of the package documentation
// holds on this kernel: Landlock (any ABI: files are the one thing only
// Landlock confines; TCP, Unix sockets and signals, which later ABIs
// added, the seccomp filter holds at every ABI) and seccomp filters.
func (c Capabilities) Complete() bool {
	return c.LandlockABI >= 1 && c.Seccomp
}

// Layers names the layers in force, for a log line: "landlock-abi-N",
// "seccomp", "separate-identity", "identity-per-process".
func (c Capabilities) Layers() []string {
	var l []string
	if c.LandlockABI > 0 {
		l = append(l, fmt.Sprintf("landlock-abi-%d", c.LandlockABI))
	}
	if c.Seccomp {
		l = append(l, "seccomp")
	}
	if c.SeparateIdentity {
		l = append(l, "separate-identity")
	}
	if c.ProcessUIDs.Count > 0 {
		l = append(l, "identity-per-process")
	}
	return l
}

// Missing lists, for a log line, the guarantees this kernel cannot give.
func (c Capabilities) Missing() []string {
	var m []string
	if c.LandlockABI == 0 {
		m = append(m, "file confinement (no Landlock: "+c.LandlockReason+"); files are protected by their permissions only")
	}
	if !c.Seccomp {
		m = append(m, "the ban on creating processes, TCP and Unix sockets, signals to other processes and privileged calls (no seccomp filters: "+c.SeccompReason+")")
	}
	return m
}

// cpuReportPrefix starts the line a runner's proxy writes on a killed
// process's stderr, with the CPU time the process used: through a runner
// the caller's exec.Cmd is the proxy's, whose ProcessState holds the
// proxy's own CPU time, not the process's (RLIMIT_CPU's SIGKILL says
// nothing more).
const cpuReportPrefix = "sandbox: the process was killed after "

// cpuReportSuffix ends that line.
const cpuReportSuffix = " of CPU time"

// CPUTime is the CPU time (user and system) of a process [Command]
// started, from its ProcessState and its stderr, and that stderr without
// the line a runner's proxy added to report it. Callers that word a kill
// by its CPU time (RLIMIT_CPU) read it here rather than from the
// ProcessState, which through a runner is the proxy's.
func CPUTime(ps *os.ProcessState, stderr string) (time.Duration, string) {
	var used time.Duration
	if ps != nil {
		used = ps.UserTime() + ps.SystemTime()
	}
	// The proxy writes last, once the process is dead: its line is the
	// last one of the prefix, at a line's start.
	at := strings.LastIndex(stderr, cpuReportPrefix)
	if at < 0 || (at > 0 && stderr[at-1] != '\n') {
		return used, stderr
	}
	before := stderr[:at]
	line, after, _ := strings.Cut(stderr[at+len(cpuReportPrefix):], "\n")
	text, ok := strings.CutSuffix(line, cpuReportSuffix)
	reported, err := time.ParseDuration(text)
	if !ok || err != nil {
		return used, stderr
	}
	return max(used, reported), before + after
}
