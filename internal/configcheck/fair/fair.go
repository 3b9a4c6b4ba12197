// Package fair shares a few slots (render workers, a config's turn to be
// judged) among the parties that want them, so that none of them becomes
// another's delay: one config's (or one tenant's) burst of work waits behind
// its own earlier work, never in front of everyone else's.
//
// A [Queue] has a number of slots. Whoever wants one names its party (a
// config, a namespace) and its [Class]; when a slot frees, it goes to the
// most urgent class that has waiters, and within that class to the parties
// in turn (round-robin), each party's waiters in arrival order. The
// classes below [Real] may together hold all slots but the reserved ones,
// so that real changes always find a slot soon; and each party may have a
// bounded number of waiters: one more is refused at once ([ErrFull]),
// rather than left to time out while it holds memory and a connection. A
// request queued with [Queue.AcquireFirst] goes ahead of its own party's
// waiters and, when the party is full, takes the place of its newest.
//
// Neither golang.org/x/sync/semaphore (one FIFO, so a burst of one party's
// requests queues ahead of everyone's) nor client-go's workqueue (a queue of
// deduplicated keys for controllers, not of callers waiting to proceed)
// orders waiters by party and class; this is the small part they lack.
package fair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Class is how urgent a request is; lower is more urgent.
type Class int

const (
	// Real is a change to be stored (a watched object's admission) and
	// the work on what is stored (publishing it, a stored config's tests).
	Real Class = iota
	// Check is a config being written: its tests and its rendering of the
	// cluster's state.
	Check
	// DryRun is a dry run, which stores nothing, and a review Gatehouse
	// cannot tell came from the API server.
	DryRun

	numClasses
)

func (c Class) String() string {
	switch c {
	case Real:
		return "real"
	case Check:
		return "check"
	case DryRun:
		return "dry-run"
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// ErrFull is the error of a request refused because its party already has
// as many waiters as it may.
var ErrFull = errors.New("too many requests of the same party are already waiting")

// FullError is ErrFull with the party and the bound.
type FullError struct {
	Party   string
	Waiting int
}

func (e *FullError) Error() string {
	return fmt.Sprintf("%s already has %d waiting for their turn, the most it may have waiting", e.Party, e.Waiting)
}

func (e *FullError) Unwrap() error { return ErrFull }

// Options configure a Queue.
type Options struct {
	// Slots is how many requests proceed at once (at least 1).
	Slots int
	// Reserved slots are for Real requests only: the other classes hold at
	// most Slots-Reserved at once. Less than Slots.
	Reserved int
	// MaxWaiting bounds each party's waiters (at least 1).
	MaxWaiting int
}

// Queue hands out slots. It is safe for concurrent use.
type Queue struct {
	opts Options

	mu sync.Mutex
	// busy counts the slots held; busyLow those held by classes below
	// Real.
	busy, busyLow int
	classes       [numClasses]ring
	// waiting counts each party's waiters, over every class.
	waiting map[string]int
}

// ring is one class's waiters: the parties in turn, each with its FIFO.
type ring struct {
	parties []string
	queues  map[string][]*waiter
	// next is the index in parties of the party served next.
	next int
}

type waiter struct {
	party string
	class Class
	ready chan struct{}
	// first: queued ahead of its party's other waiters (AcquireFirst).
	first   bool
	granted bool
	// displaced: taken out of its queue for a waiter queued first; ready
	// is closed without a slot.
	displaced bool
}

// New returns a queue.
func New(opts Options) (*Queue, error) {
	switch {
	case opts.Slots < 1:
		return nil, fmt.Errorf("fair: Slots %d: at least 1", opts.Slots)
	case opts.Reserved < 0 || opts.Reserved >= opts.Slots:
		return nil, fmt.Errorf("fair: Reserved %d: 0 to Slots-1 (%d)", opts.Reserved, opts.Slots-1)
	case opts.MaxWaiting < 1:
		return nil, fmt.Errorf("fair: MaxWaiting %d: at least 1", opts.MaxWaiting)
	}
	q := &Queue{opts: opts, waiting: map[string]int{}}
	for i := range q.classes {
		q.classes[i].queues = map[string][]*waiter{}
	}
	return q, nil
}

// Acquire waits for a slot for party's request of class c until ctx ends,
// and returns the function that gives it back (call it once). It refuses
// at once, with a *FullError, when party already has MaxWaiting waiters.
// A slot granted as ctx ends is given back, and ctx's error returned.
func (q *Queue) Acquire(ctx context.Context, party string, c Class) (release func(), err error) {
	return q.acquire(ctx, party, c, false)
}

// AcquireFirst is Acquire for a request that must not wait behind its own
// party's: it is queued ahead of the party's waiters of its class (behind
// those queued first before it), and when the party already has
// MaxWaiting waiters, the party's newest waiter that was not queued first
// (the least urgent class's first) is refused with a *FullError to make
// room. It is refused itself only when all of them were queued first. Its
// wait for the other parties is unchanged: they keep their turns.
//
// configcheck queues a deletion so: a tenant's burst of creates then never
// refuses its own deletion for a lack of room.
func (q *Queue) AcquireFirst(ctx context.Context, party string, c Class) (release func(), err error) {
	return q.acquire(ctx, party, c, true)
}

func (q *Queue) acquire(ctx context.Context, party string, c Class, first bool) (release func(), err error) {
	if c < Real || c >= numClasses {
		c = DryRun
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q.mu.Lock()
	if n := q.waiting[party]; n >= q.opts.MaxWaiting && (!first || !q.displace(party)) {
		q.mu.Unlock()
		return nil, &FullError{Party: party, Waiting: n}
	}
	w := &waiter{party: party, class: c, ready: make(chan struct{}), first: first}
	q.push(w)
	q.dispatch()
	granted := w.granted
	q.mu.Unlock()
	if granted {
		// A free slot is taken even when ctx is about to end: which case
		// of the select below is picked must not decide.
		return q.releaser(w), nil
	}

	select {
	case <-w.ready:
		if w.displaced {
			return nil, &FullError{Party: party, Waiting: q.opts.MaxWaiting}
		}
		return q.releaser(w), nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	switch {
	case w.granted:
		q.mu.Unlock()
		q.releaser(w)()
		return nil, ctx.Err()
	case w.displaced:
		q.mu.Unlock()
		return nil, &FullError{Party: party, Waiting: q.opts.MaxWaiting}
	}
	q.remove(w)
	q.mu.Unlock()
	return nil, ctx.Err()
}

// displace refuses party's newest waiter that was not queued first, of the
// least urgent class that has one, and says whether there was one. The
// lock is held.
func (q *Queue) displace(party string) bool {
	for c := numClasses - 1; c >= Real; c-- {
		fifo := q.classes[c].queues[party]
		for i := len(fifo) - 1; i >= 0; i-- {
			if w := fifo[i]; !w.first {
				q.remove(w)
				w.displaced = true
				close(w.ready)
				return true
			}
		}
	}
	return false
}

func (q *Queue) releaser(w *waiter) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.busy--
			if w.class != Real {
				q.busyLow--
			}
			q.dispatch()
		})
	}
}

