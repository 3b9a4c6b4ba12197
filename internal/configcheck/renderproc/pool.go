package renderproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// Options configure a Pool. Zero fields take their defaults.
type Options struct {
	// Workers is the number of worker processes, hence of renderings run
	// at once; more wait. Default 2.
	Workers int

	// MemoryLimit is a rendering's memory budget, in bytes: the private
	// writable memory a worker may map beyond what the runtime needs to
	// start (RLIMIT_DATA = workerStartData + MemoryLimit). RLIMIT_AS does
	// not suit Go: the runtime reserves 1.2 to 1.55 GiB of address space
	// before main, almost none of it backed, and fails erratically under
	// it. The worker's GC aims 64 MiB below it (GOMEMLIMIT; the
	// heap grows by 64 MiB reservations). The example config over 1,000
	// Ingresses renders with 80 MiB (64 MiB fails now and then); the store
	// snapshots a worker keeps between renderings are bounded to a
	// twentieth of it, encoded (several times that decoded), beyond the
	// stores of the rendering at hand. Default 512 MiB; at least 64 MiB.
	MemoryLimit int64

	// Nice is the workers' nice value (1 to 19), so that renderings queue
	// behind the server's own work, never the reverse. Default 10.
	Nice int

	// RenderTimeout bounds a rendering whose context allows longer or has
	// no deadline. Default 30 s, the longest webhook timeout.
	RenderTimeout time.Duration

	// CPUTime is a worker's CPU budget for its whole life (RLIMIT_CPU), a
	// backstop that stops a worker nothing else stops (say, should the
	// server die without killing it). The pool retires a worker that has
	// used all but two RenderTimeouts of it, so the limit never ends a
	// rendering the pool would have let run. Default 10 minutes; at least
	// three RenderTimeouts.
	CPUTime time.Duration

	// MaxOutputBytes bounds a rendering's output (the rendered files and
	// their names) and error texts; the parent reads no larger answer.
	// Default 16 MiB; at least 4 KiB.
	MaxOutputBytes int64

	// MaxWaiting bounds the renderings of one party (fair.WithShare: a
	// config) waiting for a worker; one more fails at once with an error
	// wrapping fair.ErrFull. Default 8.
	MaxWaiting int

	// Command makes a worker's command, not started, with Stdin, Stdout
	// and Stderr unset; ctx ending must kill the worker and everything it
	// started. The worker must run Main. Default: this binary in the
	// sandbox's "render-worker" entry, confined, with MemoryLimit, CPUTime
	// and Nice set by the sandbox (confined).
	Command func(ctx context.Context) (*exec.Cmd, error)
}

const (
	defaultWorkers        = 2
	defaultMemoryLimit    = 512 << 20
	defaultNice           = 10
	defaultRenderTimeout  = 30 * time.Second
	defaultCPUTime        = 10 * time.Minute
	defaultMaxOutputBytes = 16 << 20
	defaultMaxWaiting     = 8

	// maxHeldTemplates is how many template sets a worker keeps compiled
	// (there is one per HAProxyTemplateConfig, and a changed config
	// leaves an old set behind).
	maxHeldTemplates = 8
	// stderrKept is how much of a worker's stderr is kept: the runtime's
	// fatal error comes first.
	stderrKept = 8 << 10
	// waitDelay is how long a worker's output may stay open after it was
	// killed (nothing should hold it).
	waitDelay = time.Second
	// exitGrace is how long a worker that closed its output may take to
	// exit before it is killed.
	exitGrace = time.Second
)

