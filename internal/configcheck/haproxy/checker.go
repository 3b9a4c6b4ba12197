package haproxy

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// Layout of a run's private directory. Templates refer to auxiliary files by
// these paths, relative to the directory of haproxy.cfg.
const (
	ConfigFile = "haproxy.cfg"
	MapsDir    = "maps"
	FilesDir   = "general"
	CertsDir   = "ssl"
)

const (
	defaultCacheSize = 256
	// initialEstimate is the expected duration of a run before any run
	// has been measured.
	initialEstimate = 100 * time.Millisecond
	// newestWeight is the weight of the newest run in the average.
	newestWeight = 0.2
)

// ErrBusy is returned, wrapped with the queue length and the expected wait,
// when a check could not start and finish before its context's deadline.
var ErrBusy = errors.New("haproxy check refused: it cannot finish before the deadline")

// Options configure a Checker: how runs are scheduled and remembered. How
// one run executes is the Runner's. Every zero field has a default, applied
// by New.
type Options struct {
	// Runner executes one check. Required (NewRunner builds the confined
	// one).
	Runner Runner
	// Policy is what a rendering must satisfy before the Runner sees it.
	Policy Policy
	// MaxConcurrent is how many runs may run at once. Default: the CPUs
	// available to the process (GOMAXPROCS), at least 1.
	MaxConcurrent int
	// CacheSize is how many verdicts are remembered by checksum. Default
	// 256.
	CacheSize int
}

// withDefaults is the one place defaults are applied and options checked.
func (o Options) withDefaults() (Options, error) {
	if o.Runner == nil {
		return o, errors.New("haproxy checker: a Runner is required")
	}
	switch {
	case o.MaxConcurrent < 0:
		return o, fmt.Errorf("haproxy checker: MaxConcurrent %d is negative", o.MaxConcurrent)
	case o.MaxConcurrent == 0:
		o.MaxConcurrent = max(1, runtime.GOMAXPROCS(0))
	}
	switch {
	case o.CacheSize < 0:
		return o, fmt.Errorf("haproxy checker: CacheSize %d is negative", o.CacheSize)
	case o.CacheSize == 0:
		o.CacheSize = defaultCacheSize
	}
	return o, nil
}

// Verdict is the result of a check.
type Verdict struct {
	// Valid is true when haproxy -c accepted the configuration.
	Valid bool
	// Message is the simplified haproxy output when invalid, "" when
	// valid.
	Message string
	// Alerts are every alert haproxy said when invalid, up to MaxAlerts,
	// to compare one failure with another (Message is bounded text, for a
	// person). Empty when the failure is not haproxy's (a file name
	// refused before it ran, the Policy).
	Alerts Alerts
	// Checksum identifies the checked configuration and auxiliary files;
	// see Checksum.
	Checksum string
	// Refused is true when the rendering broke the check Policy: haproxy
	// did not run, and Message is PolicyDenial's text.
	Refused bool
	// Cached is true when the verdict was reused (from the cache, or from
	// a concurrent identical check) without running haproxy.
	Cached bool
	// Duration is how long the haproxy run took; 0 when Cached.
	Duration time.Duration
}

// Stats are counters since New.
type Stats struct {
	// Runs counts runs handed to the Runner.
	Runs int64
	// CacheHits counts verdicts reused without a run of their own
	// (Verdict.Cached).
	CacheHits int64
	// Busy counts checks refused with ErrBusy.
	Busy int64
}

// Checker runs haproxy -c on rendered configurations. It is safe for
// concurrent use.
type Checker struct {
	opts Options
	// slots are the runs, taken in the check's share (fair.ShareOf): the
	// most urgent class first, its parties in turn, and the classes below
	// fair.Real (dry runs, reviews Gatehouse cannot tell came from the API
	// server, configs being written) on all slots but one, so that a real
	// change never waits for a slot behind them.
	slots *fair.Queue

	runs, hits, busy atomic.Int64

	mu       sync.Mutex
	queued   int           // checks waiting for or holding a slot
	average  time.Duration // weighted average of run durations
	measured bool          // average comes from a run, not initialEstimate
	cache    verdictCache
	inflight map[string]*flight
}

// flight is a run other identical checks wait for.
type flight struct {
	done chan struct{}
	// due is when the run is expected to end, estimated at admission.
	due     time.Time
	verdict Verdict
	err     error
}

// New returns a Checker. Its error says how to install haproxy when the
// binary is missing.
func New(opts Options) (*Checker, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	slots, err := fair.New(fair.Options{Slots: opts.MaxConcurrent, Reserved: min(1, opts.MaxConcurrent-1), MaxWaiting: maxWaiting})
	if err != nil {
		return nil, fmt.Errorf("haproxy checker: %w", err)
	}
	return &Checker{
		opts:     opts,
		slots:    slots,
		average:  initialEstimate,
		cache:    newVerdictCache(opts.CacheSize),
		inflight: make(map[string]*flight),
	}, nil
}