// push queues w at the end of its party's FIFO in its class.
func (q *Queue) push(w *waiter) {
	r := &q.classes[w.class]
	if len(r.queues[w.party]) == 0 {
		// A party with no waiters joins the turn just before the party
		// served next: it is served last of those waiting, as if it
		// had been waiting all along.
		r.parties = append(r.parties, "")
		copy(r.parties[r.next+1:], r.parties[r.next:])
		r.parties[r.next] = w.party
		r.next = (r.next + 1) % len(r.parties)
	}
	fifo := r.queues[w.party]
	i := len(fifo)
	if w.first {
		// Behind the waiters queued first before it, ahead of the rest.
		i = 0
		for i < len(fifo) && fifo[i].first {
			i++
		}
	}
	r.queues[w.party] = slices.Insert(fifo, i, w)
	q.waiting[w.party]++
}

// remove takes a waiter that gave up out of its queue.
func (q *Queue) remove(w *waiter) {
	r := &q.classes[w.class]
	fifo := r.queues[w.party]
	for i, x := range fifo {
		if x == w {
			fifo = append(fifo[:i], fifo[i+1:]...)
			break
		}
	}
	q.settle(r, w.party, fifo)
}

// settle stores party's FIFO, dropping the party from the turn when it is
// empty.
func (q *Queue) settle(r *ring, party string, fifo []*waiter) {
	q.waiting[party]--
	if q.waiting[party] == 0 {
		delete(q.waiting, party)
	}
	if len(fifo) > 0 {
		r.queues[party] = fifo
		return
	}
	delete(r.queues, party)
	for i, p := range r.parties {
		if p == party {
			r.parties = append(r.parties[:i], r.parties[i+1:]...)
			if i < r.next {
				r.next--
			}
			break
		}
	}
	if len(r.parties) == 0 || r.next >= len(r.parties) {
		r.next = 0
	}
}

// dispatch grants free slots: the most urgent class first, the parties of a
// class in turn. The lock is held.
func (q *Queue) dispatch() {
	for q.busy < q.opts.Slots {
		w := q.pop()
		if w == nil {
			return
		}
		w.granted = true
		q.busy++
		if w.class != Real {
			q.busyLow++
		}
		close(w.ready)
	}
}

// pop takes the next waiter to serve, or nil.
func (q *Queue) pop() *waiter {
	for c := range q.classes {
		if Class(c) != Real && q.busyLow >= q.opts.Slots-q.opts.Reserved {
			return nil
		}
		r := &q.classes[c]
		if len(r.parties) == 0 {
			continue
		}
		party := r.parties[r.next]
		fifo := r.queues[party]
		w := fifo[0]
		fifo = fifo[1:]
		if len(fifo) > 0 {
			// Its next waiter waits for the others' turn.
			r.next = (r.next + 1) % len(r.parties)
		}
		q.settle(r, party, fifo)
		return w
	}
	return nil
}

// Waiting is how many requests wait, in all.
func (q *Queue) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, c := range q.waiting {
		n += c
	}
	return n
}

// shareKey holds a request's party and class in a context.
type shareKey struct{}

type share struct {
	party string
	class Class
}

// WithShare tells the queues ctx's work reaches whose party and class it
// is: a rendering learns it from the admission or publishing that asked for
// it.
func WithShare(ctx context.Context, party string, c Class) context.Context {
	return context.WithValue(ctx, shareKey{}, share{party: party, class: c})
}

// ShareOf is ctx's party and class; work nobody named is Real work of the
// party "".
func ShareOf(ctx context.Context) (party string, c Class) {
	s, _ := ctx.Value(shareKey{}).(share)
	return s.party, s.class
}