func (o Options) withDefaults() (Options, error) {
	if o.Workers == 0 {
		o.Workers = defaultWorkers
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = defaultMemoryLimit
	}
	if o.Nice == 0 {
		o.Nice = defaultNice
	}
	if o.RenderTimeout == 0 {
		o.RenderTimeout = defaultRenderTimeout
	}
	if o.CPUTime == 0 {
		o.CPUTime = max(defaultCPUTime, 3*o.RenderTimeout)
	}
	if o.MaxOutputBytes == 0 {
		o.MaxOutputBytes = defaultMaxOutputBytes
	}
	if o.MaxWaiting == 0 {
		o.MaxWaiting = defaultMaxWaiting
	}
	switch {
	case o.Workers < 1:
		return o, fmt.Errorf("Workers %d: at least 1", o.Workers)
	case o.MemoryLimit < 64<<20:
		return o, fmt.Errorf("MemoryLimit %d: at least 64 MiB", o.MemoryLimit)
	case o.Nice < 1 || o.Nice > 19:
		return o, fmt.Errorf("Nice %d: 1 to 19", o.Nice)
	case o.RenderTimeout < 0:
		return o, fmt.Errorf("RenderTimeout %v: positive", o.RenderTimeout)
	case o.CPUTime < 3*o.RenderTimeout:
		return o, fmt.Errorf("CPUTime %v: at least three RenderTimeouts (%v)", o.CPUTime, 3*o.RenderTimeout)
	case o.MaxOutputBytes < 4<<10:
		return o, fmt.Errorf("MaxOutputBytes %d: at least 4 KiB", o.MaxOutputBytes)
	case o.MaxWaiting < 1:
		return o, fmt.Errorf("MaxWaiting %d: at least 1", o.MaxWaiting)
	}
	return o, nil
}

// workerEntry names the worker mode of this binary (sandbox.Entry).
const workerEntry = "render-worker"

// workerStartData is what the gatehouse binary needs of RLIMIT_DATA to
// start (measured about 160 MiB, mostly thread stacks), with room.
const workerStartData = 192 << 20

// confined is the default Command: this binary in its worker mode, started
// by the sandbox (internal/sandbox): an empty environment but for the
// runtime's settings, no file, network or process of its own, a lower CPU
// priority, its private writable memory limited to what the runtime needs
// plus the budget (RLIMIT_DATA: RLIMIT_AS is erratic for Go, which
// reserves address space it never uses), RLIMIT_CPU as a backstop, and the
// whole session killed when ctx ends.
// dir is the workers' working directory: empty, the pool's own.
func confined(o Options, dir string) func(ctx context.Context) (*exec.Cmd, error) {
	return func(ctx context.Context) (*exec.Cmd, error) {
		return sandbox.Command(ctx, sandbox.Spec{
			Entry: workerEntry,
			Dir:   dir,
			// GOMAXPROCS before the runtime starts: fewer threads to set
			// up (the worker cannot read /sys to count CPUs anyway).
			Env: []string{"GOMAXPROCS=1"},
			Limits: sandbox.Limits{
				Data:    uint64(workerStartData + o.MemoryLimit),
				CPUTime: o.CPUTime,
				Nice:    o.Nice,
			},
		})
	}
}

// ErrClosed is the error of a rendering on a closed pool.
var ErrClosed = errors.New("the rendering pool is closed")

// Pool runs renderings in worker processes. It is safe for concurrent use.
type Pool struct {
	opts Options
	// emptyDir is the confined workers' working directory, removed at
	// Close.
	emptyDir string
	// ctx ends at Close, killing every worker.
	ctx    context.Context
	cancel context.CancelFunc
	// slots holds the idle workers, Workers of them when none is busy; a
	// nil one is started on use.
	slots     chan *worker
	closeOnce sync.Once
	// turns decides who takes a worker next (fair): the most urgent class
	// first, the parties of a class in turn, and the classes below
	// fair.Real on all workers but one. A rendering holds its turn until
	// its worker is back in slots, so a granted turn always finds one.
	turns *fair.Queue

	// storeCacheBytes is how much of encoded store snapshots a worker may
	// hold; retireCPU is the CPU time after which it is retired.
	storeCacheBytes int64
	retireCPU       time.Duration

	// compiled keeps Compile's outcomes.
	compiled compiledCache

	stats poolStats
}