// Stats returns the counters.
func (c *Checker) Stats() Stats {
	return Stats{Runs: c.runs.Load(), CacheHits: c.hits.Load(), Busy: c.busy.Load()}
}

// Check validates out with haproxy -c. Its error is for checks that reached
// no verdict: ErrBusy (wrapped), ctx's end, or haproxy failing to start or
// ending without saying why. An invalid configuration is a Verdict with
// Valid false and a nil error.
func (c *Checker) Check(ctx context.Context, out render.Output) (Verdict, error) {
	sum := Checksum(out)
	if msg := checkNames(out); msg != "" {
		return Verdict{Message: msg, Checksum: sum}, nil
	}
	// A real change shares no run with a less urgent check, whose turn
	// for a slot may come after its deadline.
	key := sum
	if _, class := fair.ShareOf(ctx); class > fair.Real {
		key += "\x00low"
	}
	for {
		if err := ctx.Err(); err != nil {
			return Verdict{}, fmt.Errorf("haproxy check: %w", err)
		}
		c.mu.Lock()
		if v, ok := c.cache.get(sum); ok {
			c.mu.Unlock()
			c.hits.Add(1)
			return reused(v), nil
		}
		if f, ok := c.inflight[key]; ok {
			c.mu.Unlock()
			if deadline, ok := ctx.Deadline(); ok && deadline.Before(f.due) {
				c.busy.Add(1)
				return Verdict{}, fmt.Errorf("%w: an identical check is running, expected to end in %v, deadline in %v",
					ErrBusy, time.Until(f.due).Round(time.Millisecond), max(time.Until(deadline), 0).Round(time.Millisecond))
			}
			select {
			case <-f.done:
				if f.err == nil {
					c.hits.Add(1)
					return reused(f.verdict), nil
				}
				// That run ended without a verdict for a reason of
				// its own (its context): try again.
				continue
			case <-ctx.Done():
				return Verdict{}, fmt.Errorf("waiting for an identical haproxy check: %w", ctx.Err())
			}
		}
		expected, err := c.admitLocked(ctx)
		if err != nil {
			c.mu.Unlock()
			c.busy.Add(1)
			return Verdict{}, err
		}
		f := &flight{done: make(chan struct{}), due: time.Now().Add(expected)}
		c.inflight[key] = f
		c.mu.Unlock()

		return c.lead(ctx, key, sum, out, f)
	}
}

func reused(v Verdict) Verdict {
	v.Cached = true
	v.Duration = 0
	return v
}

// admitLocked refuses the check when, with the checks already queued or
// running ahead of it, it is not expected to finish before ctx's deadline;
// otherwise it counts the check as queued and returns how long it is
// expected to take. c.mu is held.
// maxWaiting bounds one party's checks waiting for a slot: past it, a check
// is refused with ErrBusy. The expected wait refuses most before (admitLocked).
const maxWaiting = 64

// hopelessFactor is how far past the deadline the expected wait must be
// for a check to be refused at once.
const hopelessFactor = 2

func (c *Checker) admitLocked(ctx context.Context) (time.Duration, error) {
	ahead := c.queued
	expected := time.Duration(ahead/c.opts.MaxConcurrent+1) * c.average
	if deadline, ok := ctx.Deadline(); ok {
		// Refuse only what is clearly hopeless: the average is measured
		// under the very contention a burst causes and overestimates the
		// wait (a burst of 50 checks of 1,000 backends finished in 4.7 s
		// while the estimate said 8 s). A check that does not make it after
		// all is still killed at the deadline, inside the webhook's timeout.
		if left := time.Until(deadline); expected > hopelessFactor*left {
			return 0, fmt.Errorf("%w: %d checks queued or running ahead of it on %d slots, expected wait %v, deadline in %v",
				ErrBusy, ahead, c.opts.MaxConcurrent, expected.Round(time.Millisecond), max(left, 0).Round(time.Millisecond))
		}
	}
	c.queued++
	return expected, nil
}

// lead runs the check f stands for, then remembers a verdict and hands the
// result to the checks waiting for f.
func (c *Checker) lead(ctx context.Context, key, sum string, out render.Output, f *flight) (v Verdict, err error) {
	defer func() {
		// Also when the run panicked: the waiting checks then try
		// again, and nothing is remembered.
		f.verdict, f.err = v, err
		if f.err == nil && f.verdict.Checksum == "" {
			f.err = errors.New("haproxy check ended without a verdict")
		}
		c.mu.Lock()
		c.queued--
		delete(c.inflight, key)
		if f.err == nil {
			c.cache.add(sum, f.verdict)
		}
		c.mu.Unlock()
		close(f.done)
	}()
	v, err = c.runInSlot(ctx, out)
	if err != nil {
		return Verdict{}, err
	}
	v.Checksum = sum
	return v, nil
}

