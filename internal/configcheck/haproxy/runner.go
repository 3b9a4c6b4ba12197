package haproxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

const (
	// fallbackBinary is where Debian's haproxy package installs the binary.
	fallbackBinary = "/usr/sbin/haproxy"
	installHint    = "install Debian's package: apt-get install haproxy"
	// waitDelay bounds how long Wait waits for the output pipes after the
	// process exited or was killed.
	waitDelay = time.Second
	// maxOutput bounds the haproxy output kept in memory.
	maxOutput = 1 << 20
)

// Runner runs haproxy -c on one rendering. It knows nothing of queues or
// verdict caches: the Checker schedules runs and remembers their verdicts,
// so scheduling is tested without any process and execution without any
// queue.
type Runner interface {
	// Run checks out. An invalid configuration is a RunResult with Valid
	// false and haproxy's simplified message, not an error; the error is
	// for runs that reached no verdict (ctx ended, haproxy could not start
	// or ended without saying why).
	Run(ctx context.Context, out render.Output) (RunResult, error)
}

// RunResult is what one haproxy -c said.
type RunResult struct {
	Valid bool
	// Message is the simplified output when invalid.
	Message string
	// Alerts are every alert of the output when invalid (ParseAlerts).
	Alerts Alerts
}

// RunnerOptions configure the process runner. Every zero field has a
// default, applied by NewRunner.
type RunnerOptions struct {
	// Binary is the haproxy executable: a path, or a name looked up in
	// PATH. Default: "haproxy" in PATH, else /usr/sbin/haproxy.
	Binary string
	// Root, when set, is an unpacked root file system holding haproxy and
	// every library it loads (another Debian release's packages, such as
	// Debian 13's haproxy 3.0 on a Debian 12 machine, whose glibc is too
	// old for it): haproxy runs through the root's own loader and
	// libraries (sandbox.Spec.Root), and Binary is its path inside the
	// root (default /usr/sbin/haproxy).
	Root string
	// TempDir is the parent of every run's private directory. Default:
	// the sandbox runner's work directory where checks run under another
	// identity (sandbox.WorkDir), else os.TempDir().
	TempDir string
	// Confinement limits every run (see confine.go for the defaults).
	Confinement Confinement
}

func (o RunnerOptions) withDefaults() (RunnerOptions, error) {
	if o.Root != "" {
		binary, err := binaryInRoot(o.Root, o.Binary)
		if err != nil {
			return o, err
		}
		o.Binary = binary
	} else {
		binary, err := findBinary(o.Binary)
		if err != nil {
			return o, err
		}
		o.Binary = binary
	}
	if o.TempDir == "" {
		o.TempDir = sandbox.WorkDir()
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if info, err := os.Stat(o.TempDir); err != nil {
		return o, fmt.Errorf("haproxy checker: temporary directory: %w", err)
	} else if !info.IsDir() {
		return o, fmt.Errorf("haproxy checker: temporary directory %s is not a directory", o.TempDir)
	}
	o.Confinement = o.Confinement.withDefaults()
	return o, nil
}

// ProcessRunner runs the real haproxy binary, confined, in a private
// directory per run.
type ProcessRunner struct {
	opts    RunnerOptions
	version Version
}

var _ Runner = (*ProcessRunner)(nil)

// NewRunner returns the process runner. Its error says how to install
// haproxy when the binary is missing, and refuses a haproxy whose grammar
// the check policy does not cover (version.go).
func NewRunner(opts RunnerOptions) (*ProcessRunner, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &ProcessRunner{opts: opts}
	if r.version, err = r.readVersion(context.Background()); err != nil {
		return nil, fmt.Errorf("haproxy checker: reading the version of %s: %w", opts.Binary, err)
	}
	if err := checkBranch(opts.Binary, r.version); err != nil {
		return nil, fmt.Errorf("haproxy checker: %w", err)
	}
	return r, nil
}

// Version is the version of the haproxy the runner runs.
func (r *ProcessRunner) Version() Version { return r.version }

// findBinary resolves the haproxy executable to an absolute path (runs
// change their working directory, so a relative path would break).
func findBinary(name string) (string, error) {
	var path string
	if name == "" {
		if p, err := exec.LookPath("haproxy"); err == nil {
			path = p
		} else if p, err := exec.LookPath(fallbackBinary); err == nil {
			path = p
		} else {
			return "", fmt.Errorf("haproxy not found (not in PATH, not at %s): %s", fallbackBinary, installHint)
		}
	} else {
		p, err := exec.LookPath(name)
		if err != nil && !errors.Is(err, exec.ErrDot) {
			return "", fmt.Errorf("haproxy not found (%v): %s", err, installHint)
		}
		path = p
	}
	return filepath.Abs(path)
}

// binaryInRoot is the haproxy executable name names inside root (default
// /usr/sbin/haproxy), as an absolute path on this machine.
func binaryInRoot(root, name string) (string, error) {
	if !filepath.IsAbs(root) {
		return "", fmt.Errorf("haproxy root %q is not an absolute path", root)
	}
	if name == "" {
		name = fallbackBinary
	}
	path := filepath.Join(root, filepath.Clean("/"+name))
	if info, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("haproxy not found in the root %s: %w", root, err)
	} else if !info.Mode().IsRegular() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("haproxy in the root %s: %s is not an executable file", root, path)
	}
	return path, nil
}

