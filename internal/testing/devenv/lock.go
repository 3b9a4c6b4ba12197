package devenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockFile is the name, in an environment's directory, of the lock that one
// running environment holds: a second one started in the same directory
// would rewrite the certificates and kubeconfig under the first (its
// Gatehouse would then serve a certificate its webhook configurations do
// not trust, and every webhook call would fail).
const LockFile = "run.lock"

// ErrLocked is returned by Start when another running environment holds the
// directory's lock; the error's text names its PID.
var ErrLocked = errors.New("another environment is running in this directory")

// dirLock is a held lock: an open file with an exclusive flock on it.
type dirLock struct{ file *os.File }

// lockDir takes dir's lock and writes this process's PID into it. The lock
// is an flock, which the kernel drops when its holder dies however it dies,
// so a lock left by a killed environment is simply taken over; the PID in
// the file is only there to tell a second environment whom it met.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid := pidText(holder)
			return nil, fmt.Errorf("%w: %s is in use by PID %s (another make run in this checkout); stop that one first (Ctrl-C in its terminal, or kill %s)",
				ErrLocked, dir, pid, pid)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &dirLock{file: f}, nil
}

// pidText is the holder's PID as written in the lock, or "unknown".
func pidText(content []byte) string {
	pid := strings.TrimSpace(string(content))
	if _, err := strconv.Atoi(pid); err != nil {
		return "unknown"
	}
	return pid
}

// release drops the lock (closing the file does) and leaves the file, so
// that a waiting start never races a removal.
func (l *dirLock) release() {
	if l != nil {
		_ = l.file.Close()
	}
}
