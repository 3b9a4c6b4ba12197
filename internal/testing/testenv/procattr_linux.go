package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr's Pdeathsig fires when the thread that started the child
// exits; Go keeps its threads for the life of the process unless a
// goroutine locked to one ends, which the harness never does.
func sysProcAttr() *syscall.SysProcAttr {
	closeInheritedFiles()
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// closeInheritedFiles marks every descriptor above stderr that this process
// inherited close-on-exec, once, so that no child of the harness holds one.
// Go opens its own files close-on-exec; what is left came from the parent:
// `flock LOCK go test ...` hands its lock's descriptor to go, go to the test
// binary and, before this, the test binary to etcd and kube-apiserver. An
// orphan that held it (seen after a killed test run) kept the lock taken
// and every other job waiting.
var closeInheritedFiles = sync.OnceFunc(func() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
})

// trampolineDir is the directory of the links StartControlPlane gives
// envtest as etcd and kube-apiserver: envtest starts its processes itself,
// with Setpgid and no Pdeathsig, so a test binary killed (a go test
// -timeout, a SIGKILL) left them running with ppid 1. Each link points at
// this binary; init below recognises argv[0], sets the parent-death signal
// and executes the real binary named by the sibling link "<name>.target".
const trampolineDir = "testenv-exec"

func init() {
	if len(os.Args) == 0 || filepath.Base(filepath.Dir(os.Args[0])) != trampolineDir {
		return
	}
	fmt.Fprintf(os.Stderr, "testenv: %v\n", trampoline(os.Args[0]))
	os.Exit(127)
}

// trampoline executes the binary argv0's ".target" link names with the
// parent-death signal set; it returns only on failure.
func trampoline(argv0 string) error {
	target, err := os.Readlink(argv0 + ".target")
	if err != nil {
		return err
	}
	// The parent-death signal belongs to the calling thread and survives
	// execve in the thread that executes: both must be this one.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_PDEATHSIG: %w", err)
	}
	// The parent may have died before the signal was set: then nothing
	// would ever send it.
	if os.Getppid() == 1 {
		return errors.New("the parent exited before the parent-death signal was set")
	}
	closeInheritedFiles()
	return syscall.Exec(target, append([]string{target}, os.Args[1:]...), os.Environ())
}

// trampolineFor returns a path that starts binary through the trampoline,
// making the links in dir/testenv-exec.
func trampolineFor(dir, binary string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	links := filepath.Join(dir, trampolineDir)
	if err := os.MkdirAll(links, 0o700); err != nil {
		return "", err
	}
	link := filepath.Join(links, filepath.Base(binary))
	for path, to := range map[string]string{link: self, link + ".target": binary} {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if err := os.Symlink(to, path); err != nil {
			return "", err
		}
	}
	return link, nil
}
