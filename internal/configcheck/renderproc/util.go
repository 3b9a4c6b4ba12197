package renderproc

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gatehouse-dev/gatehouse/internal/textcut"
)

// poolStats count what a pool did, for its tests.
type poolStats struct {
	// started counts workers started; snapshots the store snapshots sent;
	// requestBytes the bytes of requests.
	started, snapshots, requestBytes atomic.Int64
	// waiting counts renderings waiting for a worker.
	waiting atomic.Int32
	// onStart, when set before the first rendering, is called with each
	// new worker's pid.
	onStart func(pid int)
}

// prefixBuffer keeps the first limit bytes written to it: a worker's
// stderr, where the runtime's fatal error comes first.
type prefixBuffer struct {
	mu    sync.Mutex
	limit int
	b     []byte
}

func (pb *prefixBuffer) Write(p []byte) (int, error) {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if room := pb.limit - len(pb.b); room > 0 {
		pb.b = append(pb.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (pb *prefixBuffer) String() string {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	return string(pb.b)
}

// ranOutOfMemory reads a dead worker's stderr: whether the Go runtime
// failed to get memory, which its RLIMIT_DATA makes it do. Only the runtime's
// own lines are read (a panic's text could be a template's, but the worker
// recovers panics).
func ranOutOfMemory(stderr string) bool {
	for _, line := range strings.Split(stderr, "\n") {
		// A race-built worker (tests only) meets its limit inside
		// ThreadSanitizer's allocator instead of the Go runtime's.
		if strings.Contains(line, "ThreadSanitizer failed to allocate") || strings.Contains(line, "ThreadSanitizer: out of memory") {
			return true
		}
		// Under RLIMIT_DATA a new thread's stack may be what cannot be
		// mapped: cgo's pthread_create then fails with EAGAIN (the
		// worker sets no process-count limit that could cause it).
		if strings.HasPrefix(line, "runtime/cgo: pthread_create failed: Resource temporarily unavailable") {
			return true
		}
		if !strings.HasPrefix(line, "fatal error:") && !strings.HasPrefix(line, "runtime:") {
			continue
		}
		for _, sign := range outOfMemorySigns {
			if strings.Contains(line, sign) {
				return true
			}
		}
	}
	return false
}

var outOfMemorySigns = []string{
	"out of memory",          // the heap cannot grow
	"cannot allocate memory", // ENOMEM elsewhere (mmap, a thread)
	"errno=12",               // a new thread's, as the runtime prints it
	// A race-enabled binary (tests) cannot place its heap in the range the
	// race detector shadows once a limit refuses the reservation.
	"too many address space collisions for -race mode",
}

// fatalLine is the runtime's "fatal error:" line, else the first line.
func fatalLine(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for _, line := range lines {
		if strings.HasPrefix(line, "fatal error:") {
			return bound(line, 200)
		}
	}
	return bound(lines[0], 200)
}

// bound cuts s to at most n bytes, on a character boundary, marking the cut.
func bound(s string, n int) string { return textcut.Bound(s, n, "...") }

// formatBytes writes a size as configured: 512 MiB.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
