package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// DefaultBytesPerToken is what a decision is charged per structural token
// of its review when its webhook declares no cost: decoding into maps and
// slices (map[string]any), the most a module's decoder allocates per token
// of JSON among the shapes measured (docs/reliability.md, "Hostile load":
// 95 bytes for an array of small numbers, 70 for empty objects, 73 for
// short keys), with room for the copies a decision makes.
const DefaultBytesPerToken = 128

// structuralTokens counts ',', ':', '[' and '{' outside JSON strings: about
// one per value or object member a decoder builds, which is what a decoded
// review costs, far more than its bytes. One pass, no allocation: a 3 MiB
// body takes about 3 ms.
func structuralTokens(body []byte) int64 {
	var n int64
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ',', ':', '[', '{':
			n++
		}
	}
	return n
}

// decisionCost estimates the memory a decision of hook takes on body.
func decisionCost(body []byte, cost module.Cost) int64 {
	perToken := cost.BytesPerToken
	if perToken == 0 {
		perToken = DefaultBytesPerToken
	}
	return int64(len(body)) + structuralTokens(body)*perToken
}

// budget is a count of bytes whose waiters take room as soon as it fits
// them, in no particular order: unlike a FIFO semaphore, a small charge
// (a pvsafe review of a few KiB) never waits behind a large one that does
// not fit yet. A large charge can wait out its deadline while small ones
// keep coming; it is the anomaly, and gets 429.
//
// A budget made with shares (newSharedBudget) also says who may take what
// (fits): a verified caller (the API server, by its client certificate)
// may take all of it; an unverified party (a client address) holds at most
// its share while it has other requests in flight, and never the reserve
// once client certificates are configured. Without them nobody is
// verified, and the reserve goes to a party's first request in flight: an
// address that is not flooding (the API server's, among others) still
// finds room when a few addresses hold all the rest.
type budget struct {
	mu    sync.Mutex
	free  int64
	size  int64
	freed chan struct{} // closed and replaced on every release

	// shared says whether reserve and share apply.
	shared bool
	// reserve is the room an unverified party holding nothing else may
	// take (verifiedOnly false) or that only verified callers may take
	// (verifiedOnly true).
	reserve      int64
	verifiedOnly bool
	// share is the most an unverified party may hold once it holds
	// anything besides the request asking.
	share int64
	held  map[string]int64
}

// party is who a charge is made for: a verified caller, or the address an
// unverified one connects from (partyOf).
type party struct {
	key      string
	verified bool
}

func newBudget(size int64) *budget {
	return &budget{free: size, size: size, freed: make(chan struct{})}
}

// newSharedBudget is a budget of size whose unverified parties hold at
// most share each, beside a quarter kept as the reserve (see budget).
func newSharedBudget(size, share int64, verifiedOnly bool) *budget {
	b := newBudget(size)
	b.shared, b.verifiedOnly = true, verifiedOnly
	b.reserve, b.share = size/4, share
	b.held = map[string]int64{}
	return b
}

// fits says whether p may take n more while its request holds own.
func (b *budget) fits(p party, n, own int64) bool {
	if n > b.free {
		return false
	}
	if !b.shared || p.verified {
		return true
	}
	held := b.held[p.key]
	others := held - own
	if others > 0 && held+n > b.share {
		return false
	}
	if b.verifiedOnly || others > 0 {
		return b.size-b.free+n <= b.size-b.reserve
	}
	return true
}

// acquire takes n for a request that has no charge yet in b.
func (b *budget) acquire(ctx context.Context, n int64) error {
	return b.grow(ctx, party{verified: true}, n, 0)
}

// grow takes n more for p's request, which holds own already, waiting for
// room until ctx ends (trying once even when it has ended).
func (b *budget) grow(ctx context.Context, p party, n, own int64) error {
	for {
		b.mu.Lock()
		if b.fits(p, n, own) {
			b.free -= n
			if b.shared && !p.verified {
				b.held[p.key] += n
			}
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *budget) release(n int64) { b.releaseFor(party{verified: true}, n) }

// releaseFor gives back n that p took.
func (b *budget) releaseFor(p party, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	if b.shared && !p.verified {
		if b.held[p.key] -= n; b.held[p.key] <= 0 {
			delete(b.held, p.key)
		}
	}
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// moduleConcurrency returns the bound shared by moduleName's webhooks
// declaring a concurrency of n, made on first use.
func (s *Server) moduleConcurrency(moduleName string, n int) (*semaphore.Weighted, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.concurrency[moduleName]; ok {
		if b.n != n {
			return nil, fmt.Errorf("module %s: webhooks declare a concurrency of %d and %d: one bound is shared by all of them", moduleName, b.n, n)
		}
		return b.sem, nil
	}
	b := concurrencyBound{n: n, sem: semaphore.NewWeighted(int64(n))}
	s.concurrency[moduleName] = b
	return b.sem, nil
}

type concurrencyBound struct {
	n   int
	sem *semaphore.Weighted
}

// hold takes room for one decision: a place in its module's concurrency,
// then the decision's estimated memory in the budget of decisions in
// flight, waiting for both until the request's wait ends (InFlightWait
// after it arrived). It answers the request itself when there is none: 503
// when the module is busy, 429 when the memory budget is full, 413 when the
// decision alone would exceed the budget. None carries Retry-After
// (refuse): the API server applies the webhook's failurePolicy at once.
func (s *Server) hold(w http.ResponseWriter, r *http.Request, path string, concurrency *semaphore.Weighted, cost module.Cost) (release func(), ok bool) {
	body := requestBody(r)
	charge := decisionCost(body, cost)
	if charge > s.opts.MaxInFlightDecisionBytes {
		s.refuse(w, path, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"deciding this review would take about %d MiB (%d bytes of JSON), more than the %d MiB of decisions the server holds in flight",
			charge>>20, len(body), s.opts.MaxInFlightDecisionBytes>>20))
		return nil, false
	}
	ctx, cancel := context.WithDeadline(r.Context(), waitUntil(r))
	defer cancel()
	if concurrency != nil {
		if err := concurrency.Acquire(ctx, 1); err != nil {
			s.refuse(w, path, http.StatusServiceUnavailable, fmt.Sprintf("too many decisions of this module in flight: none ended within %s", s.opts.InFlightWait))
			return nil, false
		}
	}
	p := partyOf(r)
	if err := s.decisions.grow(ctx, p, charge, 0); err != nil {
		if concurrency != nil {
			concurrency.Release(1)
		}
		s.refuse(w, path, http.StatusTooManyRequests, fmt.Sprintf("too many requests in flight: a decision estimated at %d MiB found no room in %s", charge>>20, s.opts.InFlightWait))
		return nil, false
	}
	// The decision's charge counts the body: the body's own charge in the
	// in-flight budget ends, so that a party's share there bounds the
	// bodies it is sending, not the decisions it waits for.
	if b, ok := r.Context().Value(bodyKey{}).(guardedBody); ok && b.intake != nil {
		b.intake.release()
	}
	return func() {
		s.decisions.releaseFor(p, charge)
		if concurrency != nil {
			concurrency.Release(1)
		}
	}, true
}

// waitUntil is when the request's wait for room ends.
func waitUntil(r *http.Request) time.Time {
	if b, ok := r.Context().Value(bodyKey{}).(guardedBody); ok {
		return b.waitUntil
	}
	return time.Now()
}
