package renderproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	// Every engine a config may name, registered in the process that
	// compiles and renders it.
	_ "github.com/gatehouse-dev/gatehouse/internal/configcheck/render/scriggo"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// maxStack bounds a worker goroutine's stack well inside the memory
// budget, so that unbounded recursion (fmt printing a cyclic dict) ends as
// "fatal error: stack overflow" rather than as running out of memory.
const maxStack = 64 << 20

// Exit codes of a worker that stopped on its own.
const (
	exitSetup    = 3 // it could not set up its output
	exitProtocol = 4 // it received something it cannot act on
)

func init() {
	if sandbox.Entry(workerEntry) {
		// Not on init's goroutine: the runtime locks it to the main
		// thread until init ends, and a locked goroutine hands its
		// thread back and forth at every switch (the GC's workers, a
		// blocked read): a compile ran four times slower, its time in
		// futex calls. Init waits here until the worker exits.
		go func() { os.Exit(Main()) }()
		select {}
	}
}

// Main is a worker process's main: it renders the requests read from stdin
// onto stdout until stdin ends, and returns the exit code. This package's
// init runs it in the sandbox's "render-worker" entry.
func Main() int {
	out, err := takeStdout()
	if err != nil {
		fmt.Fprintf(os.Stderr, "renderproc worker: %v\n", err)
		return exitSetup
	}
	return serve(os.Stdin, out)
}

// serve renders requests from in onto out until in ends.
func serve(in io.Reader, out io.Writer) int {
	// One rendering at a time on one thread: render's outputs then render
	// one after the other, and the CPU used is one core at most.
	runtime.GOMAXPROCS(1)
	debug.SetMaxStack(maxStack)

	w := &workerState{stores: make(map[uint64]heldSnapshot), renderers: make(map[string]render.Renderer)}
	reader := bufio.NewReaderSize(in, 64<<10)
	writer := bufio.NewWriterSize(out, 64<<10)
	for {
		frame, err := readFrame(reader, maxRequestFrame)
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "renderproc worker: reading a request: %v\n", err)
			return exitProtocol
		}
		ans, err := w.handle(frame)
		if err != nil {
			fmt.Fprintf(os.Stderr, "renderproc worker: %v\n", err)
			return exitProtocol
		}
		payload, err := marshal(ans)
		if err == nil {
			err = writeFrame(writer, payload)
		}
		if err == nil {
			err = writer.Flush()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "renderproc worker: writing an answer: %v\n", err)
			return exitProtocol
		}
	}
}

// workerState is what a worker keeps between requests.
type workerState struct {
	memoryLimit int64
	stores      map[uint64]heldSnapshot
	renderers   map[string]render.Renderer
}

type heldSnapshot struct {
	version uint64
	store   *render.MemoryStore
}

// handle renders one request. Its error is a protocol error, which ends
// the worker; a rendering's own error is in the answer.
func (w *workerState) handle(frame []byte) (answer, error) {
	var req request
	if err := unmarshal(frame, &req); err != nil {
		return answer{}, fmt.Errorf("decoding a request: %w", err)
	}
	if req.MemoryLimit != w.memoryLimit {
		debug.SetMemoryLimit(softMemoryLimit(req.MemoryLimit))
		w.memoryLimit = req.MemoryLimit
	}
	for _, hash := range req.DropTemplates {
		delete(w.renderers, hash)
	}
	for _, id := range req.DropStores {
		delete(w.stores, id)
	}
	for _, raw := range req.Snapshots {
		var snapshot wireSnapshot
		if err := unmarshal(raw, &snapshot); err != nil {
			return answer{}, fmt.Errorf("decoding a store snapshot: %w", err)
		}
		store, err := newStore(snapshot)
		if err != nil {
			return answer{}, fmt.Errorf("store snapshot %d: %w", snapshot.ID, err)
		}
		w.stores[snapshot.ID] = heldSnapshot{version: snapshot.Version, store: store}
	}
	req.Snapshots = nil
	var compileErr error
	var learned []byte
	if req.Templates != nil {
		// Kept even when it does not compile: the parent counts it as
		// held either way, and a rendering of it answers the error.
		var renderer render.Renderer
		renderer, learned, compileErr = compile(req.Templates)
		if compileErr != nil {
			renderer = failingRenderer{err: compileErr}
		}
		w.renderers[req.TemplatesHash] = renderer
	}
	renderer, ok := w.renderers[req.TemplatesHash]
	if !ok {
		return answer{}, fmt.Errorf("no template set %s", req.TemplatesHash)
	}
	if req.CompileOnly {
		if req.Templates == nil {
			return answer{}, errors.New("a compile without templates")
		}
		ans := answer{Compiled: compileErr == nil, Learned: learned, CPU: cpuTime()}
		if compileErr != nil {
			ans.Error = toWireError(compileErr, req.MaxOutput)
		}
		return ans, nil
	}

	data := render.Data{Resources: make(map[string]render.Store, len(req.Resources)), ExtraContext: req.ExtraContext,
		CurrentConfig: req.CurrentConfig, HTTPResources: req.HTTPResources}
	for name, ws := range req.Resources {
		store, err := w.resolve(ws)
		if err != nil {
			return answer{}, fmt.Errorf("store %q: %w", name, err)
		}
		data.Resources[name] = store
	}
	if len(req.OnDemand) > 0 {
		data.OnDemand = make(map[string]bool, len(req.OnDemand))
		for _, name := range req.OnDemand {
			data.OnDemand[name] = true
		}
		// The engine's Render records into it (render.RecordMisses).
		data.Missed = &render.Missed{}
	}

	out, err := renderRecovering(renderer, data)
	ans := answer{}
	if data.Missed != nil {
		ans.Missed = data.Missed.Keys()
	}
	if err != nil {
		ans.Error = toWireError(err, req.MaxOutput)
	} else if wire := toWireOutput(out); wire.size() > req.MaxOutput {
		ans.Error = &wireError{Kind: errorKindOther,
			Text: fmt.Appendf(nil, "the rendering's output of %d bytes exceeds its budget of %s", wire.size(), formatBytes(req.MaxOutput))}
	} else {
		ans.Output = wire
	}
	ans.CPU = cpuTime()
	return ans, nil
}

