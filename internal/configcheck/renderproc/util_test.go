package renderproc

import "testing"

// TestRanOutOfMemory: every way a worker dies at its memory limit is the
// budget (seen: the heap, a thread's stack under RLIMIT_DATA, the race
// detector's allocator); other deaths are not.
func TestRanOutOfMemory(t *testing.T) {
	for stderr, want := range map[string]bool{
		"fatal error: runtime: out of memory\n\ngoroutine 1":                                     true,
		"runtime: mmap(0xc000400000, 67108864) returned 0, cannot allocate memory":               true,
		"runtime/cgo: pthread_create failed: Resource temporarily unavailable\nSIGABRT: abort":   true,
		"==1==ERROR: ThreadSanitizer failed to allocate 0x8000000 (134217728) bytes (errno: 12)": true,
		"fatal error: stack overflow":                   false,
		"panic: out of memory in a template's own text": false,
		"SIGSEGV: segmentation violation":               false,
	} {
		if got := ranOutOfMemory(stderr); got != want {
			t.Errorf("ranOutOfMemory(%q) = %v, want %v", stderr, got, want)
		}
	}
}