// New returns a pool; it starts workers on first use.
func New(opts Options) (*Pool, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("renderproc: %w", err)
	}
	var emptyDir string
	if opts.Command == nil {
		// Under a sandbox runner the workers run as its user: the
		// directory is in its work directory, readable by its group.
		if emptyDir, err = os.MkdirTemp(sandbox.WorkDir(), "gatehouse-render-*"); err != nil {
			return nil, fmt.Errorf("renderproc: %w", err)
		}
		if err := sandbox.ShareDir(emptyDir); err != nil {
			_ = os.Remove(emptyDir)
			return nil, fmt.Errorf("renderproc: %w", err)
		}
		opts.Command = confined(opts, emptyDir)
	}
	turns, err := fair.New(fair.Options{Slots: opts.Workers, Reserved: min(1, opts.Workers-1), MaxWaiting: opts.MaxWaiting})
	if err != nil {
		return nil, fmt.Errorf("renderproc: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		turns:           turns,
		emptyDir:        emptyDir,
		opts:            opts,
		ctx:             ctx,
		cancel:          cancel,
		slots:           make(chan *worker, opts.Workers),
		storeCacheBytes: opts.MemoryLimit / 20,
		retireCPU:       opts.CPUTime - 2*opts.RenderTimeout,
	}
	for range opts.Workers {
		p.slots <- nil
	}
	return p, nil
}

// Close kills every worker, waiting for renderings in progress to give
// theirs back (they fail with ErrClosed).
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		p.cancel()
		for range p.opts.Workers {
			if w := <-p.slots; w != nil {
				w.kill()
				w.reap()
			}
		}
		if p.emptyDir != "" {
			_ = os.Remove(p.emptyDir)
		}
	})
	return nil
}

// Compile compiles templates in a worker, for their errors (a
// *render.CompileError), and returns a renderer rendering them in the
// pool's workers. engine is templatingSettings.engine. A template is a
// program its config's author wrote, and compiling one can cost as much
// as rendering it (Scriggo's repairs: one build each), so it runs as a
// rendering does: in ctx's turn, within the time and memory budgets. What
// the compile learned goes with the templates to every other worker
// (render.CompileLearned), and the outcome is kept for the next Compile
// of the same set. An error that is not the templates' (the pool full,
// the budget spent, ctx ended) is a *NotCompiledError.
func (p *Pool) Compile(ctx context.Context, templates render.Templates, engine string) (render.Renderer, error) {
	if _, err := render.NewEngine(engine); err != nil {
		return nil, err
	}
	hash := templatesHash(engine, templates)
	if r, err, ok := p.compiled.get(hash); ok {
		return r, err
	}
	outputs := int64(1 + len(templates.Maps) + len(templates.Files) + len(templates.SSLCertificates))
	r := &renderer{
		pool:      p,
		hash:      hash,
		templates: toWireTemplates(engine, templates),
		// Texts are base64 in JSON (4 bytes per 3), each file adds its
		// field names and quotes, and the answer a few fields.
		answerLimit: uint64(4*((p.opts.MaxOutputBytes+2)/3) + 64*outputs + 64<<10),
	}
	ans, err := p.exchange(ctx, r, render.Data{}, true)
	if err != nil {
		return nil, &NotCompiledError{Err: err}
	}
	if ans.Error != nil {
		err := ans.Error.error()
		p.compiled.put(hash, nil, err, 0)
		return nil, err
	}
	r.templates.Learned = ans.Learned
	p.compiled.put(hash, r, nil, r.templates.size())
	return r, nil
}

// NotCompiledError is a Compile that did not run to its end for a reason
// other than the templates: it says nothing of them, and a later Compile
// may succeed.
type NotCompiledError struct{ Err error }

func (e *NotCompiledError) Error() string {
	return "the templates could not be compiled now: " + e.Err.Error()
}
func (e *NotCompiledError) Unwrap() error { return e.Err }

// renderer renders one template set in the pool.
type renderer struct {
	pool        *Pool
	hash        string
	templates   *wireTemplates
	answerLimit uint64
}

func (r *renderer) Render(ctx context.Context, data render.Data) (render.Output, error) {
	return r.pool.render(ctx, r, data)
}

// TimeBudgetError is the cause of a rendering's context ending at
// Options.RenderTimeout.
type TimeBudgetError struct {
	Limit time.Duration
}

