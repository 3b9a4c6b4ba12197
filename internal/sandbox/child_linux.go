package sandbox

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// init is the trampoline: a process started by Command is this binary
// with argv[0] trampolineArg0. It confines itself and executes the
// program, before any package initialised after this one (and before
// main, or a test harness) runs. Only this package's imports and the
// packages ordered before it have initialised; nothing here depends on
// them, on the environment (empty) or on flags.
func init() {
	if len(os.Args) != 2 {
		return
	}
	switch os.Args[0] {
	case runnerArg0:
		runnerMain(os.Args[1])
	case proxyArg0:
		proxyMain(os.Args[1])
	}
	if os.Args[0] != trampolineArg0 {
		return
	}
	// Landlock, seccomp, no_new_privs and the nice value belong to the
	// calling thread, and the thread that calls execve is the one whose
	// credentials the new image keeps. The main goroutine is locked to
	// the main thread during init anyway; this says it is needed.
	runtime.LockOSThread()
	var p plan
	if err := json.Unmarshal([]byte(os.Args[1]), &p); err != nil {
		setupFailed(fmt.Errorf("decoding the plan: %w", err))
	}
	setupFailed(confineAndExec(p))
}

// setupFailed reports a failure to confine or execute and exits with
// ExitSetup; nothing of the program has run.
func setupFailed(err error) {
	fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
	os.Exit(ExitSetup)
}

// confineAndExec applies p to the calling thread and executes the program;
// it returns only on failure.
func confineAndExec(p plan) error {
	if raceBuild && p.Limits.AddressSpace > 0 {
		// A race-built trampoline (a test binary) still allocates for
		// ThreadSanitizer between its limits and the exec, and its start
		// alone takes more address space than most programs' limits:
		// the limit is at least what it already has plus 256 MiB.
		// Production binaries are never race-built.
		if size, err := addressSpaceInUse(); err == nil {
			p.Limits.AddressSpace = max(p.Limits.AddressSpace, size+256<<20)
		}
	}
	table, ok := seccompTables[runtime.GOARCH]
	if p.Seccomp && !ok {
		return ErrUnsupported
	}
	// Lower priority first: getpriority/setpriority act on the calling
	// thread (who = 0), and execve keeps it.
	if p.Limits.Nice > 0 {
		raw, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
		if err != nil {
			return fmt.Errorf("getpriority: %w", err)
		}
		nice := min(20-raw+p.Limits.Nice, 19) // the system call returns 20 - nice
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, nice); err != nil {
			return fmt.Errorf("setpriority %d: %w", nice, err)
		}
	}
	// no_new_privs: required for unprivileged Landlock and seccomp, and
	// a set-user-ID program cannot gain privileges.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if p.LandlockABI > 0 {
		var rules []landlockRule
		for _, r := range p.Read {
			rules = append(rules, landlockRule{path: r, access: rightsReadDir})
		}
		for _, r := range p.Libs {
			rules = append(rules, landlockRule{path: r, access: rightsReadFile})
		}
		for _, r := range p.Exec {
			rules = append(rules, landlockRule{path: r, access: rightsExec})
		}
		if err := restrictLandlock(p.LandlockABI, rules); err != nil {
			return err
		}
	}
	if p.Seccomp {
		if err := installSeccomp(table, os.Getpid()); err != nil {
			return err
		}
	}
	// execve's arguments are built now: once the limits are set, the
	// trampoline's own address space (a Go runtime reserves more than
	// many programs' limits) leaves it no new mapping, and an allocation
	// that needed one killed it ("runtime: cannot allocate memory", under
	// load, when the collector had emptied the spans syscall.Exec's
	// conversions would have used).
	path, err := syscall.BytePtrFromString(p.Path)
	if err != nil {
		return err
	}
	argv, err := syscall.SlicePtrFromStrings(p.Argv)
	if err != nil {
		return err
	}
	envv, err := syscall.SlicePtrFromStrings(p.Env)
	if err != nil {
		return err
	}
	// Resource limits last: the trampoline itself must not run into
	// them. Between them and execve nothing allocates: a raw system call
	// (syscall.Exec would convert its arguments first; nothing else in
	// this process forks, which its lock guards against).
	if err := setLimits(p.Limits); err != nil {
		return err
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(path)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	return fmt.Errorf("executing %s: %w", p.Path, errno)
}

// defaultOpenFiles is the RLIMIT_NOFILE soft limit a program gets when
// Limits.OpenFiles is not set: Linux's own default.
const defaultOpenFiles = 1024

// setLimits sets the resource limits, each soft = hard.
func setLimits(l Limits) error {
	set := func(name string, resource int, v uint64) error {
		// syscall.Setrlimit rather than x/sys/unix: for RLIMIT_NOFILE it
		// tells syscall.Exec not to restore the runtime's original.
		if err := syscall.Setrlimit(resource, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("setting %s to %d: %w", name, v, err)
		}
		return nil
	}
	// No core dumps (they would hold the rendering and land in the
	// working directory) and no file writes (nothing confined writes
	// files; Landlock already refuses to open them for writing).
	if err := set("RLIMIT_CORE", unix.RLIMIT_CORE, 0); err != nil {
		return err
	}
	if err := set("RLIMIT_FSIZE", unix.RLIMIT_FSIZE, 0); err != nil {
		return err
	}
	if l.CPUTime > 0 {
		secs := uint64((l.CPUTime + time.Second - 1) / time.Second)
		// soft = hard: the kernel sends SIGKILL at once, not an
		// ignorable SIGXCPU.
		if err := set("RLIMIT_CPU", unix.RLIMIT_CPU, secs); err != nil {
			return err
		}
	}
	if l.OpenFiles > 0 {
		if err := set("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, l.OpenFiles); err != nil {
			return err
		}
	} else {
		// The Go runtime raised the soft limit to the hard one at start,
		// which syscall.Exec would have put back; the raw execve does
		// not, so the program gets the usual soft default (a program
		// such as haproxy sizes its tables by it), under the same hard
		// limit.
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(unix.RLIMIT_NOFILE, &cur); err != nil {
			return fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
		}
		if cur.Cur > defaultOpenFiles {
			if err := syscall.Setrlimit(unix.RLIMIT_NOFILE, &syscall.Rlimit{Cur: defaultOpenFiles, Max: cur.Max}); err != nil {
				return fmt.Errorf("setting RLIMIT_NOFILE to %d: %w", defaultOpenFiles, err)
			}
		}
	}
	if l.Data > 0 {
		if err := set("RLIMIT_DATA", unix.RLIMIT_DATA, l.Data); err != nil {
			return err
		}
	}
	if l.AddressSpace > 0 {
		if err := set("RLIMIT_AS", unix.RLIMIT_AS, l.AddressSpace); err != nil {
			return err
		}
	}
	return nil
}

