package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// selfExe is this binary, as the kernel knows it: the very file this
	// process was started from, even if the path it came from was
	// replaced or removed since.
	selfExe = "/proc/self/exe"
	// ldCache is the dynamic linker's cache of library paths.
	ldCache = "/etc/ld.so.cache"
	// waitDelay bounds how long Wait waits for the output pipes once the
	// process has been killed. Nothing else can hold them open (no child
	// can exist), so they close at once; the delay is a backstop.
	waitDelay = time.Second
)

// plan is what Command hands the trampoline (argv[1], JSON): everything
// resolved, so that the trampoline only applies it.
type plan struct {
	// Path is the program to execute; Argv its whole argv.
	Path string
	Argv []string
	Env  []string
	// ReadDirs may be read and listed beneath (Spec.Dir, Spec.Read).
	// Files in the list are allowed read only.
	Read []string
	// Libs may be read beneath (not listed): library directories.
	Libs []string
	// Exec are files that may be read and executed: the program and its
	// ELF interpreter.
	Exec   []string
	Limits Limits
	// LandlockABI and Seccomp are what the parent found available; the
	// trampoline must apply them or fail, never silently confine less
	// than Available reported.
	LandlockABI int
	Seccomp     bool
}

// Command returns a started-nothing *exec.Cmd that runs spec confined. The
// caller sets Stdin/Stdout/Stderr and calls Start/Wait. Stdout and Stderr
// must not be regular files (RLIMIT_FSIZE is 0): leave them io.Writers,
// and os/exec gives the process pipes. When ctx ends, the process and
// everything it started are killed (SIGKILL), and Wait returns soon after
// (WaitDelay).
func Command(ctx context.Context, spec Spec) (*exec.Cmd, error) {
	runner := spec.Runner
	if runner == nil {
		runner = defaultRunner.Load()
	}
	caps := Available()
	if runner == nil {
		return trampoline(ctx, spec, caps)
	}
	// Checked here too, so that a Spec the runner would refuse fails
	// at once, as without a runner; the runner plans it again with its
	// own view of the files (its container's).
	if _, err := newPlan(spec, caps); err != nil {
		return nil, err
	}
	spec.Runner = nil
	encoded, err := json.Marshal(proxyConfig{Socket: runner.Socket(), Request: request{
		Spec:          spec,
		LandlockLimit: landlockLimit.Load(),
		NoSeccomp:     noSeccomp.Load(),
	}})
	if err != nil {
		return nil, fmt.Errorf("sandbox: encoding the request: %w", err)
	}
	cmd := exec.CommandContext(ctx, selfExe)
	cmd.Args = []string{proxyArg0, string(encoded)}
	cmd.Env = []string{}
	cmd.Dir = "/"
	setSessionAndKill(cmd)
	return cmd, nil
}

// trampoline is the command that confines spec and executes it, as caps
// allow, started by this process (or by a runner).
func trampoline(ctx context.Context, spec Spec, caps Capabilities) (*exec.Cmd, error) {
	p, err := newPlan(spec, caps)
	if err != nil {
		return nil, err
	}
	encoded, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("sandbox: encoding the plan: %w", err)
	}
	cmd := exec.CommandContext(ctx, selfExe)
	cmd.Args = []string{trampolineArg0, string(encoded)}
	// The trampoline's own environment is empty too: nothing of
	// Gatehouse's environment reaches the trampoline's runtime or the
	// program (GODEBUG, GORACE and the like included).
	cmd.Env = []string{}
	cmd.Dir = spec.Dir
	setSessionAndKill(cmd)
	return cmd, nil
}

// setSessionAndKill starts cmd in its own session, killed with it group
// when its context ends or this process dies.
func setSessionAndKill(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own session (and so process group): the process has no
		// controlling terminal and cannot signal Gatehouse's group.
		Setsid: true,
		// Killed when Gatehouse dies (strictly: when the thread that
		// started it ends; Go keeps threads alive unless a goroutine
		// locked to one exits).
		Pdeathsig: syscall.SIGKILL,
	}
	cmd.Cancel = func() error {
		// The whole session's group, as a backstop: with seccomp no
		// other process can exist.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return os.ErrProcessDone
			}
			return err
		}
		return nil
	}
	cmd.WaitDelay = waitDelay
}

