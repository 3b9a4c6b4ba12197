package sandbox

import "sync"

// entryBinary resolves the program that runs entries ([Spec].Entry); nil
// means this binary (/proc/self/exe).
var (
	entryBinaryMu sync.Mutex
	entryBinary   func() (string, error)
)

// ServeEntriesFrom makes Command run entries from the program that resolve
// returns (an absolute path, resolved on the first entry started and on
// every one after: resolve caches what it should), instead of this binary.
//
// It exists for binaries that cannot serve an entry themselves because
// something in them does, before the entry's package init runs, what the
// confinement refuses. Go initializes a binary's packages in an order the
// import graph decides, not the entry: a test binary that links
// controller-runtime's envtest creates a cache directory in envtest's
// init, which an empty environment sends to /tmp and Landlock refuses
// (the init panics). Such a binary serves its entries from the gatehouse
// binary built from the same source, which speaks the same protocol;
// internal/testing/testenv does this. Production never calls it.
func ServeEntriesFrom(resolve func() (string, error)) {
	entryBinaryMu.Lock()
	defer entryBinaryMu.Unlock()
	entryBinary = resolve
}

// entryProgram is the program that runs entries: "" for this binary.
func entryProgram() (string, error) {
	entryBinaryMu.Lock()
	resolve := entryBinary
	entryBinaryMu.Unlock()
	if resolve == nil {
		return "", nil
	}
	return resolve()
}