func (e *TimeBudgetError) Error() string {
	return fmt.Sprintf("the rendering exceeded its time budget of %v", e.Limit)
}

// BudgetError is a rendering that exceeded its memory budget.
type BudgetError struct {
	// Limit is Options.MemoryLimit.
	Limit int64
}

func (e *BudgetError) Error() string {
	return "the rendering exceeded its memory budget of " + formatBytes(e.Limit)
}

// ProcessDiedError is a worker that died during a rendering, other than of
// its memory budget (a stack overflow, a crash).
type ProcessDiedError struct {
	// State is how it ended ("exit status 2", "signal: killed").
	State string
	// Fatal is the runtime's "fatal error:" line, or the first line it
	// wrote on stderr.
	Fatal string
}

func (e *ProcessDiedError) Error() string {
	if e.Fatal == "" {
		return "the rendering process died: " + e.State
	}
	return fmt.Sprintf("the rendering process died: %s (%s)", e.State, e.Fatal)
}

func (p *Pool) render(ctx context.Context, r *renderer, data render.Data) (render.Output, error) {
	ans, err := p.exchange(ctx, r, data, false)
	if err != nil {
		return render.Output{}, err
	}
	collectMissed(data, ans.Missed)
	if ans.Error != nil {
		return render.Output{}, ans.Error.error()
	}
	return ans.Output.output(), nil
}

// exchange runs one request on a worker: a rendering of data with r, or
// r's compile alone. The answer's own error (the templates') is in it;
// err is the pool's or the worker's failure.
func (p *Pool) exchange(ctx context.Context, r *renderer, data render.Data, compileOnly bool) (answer, error) {
	logger := log.FromContext(ctx)
	ctx, cancel := context.WithTimeoutCause(ctx, p.opts.RenderTimeout, &TimeBudgetError{Limit: p.opts.RenderTimeout})
	defer cancel()

	w, release, err := p.acquire(ctx)
	if err != nil {
		return answer{}, err
	}
	// After the slot is given back, on every path below.
	defer release()
	// From here the slot goes back exactly once: w when it stays usable,
	// nil when it was killed or died.
	if w == nil {
		if w, err = p.start(); err != nil {
			p.slots <- nil
			return answer{}, err
		}
		logger.V(1).Info("started a rendering process", "pid", w.pid)
	}
	req, commit, err := w.plan(p, r, data)
	answerLimit := r.answerLimit
	if compileOnly && err == nil {
		req.CompileOnly = true
		// Sent even to a worker holding them: the answer says what
		// compiling them learned. Learned is a list of repairs at most
		// a few dozen bytes each.
		req.Templates = r.templates
		answerLimit += 1 << 20
	}
	var payload []byte
	if err == nil {
		payload, err = marshal(req)
	}
	if err != nil {
		p.slots <- w
		return answer{}, fmt.Errorf("preparing the rendering: %w", err)
	}
	commit()
	p.stats.requestBytes.Add(int64(len(payload)))

	done := make(chan exchange, 1)
	go func() {
		done <- w.exchange(payload, answerLimit)
	}()
	var result exchange
	select {
	case result = <-done:
	case <-ctx.Done():
		w.kill()
		<-done
		w.reap()
		p.slots <- nil
		logger.V(1).Info("killed a rendering process at the end of its rendering's context", "pid", w.pid)
		return answer{}, stopped(ctx, "the rendering was stopped")
	case <-p.ctx.Done():
		w.kill()
		<-done
		w.reap()
		p.slots <- nil
		return answer{}, ErrClosed
	}

	if result.err != nil && p.ctx.Err() != nil {
		// Close killed it.
		w.kill()
		w.reap()
		p.slots <- nil
		return answer{}, ErrClosed
	}
	if result.err != nil {
		err := w.failure(result.err, p.opts.MemoryLimit, p.opts.CPUTime)
		p.slots <- nil
		logger.Info("a rendering process failed", "pid", w.pid, "error", err.Error())
		return answer{}, err
	}
	var ans answer
	err = unmarshal(result.frame, &ans)
	switch {
	case err != nil:
	case compileOnly && (ans.Output != nil || ans.Compiled == (ans.Error != nil)):
		err = errors.New("neither compiled nor a compile error")
	case !compileOnly && (ans.Output == nil) == (ans.Error == nil):
		err = errors.New("neither an output nor an error")
	}
	if err != nil {
		w.kill()
		w.reap()
		p.slots <- nil
		return answer{}, fmt.Errorf("the rendering process answered nonsense: %w", err)
	}
	if time.Duration(ans.CPU) > p.retireCPU {
		// Retired before its RLIMIT_CPU could end a rendering.
		w.kill()
		w.reap()
		p.slots <- nil
		logger.V(1).Info("retired a rendering process", "pid", w.pid, "cpu", time.Duration(ans.CPU))
	} else {
		p.slots <- w
	}
	return ans, nil
}

