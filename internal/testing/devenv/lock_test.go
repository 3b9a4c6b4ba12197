package devenv

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSecondEnvironmentInADirectoryIsRefused: while one environment holds a
// directory, a second is refused with the holder's PID named, and the
// first's lock file keeps its PID; once the first releases, the next takes
// the directory over.
func TestSecondEnvironmentInADirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())
	_, err = lockDir(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "PID "+pid) || !strings.Contains(err.Error(), "kill "+pid) {
		t.Errorf("refusal %q does not name the holder's PID %s", err, pid)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, LockFile)); strings.TrimSpace(string(got)) != pid {
		t.Errorf("lock file holds %q after a refused second lock, want the holder's PID %s", got, pid)
	}
	first.release()
	second, err := lockDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	second.release()
}

// TestStaleLockIsTakenOver: a lock file left by an environment that died
// (its PID written, no process holding the lock) does not stop the next.
func TestStaleLockIsTakenOver(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, LockFile), []byte("999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := lockDir(dir)
	if err != nil {
		t.Fatalf("a stale lock was not taken over: %v", err)
	}
	defer l.release()
	if got, _ := os.ReadFile(filepath.Join(dir, LockFile)); strings.TrimSpace(string(got)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q, want this PID", got)
	}
}