// Run writes out into a private directory and runs haproxy -c there,
// confined to it.
func (r *ProcessRunner) Run(ctx context.Context, out render.Output) (RunResult, error) {
	dir, err := os.MkdirTemp(r.opts.TempDir, "gatehouse-haproxy-*")
	if err != nil {
		return RunResult{}, fmt.Errorf("haproxy check: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := writeTree(dir, out); err != nil {
		return RunResult{}, fmt.Errorf("haproxy check: %w", err)
	}
	// Under a sandbox runner, haproxy runs as the runner's user: its
	// group may read this directory, once written (and nothing else of
	// the server).
	if err := sandbox.ShareDir(dir); err != nil {
		return RunResult{}, fmt.Errorf("haproxy check: %w", err)
	}

	// Only the basename, with the directory as cwd: messages say
	// [haproxy.cfg:N], never a temporary path. No -dr: an unresolvable
	// server name is an error.
	cmd, err := r.opts.Confinement.command(ctx, r.opts.Root, r.opts.Binary, []string{"-c", "-f", ConfigFile}, dir)
	if err != nil {
		return RunResult{}, fmt.Errorf("haproxy check: %w", err)
	}
	var output limitedBuffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	cmd.WaitDelay = waitDelay

	start := time.Now()
	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return RunResult{}, fmt.Errorf("haproxy check: %w", ctx.Err())
		}
		return RunResult{}, fmt.Errorf("starting %s: %w", r.opts.Binary, err)
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		return RunResult{}, fmt.Errorf("haproxy -c stopped after %v: %w", time.Since(start).Round(time.Millisecond), ctx.Err())
	}

	text := strings.ReplaceAll(output.String(), dir+string(filepath.Separator), "")
	text = strings.ReplaceAll(text, dir, ".")
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr) && exitErr.ExitCode() == sandbox.ExitSetup:
		// The confinement could not be set up (nothing of haproxy ran), or
		// something inside pretends so: never a verdict.
		return RunResult{}, fmt.Errorf("haproxy -c could not run confined: %s", bound(strings.TrimSpace(text), 512))
	case err == nil:
		return RunResult{Valid: true}, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() > 0 && strings.TrimSpace(text) != "":
		return RunResult{Message: Simplify(text, out.HAProxyConfig), Alerts: ParseAlerts(text)}, nil
	default:
		return RunResult{}, fmt.Errorf("haproxy -c ended without a verdict: %w (output: %q)", err, bound(strings.TrimSpace(text), 512))
	}
}

// writeTree writes haproxy.cfg and the auxiliary files into dir: regular
// files only, so nothing in it points elsewhere.
func writeTree(dir string, out render.Output) error {
	for _, aux := range auxDirs(out) {
		sub := filepath.Join(dir, aux.dir)
		if err := os.Mkdir(sub, 0o700); err != nil {
			return err
		}
		for name, content := range aux.files {
			if err := os.WriteFile(filepath.Join(sub, name), []byte(content), 0o600); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(filepath.Join(dir, ConfigFile), []byte(out.HAProxyConfig), 0o600)
}

// outputTruncated ends an output cut at maxOutput.
const outputTruncated = "\n(output truncated)"

// limitedBuffer keeps the first maxOutput bytes written to it. exec writes
// from one goroutine at a time when Stdout and Stderr are the same writer.
type limitedBuffer struct {
	b         []byte
	truncated bool
}

func (lb *limitedBuffer) Write(p []byte) (int, error) {
	room := maxOutput - len(lb.b)
	if len(p) > room {
		lb.b = append(lb.b, p[:max(room, 0)]...)
		lb.truncated = true
	} else {
		lb.b = append(lb.b, p...)
	}
	return len(p), nil
}

func (lb *limitedBuffer) String() string {
	if lb.truncated {
		return string(lb.b) + outputTruncated
	}
	return string(lb.b)
}