// softMemoryLimit is the GC's soft limit (GOMEMLIMIT) for a memory budget:
// below the hard limit, so that the GC collects hard before an allocation
// fails. The heap reserves address space 64 MiB (an arena) at a time, so
// the soft limit leaves one arena of room: with the example config over
// 1,000 Ingresses a budget of 80 MiB failed when the soft limit was three
// quarters of it, and renders at 64 MiB and up with this one.
func softMemoryLimit(budget int64) int64 {
	return max(budget-64<<20, budget/2)
}

// failingRenderer is a template set that did not compile.
type failingRenderer struct{ err error }

func (f failingRenderer) Render(context.Context, render.Data) (render.Output, error) {
	return render.Output{}, f.err
}

// compile compiles a template set, from what an earlier compile of it
// learned; a panic in the engine is the compile's error.
func compile(t *wireTemplates) (renderer render.Renderer, learned []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			renderer, learned, err = nil, nil, &render.CompileError{Template: "templates", Err: fmt.Errorf("the compile panicked: %v", r)}
		}
	}()
	return render.CompileLearned(t.Engine, t.templates(), t.Learned)
}

// renderRecovering renders, turning a panic (which text/template would
// already have caught in a template function) into an error rather than a
// crash with the panic's text, which the template chose, on stderr.
func renderRecovering(renderer render.Renderer, data render.Data) (out render.Output, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the rendering panicked: %v", r)
		}
	}()
	// No deadline here: the parent kills the worker when the rendering's
	// context ends, which also stops a loop that never writes.
	return renderer.Render(context.Background(), data)
}

// resolve rebuilds a store of the request.
func (w *workerState) resolve(ws *wireStore) (render.Store, error) {
	switch {
	case ws == nil:
		return nil, nil
	case ws.Ref != nil:
		held, ok := w.stores[ws.Ref.ID]
		if !ok || held.version != ws.Ref.Version {
			return nil, fmt.Errorf("no snapshot of store %d at version %d", ws.Ref.ID, ws.Ref.Version)
		}
		return held.store, nil
	case ws.Whole != nil:
		return newStore(*ws.Whole)
	case ws.Overlay != nil:
		base, err := w.resolve(ws.Overlay.Base)
		if err != nil {
			return nil, err
		}
		indexed, ok := base.(render.IndexedStore)
		if !ok {
			return nil, fmt.Errorf("an overlay over a %T", base)
		}
		change := render.OverlayChange{Namespace: ws.Overlay.Namespace, Name: ws.Overlay.Name, Object: ws.Overlay.Object}
		return change.Apply(indexed)
	default:
		return nil, errors.New("an empty store description")
	}
}

// newStore rebuilds a store from its snapshot. NewMemoryStore normalizes
// the objects (json.Number to int64 or float64, as in the parent).
func newStore(s wireSnapshot) (*render.MemoryStore, error) {
	indexer, err := render.NewIndexer(s.IndexBy)
	if err != nil {
		return nil, err
	}
	return render.NewMemoryStore(indexer, s.Objects...)
}

// cpuTime is the worker's CPU time so far, in nanoseconds.
func cpuTime() int64 {
	var usage unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return (time.Duration(usage.Utime.Nano()) + time.Duration(usage.Stime.Nano())).Nanoseconds()
}