// acquire takes a slot in the rendering's turn (fair.ShareOf(ctx)),
// waiting as long as ctx allows; release ends the turn, after the slot is
// back. A free slot is taken even when ctx is about to end (a rendering
// then stops at its end): which of two ready cases a select picks must not
// decide.
func (p *Pool) acquire(ctx context.Context) (w *worker, release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, stopped(ctx, "waiting for a free rendering process")
	}
	p.stats.waiting.Add(1)
	defer p.stats.waiting.Add(-1)
	party, class := fair.ShareOf(ctx)
	release, err = p.turns.Acquire(ctx, party, class)
	switch {
	case errors.Is(err, fair.ErrFull):
		return nil, nil, fmt.Errorf("waiting for a free rendering process: %w", err)
	case err != nil:
		return nil, nil, stopped(ctx, "waiting for a free rendering process")
	}
	// The turn guarantees a slot: every holder of one holds a turn.
	select {
	case w = <-p.slots:
	case <-p.ctx.Done():
		release()
		return nil, nil, ErrClosed
	}
	if p.ctx.Err() != nil {
		p.slots <- w
		release()
		return nil, nil, ErrClosed
	}
	return w, release, nil
}

// stopped is the error of a rendering whose context ended: it wraps
// ctx.Err(), and says so when the end was the pool's time budget.
func stopped(ctx context.Context, doing string) error {
	var budget *TimeBudgetError
	if errors.As(context.Cause(ctx), &budget) {
		return fmt.Errorf("%s: %w: %w", doing, budget, ctx.Err())
	}
	return fmt.Errorf("%s: %w", doing, ctx.Err())
}

// start starts a worker.
func (p *Pool) start() (*worker, error) {
	ctx, stop := context.WithCancel(p.ctx)
	cmd, err := p.opts.Command(ctx)
	if err != nil {
		stop()
		return nil, fmt.Errorf("preparing a rendering process: %w", err)
	}
	w := &worker{cmd: cmd, stop: stop, stderr: &prefixBuffer{limit: stderrKept}}
	if w.in, err = cmd.StdinPipe(); err == nil {
		w.out, err = cmd.StdoutPipe()
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("preparing a rendering process: %w", err)
	}
	cmd.Stderr = w.stderr
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = waitDelay
	}
	if err := cmd.Start(); err != nil {
		stop()
		return nil, fmt.Errorf("starting a rendering process: %w", err)
	}
	w.pid = cmd.Process.Pid
	p.stats.started.Add(1)
	if hook := p.stats.onStart; hook != nil {
		hook(w.pid)
	}
	return w, nil
}

// exchange is a request's outcome on the wire.
type exchange struct {
	frame []byte
	err   error
}

// protocolError is a worker that broke the protocol while alive; it is
// killed.
type protocolError struct{ err error }

func (e *protocolError) Error() string { return e.err.Error() }
func (e *protocolError) Unwrap() error { return e.err }

// worker is one worker process and what it holds.
type worker struct {
	cmd    *exec.Cmd
	stop   context.CancelFunc
	in     io.WriteCloser
	out    io.ReadCloser
	stderr *prefixBuffer
	pid    int
	// killed says the pool killed it (its end then says nothing of the
	// rendering); reap's timer may set it.
	killed atomic.Bool
	reaped bool

	// stores and templates are what it holds: snapshots by store ID, and
	// template sets by hash, with the request that last used each (uses
	// counts requests).
	stores    map[uint64]heldStore
	templates map[string]uint64
	uses      uint64
}