// Entry reports whether this process was started by Command with
// Spec.Entry == name. The package implementing an entry calls it from its
// init:
//
//	func init() { if sandbox.Entry("render-worker") { os.Exit(serve(os.Stdin, os.Stdout)) } }
//
// os.Args[1:] are then Spec.Args. A process whose argv[0] names the entry
// but which was not confined (no_new_privs unset: someone ran the binary
// with that argv[0] by hand) is refused: it exits with ExitSetup rather
// than serve unconfined.
func Entry(name string) bool {
	if len(os.Args) == 0 || os.Args[0] != entryArg0Prefix+name {
		return false
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 1 {
		setupFailed(fmt.Errorf("entry %q was not started by sandbox.Command", name))
	}
	return true
}

// Available says what this kernel offers. It is probed once.
func Available() Capabilities {
	c := available()
	if limit := landlockLimit.Load(); limit >= 0 && int64(c.LandlockABI) > limit {
		c.LandlockABI = int(limit)
		c.LandlockReason = fmt.Sprintf("simulated: Landlock limited to ABI %d (LimitLandlockABI)", limit)
		if limit == 0 {
			c.LandlockReason = "simulated: a kernel without Landlock (LimitLandlockABI)"
		}
	}
	if noSeccomp.Load() {
		c.Seccomp, c.SeccompReason = false, "simulated: a kernel without seccomp filters (tests only)"
	}
	if r := defaultRunner.Load(); r != nil {
		c.SeparateIdentity = true
		c.RunnerUID, c.RunnerGID = r.Identity()
		c.ProcessUIDs = r.ProcessUIDs()
	}
	return c
}

// noSeccomp leaves seccomp out of every confinement: only tests set it
// (export_test.go), to show what the other layers hold without it.
var noSeccomp atomic.Bool

// defaultRunner is UseRunner's runner.
var defaultRunner atomic.Pointer[Runner]

// UseRunner makes every Command from then on start its process through r
// (nil: this process starts them), under r's identity: Available then
// reports SeparateIdentity.
func UseRunner(r *Runner) { defaultRunner.Store(r) }

// WorkDir is where directories that confined processes read belong: the
// runner's work directory when one is in use ([UseRunner]), else ""
// (os.TempDir). Pass it to os.MkdirTemp, and ShareDir what it returns.
func WorkDir() string {
	if r := defaultRunner.Load(); r != nil {
		return r.WorkDir()
	}
	return ""
}

// ShareDir lets the runner's group read dir and what it holds (directories
// 0750, files 0640; the group is the work directory's, inherited through
// its set-group-ID bit), once they are written, so that a process the
// runner starts can read them; nothing without a runner (the process runs
// as this process's user). Nothing else of this process is shared: only
// what lies beneath WorkDir.
func ShareDir(dir string) error {
	if defaultRunner.Load() == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o640)
		if d.IsDir() {
			mode = 0o750 | fs.ModeSetgid
		} else if !d.Type().IsRegular() {
			return fmt.Errorf("sandbox: %s is not a regular file or directory", path)
		}
		return os.Chmod(path, mode)
	})
}

var available = sync.OnceValue(func() Capabilities {
	var c Capabilities
	c.LandlockABI, c.LandlockReason = landlockABI()
	c.Seccomp, c.SeccompReason = seccompAvailable()
	return c
})

// landlockLimit is LimitLandlockABI's limit, -1 for none.
var landlockLimit = func() *atomic.Int64 {
	var v atomic.Int64
	v.Store(-1)
	return &v
}()

// LimitLandlockABI makes this process confine as a kernel offering at most
// Landlock ABI abi would (0: a kernel without Landlock; negative: no
// limit, the kernel's own): Available reports it, and every Command from
// then on applies that ABI's rights only, with the gaps closed as on such
// a kernel (seccomp_linux.go). It simulates the kernels platforms run
// (ABI 1 on Ubuntu 22.04's 5.15, 4 on 6.8, 0 where the LSM is not
// enabled) on a newer one: for tests, and for `--sandbox-landlock-abi`
// when reproducing a node's confinement.
func LimitLandlockABI(abi int) { landlockLimit.Store(int64(max(abi, -1))) }

// addressSpaceInUse is this process's address space (VmSize), from
// /proc/self/statm, read before the confinement hides /proc.
func addressSpaceInUse() (uint64, error) {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	var pages uint64
	if _, err := fmt.Sscan(string(statm), &pages); err != nil {
		return 0, err
	}
	return pages * uint64(os.Getpagesize()), nil
}