// newPlan checks spec and resolves everything the trampoline needs.
func newPlan(spec Spec, caps Capabilities) (plan, error) {
	if _, ok := seccompTables[runtime.GOARCH]; !ok {
		return plan{}, ErrUnsupported
	}
	var p plan
	switch {
	case spec.Entry != "" && spec.Path != "":
		return p, errors.New("sandbox: Spec sets both Path and Entry")
	case spec.Entry != "":
		if !validEntryName(spec.Entry) {
			return p, fmt.Errorf("sandbox: invalid entry name %q", spec.Entry)
		}
		program, err := entryProgram()
		if err != nil {
			return p, fmt.Errorf("sandbox: the program for entry %q: %w", spec.Entry, err)
		}
		if program == "" {
			program = selfExe
		}
		p.Path = program
		p.Argv = append([]string{entryArg0Prefix + spec.Entry}, spec.Args...)
	case spec.Path != "":
		if !filepath.IsAbs(spec.Path) {
			return p, fmt.Errorf("sandbox: Path %q is not absolute", spec.Path)
		}
		p.Path = spec.Path
		p.Argv = append([]string{filepath.Base(spec.Path)}, spec.Args...)
	default:
		return p, errors.New("sandbox: Spec sets neither Path nor Entry")
	}
	for _, s := range slices.Concat(p.Argv, spec.Env) {
		if strings.IndexByte(s, 0) >= 0 {
			return p, errors.New("sandbox: an argument or variable contains NUL")
		}
	}
	if spec.Limits.Nice < 0 {
		return p, fmt.Errorf("sandbox: Limits.Nice %d is negative", spec.Limits.Nice)
	}
	if spec.Limits.CPUTime < 0 {
		return p, fmt.Errorf("sandbox: Limits.CPUTime %v is negative", spec.Limits.CPUTime)
	}
	p.Env = spec.Env
	if p.Env == nil {
		p.Env = []string{}
	}
	p.Limits = spec.Limits

	var prog program
	var err error
	if spec.Root != "" {
		if spec.Entry != "" {
			return p, errors.New("sandbox: Spec sets both Root and Entry")
		}
		prog, err = inspectInRoot(spec.Root, p.Path)
		if err != nil {
			return p, err
		}
		// The root's loader runs the program: its argv names the program
		// (argv[0] as without a root), the loader's own options come first.
		p.Argv = slices.Concat([]string{p.Argv[0], "--inhibit-cache", "--library-path", strings.Join(prog.searchDirs, ":"), "--argv0", p.Argv[0], p.Path}, p.Argv[1:])
		p.Path = prog.exec[1]
	} else if prog, err = inspectCached(p.Path); err != nil {
		return p, err
	}
	p.Exec = prog.exec
	p.Libs = prog.libDirs
	if spec.Dir != "" {
		if !filepath.IsAbs(spec.Dir) {
			return p, fmt.Errorf("sandbox: Dir %q is not absolute", spec.Dir)
		}
		if err := checkReadable(spec.Dir); err != nil {
			return p, err
		}
		p.Read = append(p.Read, spec.Dir)
	}
	read := spec.Read
	if prog.dynamic && spec.Root == "" {
		read = append(read[:len(read):len(read)], ldCache)
	}
	for _, r := range read {
		if !filepath.IsAbs(r) {
			return p, fmt.Errorf("sandbox: Read path %q is not absolute", r)
		}
		if _, err := os.Stat(r); errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return p, fmt.Errorf("sandbox: Read path: %w", err)
		}
		if err := checkReadable(r); err != nil {
			return p, err
		}
		p.Read = append(p.Read, r)
	}
	p.LandlockABI = caps.LandlockABI
	p.Seccomp = caps.Seccomp
	return p, nil
}

// neverReadable are paths no confined process may read, whatever a Spec
// says: other processes' memory and environment (/proc), the Pod's service
// account token, the user database and the home of root. A Read or Dir
// beneath one of them, or above one (such as "/" or "/etc"), is refused.
var neverReadable = []string{
	"/proc",
	"/var/run/secrets",
	"/run/secrets",
	"/etc/passwd",
	"/etc/shadow",
	"/etc/gshadow",
	"/root",
}

// checkReadable refuses a path that would open one of neverReadable, or
// the home directory of Gatehouse's user (or a directory above it), to the
// confined process. Paths are compared as given and with symbolic links
// resolved.
func checkReadable(path string) error {
	paths := []string{filepath.Clean(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		paths = append(paths, real)
	}
	for _, p := range paths {
		for _, f := range neverReadable {
			if within(p, f) || within(f, p) {
				return fmt.Errorf("sandbox: %s would let the process read %s", path, f)
			}
		}
		if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) && filepath.Clean(home) != "/" && within(filepath.Clean(home), p) {
			return fmt.Errorf("sandbox: %s would let the process read the home directory %s", path, home)
		}
	}
	return nil
}

// within reports whether path is dir or beneath it.
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// program is what a binary needs to start.
type program struct {
	exec    []string // the binary and its ELF interpreter
	libDirs []string // directories of its shared libraries
	dynamic bool     // it has an ELF interpreter
	// searchDirs are, for a program in a root, the root's library
	// directories that exist, in the loader's order.
	searchDirs []string
}

// programCache remembers inspections by path, checked against the file's
// identity: a check runs the same haproxy thousands of times.
var programCache struct {
	sync.Mutex
	m map[string]cachedProgram
}

type cachedProgram struct {
	dev, ino uint64
	mtime    unix.Timespec
	prog     program
}

func inspectCached(path string) (program, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return program{}, fmt.Errorf("sandbox: program %s: %w", path, err)
	}
	programCache.Lock()
	c, ok := programCache.m[path]
	programCache.Unlock()
	if ok && c.dev == st.Dev && c.ino == st.Ino && c.mtime == st.Mtim {
		return c.prog, nil
	}
	prog, err := inspect(path)
	if err != nil {
		return program{}, err
	}
	programCache.Lock()
	if programCache.m == nil {
		programCache.m = make(map[string]cachedProgram)
	}
	programCache.m[path] = cachedProgram{dev: st.Dev, ino: st.Ino, mtime: st.Mtim, prog: prog}
	programCache.Unlock()
	return prog, nil
}