type heldStore struct {
	version, lastUse uint64
	// size is the encoded snapshot's, what the cache budget counts.
	size int64
}

// exchange sends a request and reads the answer.
func (w *worker) exchange(payload []byte, answerLimit uint64) exchange {
	if err := writeFrame(w.in, payload); err != nil {
		return exchange{err: fmt.Errorf("sending the request: %w", err)}
	}
	frame, err := readFrame(w.out, answerLimit)
	var tooLarge *frameTooLargeError
	if errors.As(err, &tooLarge) {
		return exchange{err: &protocolError{err: fmt.Errorf("its answer announced %w", err)}}
	}
	if err != nil {
		return exchange{err: fmt.Errorf("reading the answer: %w", err)}
	}
	return exchange{frame: frame}
}

// kill kills the worker, its CPU stopping at once, and closes its pipes,
// so that an exchange in progress ends.
func (w *worker) kill() {
	w.killed.Store(true)
	w.stop()
	if w.cmd.Process != nil {
		_ = w.cmd.Process.Kill()
	}
	_ = w.in.Close()
	_ = w.out.Close()
}

// reap waits for the worker to end, killing it if it has not after
// exitGrace.
func (w *worker) reap() {
	if w.reaped {
		return
	}
	w.reaped = true
	timer := time.AfterFunc(exitGrace, w.kill)
	_ = w.cmd.Wait()
	timer.Stop()
	w.stop()
}

// failure is the error of a rendering whose exchange failed: the worker
// broke the protocol (it is killed) or died (its end says how).
func (w *worker) failure(err error, memoryLimit int64, cpuLimit time.Duration) error {
	var protocol *protocolError
	if errors.As(err, &protocol) {
		w.kill()
		w.reap()
		return fmt.Errorf("the rendering process broke the protocol: %w", err)
	}
	killedBefore := w.killed.Load()
	w.reap()
	// Through a sandbox runner the ProcessState is its proxy's, and the
	// worker's CPU time is a line on its stderr.
	used, stderr := sandbox.CPUTime(w.cmd.ProcessState, w.stderr.String())
	if ranOutOfMemory(stderr) {
		return &BudgetError{Limit: memoryLimit}
	}
	state, fatal := "it closed its output", fatalLine(stderr)
	if ps := w.cmd.ProcessState; ps != nil {
		state = ps.String()
		// RLIMIT_CPU ends a process with SIGKILL, which says nothing more;
		// the limit is counted in whole seconds.
		if fatal == "" && used > cpuLimit-time.Second {
			fatal = fmt.Sprintf("it used %v of CPU time, its limit being %v", used.Round(time.Millisecond), cpuLimit)
		}
	}
	if w.killed.Load() && !killedBefore {
		state = "it closed its output and was killed"
	}
	return &ProcessDiedError{State: state, Fatal: fatal}
}

// Bounds of a key the worker reports missed: a worker's answer is what a
// config author's templates made of it, so what it names is checked here
// before the caller fetches anything for it.
const (
	maxMissedKeyParts = 8
	maxMissedKeyLen   = 512
)

// collectMissed adds the keys a worker reports missed to data.Missed: of
// the stores data names on demand only, within render.MaxMissed (which
// Missed keeps), each key of at most maxMissedKeyParts parts of at most
// maxMissedKeyLen bytes.
func collectMissed(data render.Data, missed map[string][][]string) {
	if data.Missed == nil {
		return
	}
	for _, watched := range slices.Sorted(maps.Keys(missed)) {
		if !data.OnDemand[watched] {
			continue
		}
		for _, keys := range missed[watched] {
			if len(keys) == 0 || len(keys) > maxMissedKeyParts || slices.ContainsFunc(keys, func(k string) bool { return len(k) > maxMissedKeyLen }) {
				continue
			}
			data.Missed.Add(watched, keys)
		}
	}
}