// runInSlot waits for a slot and runs haproxy.
func (c *Checker) runInSlot(ctx context.Context, out render.Output) (Verdict, error) {
	party, class := fair.ShareOf(ctx)
	release, err := c.slots.Acquire(ctx, party, class)
	if err != nil {
		if errors.Is(err, fair.ErrFull) {
			return Verdict{}, fmt.Errorf("%w: %v", ErrBusy, err)
		}
		return Verdict{}, fmt.Errorf("waiting for a free haproxy slot: %w", err)
	}
	defer release()
	if err := ctx.Err(); err != nil {
		return Verdict{}, fmt.Errorf("haproxy check: %w", err)
	}
	return c.verify(ctx, out)
}

// verify applies the policy, then runs the Runner: a rendering outside the
// policy never reaches haproxy.
func (c *Checker) verify(ctx context.Context, out render.Output) (Verdict, error) {
	if violations := c.opts.Policy.Check(out); len(violations) > 0 {
		return Verdict{Refused: true, Message: PolicyDenial(violations)}, nil
	}
	c.runs.Add(1)
	start := time.Now()
	result, err := c.opts.Runner.Run(ctx, out)
	elapsed := time.Since(start)
	if err != nil {
		return Verdict{}, err
	}
	c.observe(elapsed)
	return Verdict{Valid: result.Valid, Message: result.Message, Alerts: result.Alerts, Duration: elapsed}, nil
}

// observe adds a run's duration to the average.
func (c *Checker) observe(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.measured {
		c.average, c.measured = d, true
		return
	}
	c.average = time.Duration((1-newestWeight)*float64(c.average) + newestWeight*float64(d))
}

// auxDirs pairs each kind of auxiliary file with its directory and the name
// the HAProxyTemplateConfig gives it.
func auxDirs(out render.Output) []struct {
	dir, field string
	files      map[string]string
} {
	return []struct {
		dir, field string
		files      map[string]string
	}{
		{MapsDir, "maps", out.Maps},
		{FilesDir, "files", out.Files},
		{CertsDir, "sslCertificates", out.Certs},
	}
}

// checkNames returns why some auxiliary file names cannot be written flat
// into their directory, or "".
func checkNames(out render.Output) string {
	var problems []string
	for _, aux := range auxDirs(out) {
		for _, name := range slices.Sorted(maps.Keys(aux.files)) {
			var why string
			switch {
			case name == "":
				why = "is empty"
			case name == "." || name == "..":
				why = "is " + name
			case strings.Contains(name, "/"):
				why = `contains "/"`
			case strings.ContainsRune(name, 0):
				why = "contains a NUL byte"
			default:
				continue
			}
			problems = append(problems, fmt.Sprintf("%s[%q] %s", aux.field, name, why))
		}
	}
	if len(problems) == 0 {
		return ""
	}
	return fmt.Sprintf("invalid file name: %s (a file name is one path element, written into %s/, %s/ or %s/ next to %s)",
		strings.Join(problems, "; "), MapsDir, FilesDir, CertsDir, ConfigFile)
}

// Checksum is the sha256 (hex) of haproxy.cfg and every auxiliary file's
// kind, name and content, names sorted, each field length-prefixed so that
// no two different outputs share an encoding.
func Checksum(out render.Output) string {
	h := sha256.New()
	writeField(h, "gatehouse-haproxy-check/v1")
	writeField(h, out.HAProxyConfig)
	for _, aux := range auxDirs(out) {
		writeField(h, aux.dir)
		names := slices.Sorted(maps.Keys(aux.files))
		writeLength(h, len(names))
		for _, name := range names {
			writeField(h, name)
			writeField(h, aux.files[name])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeLength(h hash.Hash, n int) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

func writeField(h hash.Hash, s string) {
	writeLength(h, len(s))
	h.Write([]byte(s))
}

// verdictCache is a least-recently-used map of checksum to verdict. It is
// guarded by Checker.mu.
type verdictCache struct {
	size  int
	order *list.List // of *cacheEntry, most recently used first
	index map[string]*list.Element
}

type cacheEntry struct {
	sum     string
	verdict Verdict
}

func newVerdictCache(size int) verdictCache {
	return verdictCache{size: size, order: list.New(), index: make(map[string]*list.Element)}
}

func (vc *verdictCache) get(sum string) (Verdict, bool) {
	e, ok := vc.index[sum]
	if !ok {
		return Verdict{}, false
	}
	vc.order.MoveToFront(e)
	return e.Value.(*cacheEntry).verdict, true
}

func (vc *verdictCache) add(sum string, v Verdict) {
	if e, ok := vc.index[sum]; ok {
		e.Value.(*cacheEntry).verdict = v
		vc.order.MoveToFront(e)
		return
	}
	vc.index[sum] = vc.order.PushFront(&cacheEntry{sum: sum, verdict: v})
	for vc.order.Len() > vc.size {
		oldest := vc.order.Back()
		vc.order.Remove(oldest)
		delete(vc.index, oldest.Value.(*cacheEntry).sum)
	}
}
