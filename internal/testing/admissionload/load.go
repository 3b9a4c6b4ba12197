package admissionload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Outcome is how one admission ended.
type Outcome int

const (
	// Allowed: admitted, as it had to be.
	Allowed Outcome = iota
	// Denied: denied with the module's message, as it had to be.
	Denied
	// Failed: anything else.
	Failed
)

func (o Outcome) String() string {
	return [...]string{"allowed", "denied", "failed"}[o]
}

// Result is one admission sent.
type Result struct {
	Operation  string
	Module     string
	Start, End time.Time
	Outcome    Outcome
	// Message is the error kube-apiserver returned, or why the answer is
	// a failure.
	Message string
}

// classify decides what came of op from the error kube-apiserver returned.
func classify(op Operation, err error) (Outcome, string) {
	switch {
	case err == nil && op.Denial == "":
		return Allowed, ""
	case err == nil:
		// A webhook with failurePolicy Ignore that cannot be called admits
		// silently: only the missing denial shows it.
		return Failed, fmt.Sprintf("admitted; want a denial with %q (did a webhook fail open?)", op.Denial)
	case op.Denial != "" && strings.Contains(err.Error(), "denied the request") && strings.Contains(err.Error(), op.Denial):
		return Denied, err.Error()
	default:
		return Failed, err.Error()
	}
}

// Options configures a load.
type Options struct {
	// Rate is the admissions sent per second (default 60), whatever the
	// answers' latency: each is sent on time by a goroutine of its own, up
	// to MaxInFlight at once.
	Rate float64
	// MaxInFlight bounds the admissions awaiting their answer (default 256);
	// beyond it the load slows down, and Report.Rate shows it.
	MaxInFlight int
	// MaxInFlightPerModule bounds each module's admissions awaiting their
	// answer (default MaxInFlight). A module that queues one party's
	// admissions behind each other (configcheck takes one config's
	// admissions in turn and refuses a party's ninth waiter) sheds an
	// open-loop load on a machine slowed by other work, whatever the test
	// is about; below its queue's bound the load slows down instead.
	MaxInFlightPerModule int
	// Timeout bounds one admission (default 30s, beyond any webhook's).
	Timeout time.Duration
	// Modules are the modules whose operations are sent (Operations).
	Modules []string
}

// Run is a load being sent.
type Run struct {
	opts     Options
	ops      []Operation
	c        client.Client
	cancel   context.CancelFunc
	done     chan struct{}
	inFlight atomic.Int64
	started  time.Time

	mu      sync.Mutex
	results []Result
}

// Start sends the load through kube-apiserver as the user of cfg until
// Stop. The client has no rate limit of its own (client-go's default would
// hold it at 5 requests per second).
func Start(cfg *rest.Config, opts Options) (*Run, error) {
	if opts.Rate == 0 {
		opts.Rate = 60
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = 256
	}
	if opts.MaxInFlightPerModule == 0 {
		opts.MaxInFlightPerModule = opts.MaxInFlight
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	ops := Operations(opts.Modules...)
	if len(ops) == 0 {
		return nil, errors.New("admissionload: no operations: no module given")
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Run{opts: opts, ops: ops, c: c, cancel: cancel, done: make(chan struct{}), started: time.Now()}
	go r.send(ctx)
	return r, nil
}

func (r *Run) send(ctx context.Context) {
	defer close(r.done)
	slots := make(chan struct{}, r.opts.MaxInFlight)
	moduleSlots := map[string]chan struct{}{}
	for _, op := range r.ops {
		if moduleSlots[op.Module] == nil {
			moduleSlots[op.Module] = make(chan struct{}, r.opts.MaxInFlightPerModule)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	interval := time.Duration(float64(time.Second) / r.opts.Rate)
	for i := 0; ; i++ {
		if wait := time.Until(r.started.Add(time.Duration(i) * interval)); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		op := r.ops[i%len(r.ops)]
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		select {
		case <-ctx.Done():
			<-slots
			return
		case moduleSlots[op.Module] <- struct{}{}:
		}
		wg.Add(1)
		r.inFlight.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots; <-moduleSlots[op.Module] }()
			r.do(op)
		}()
	}
}

// do sends one admission. Its context is not the load's: an admission sent
// before Stop is answered and counted.
func (r *Run) do(op Operation) {
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
	defer cancel()
	start := time.Now()
	err := op.Do(ctx, r.c)
	end := time.Now()
	r.inFlight.Add(-1)
	outcome, msg := classify(op, err)
	r.mu.Lock()
	r.results = append(r.results, Result{Operation: op.Name, Module: op.Module, Start: start, End: end, Outcome: outcome, Message: msg})
	r.mu.Unlock()
}

// InFlight is the number of admissions awaiting their answer now.
func (r *Run) InFlight() int { return int(r.inFlight.Load()) }

// Report is what has come of the admissions answered so far.
func (r *Run) Report() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return newReport(slices.Clone(r.results), r.started, time.Now())
}

// Stop stops sending, waits for the answers of the admissions in flight and
// reports.
func (r *Run) Stop() Report {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return newReport(r.results, r.started, time.Now())
}

// Report counts the results of a load, or of a part of it.
type Report struct {
	Results                 []Result
	From, To                time.Time
	Allowed, Denied, Failed int
}

func newReport(results []Result, from, to time.Time) Report {
	slices.SortFunc(results, func(a, b Result) int { return a.Start.Compare(b.Start) })
	rep := Report{Results: results, From: from, To: to}
	for _, res := range results {
		switch res.Outcome {
		case Allowed:
			rep.Allowed++
		case Denied:
			rep.Denied++
		default:
			rep.Failed++
		}
	}
	return rep
}

// Sent is the number of admissions answered.
func (r Report) Sent() int { return len(r.Results) }

// Rate is the admissions answered per second over the report's span.
func (r Report) Rate() float64 {
	if d := r.To.Sub(r.From).Seconds(); d > 0 {
		return float64(len(r.Results)) / d
	}
	return 0
}

// Failures are the failed results.
func (r Report) Failures() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Outcome == Failed {
			out = append(out, res)
		}
	}
	return out
}

// EndedBetween is the part of the report whose admissions were answered in
// [from, to).
func (r Report) EndedBetween(from, to time.Time) Report {
	var part []Result
	for _, res := range r.Results {
		if !res.End.Before(from) && res.End.Before(to) {
			part = append(part, res)
		}
	}
	return newReport(part, from, to)
}

// String sums the report up: counts per module, and the first failures.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d admissions in %v (%.1f/s): %d allowed, %d denied as expected, %d failed",
		r.Sent(), r.To.Sub(r.From).Round(time.Millisecond), r.Rate(), r.Allowed, r.Denied, r.Failed)
	perModule := map[string][3]int{}
	for _, res := range r.Results {
		n := perModule[res.Module]
		n[res.Outcome]++
		perModule[res.Module] = n
	}
	modules := make([]string, 0, len(perModule))
	for m := range perModule {
		modules = append(modules, m)
	}
	slices.Sort(modules)
	for _, m := range modules {
		n := perModule[m]
		fmt.Fprintf(&b, "\n  %s: %d allowed, %d denied, %d failed", m, n[Allowed], n[Denied], n[Failed])
	}
	for i, f := range r.Failures() {
		if i == 10 {
			fmt.Fprintf(&b, "\n  ... %d more failures", r.Failed-i)
			break
		}
		fmt.Fprintf(&b, "\n  failed at %s (took %v): %s: %.400s", f.Start.Format("15:04:05.000"), f.End.Sub(f.Start).Round(time.Millisecond), f.Operation, f.Message)
	}
	return b.String()
}
