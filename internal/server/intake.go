package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// The intake is what a request meets in the server before a module decides
// it, in the order it meets it: the guard (client authentication, method,
// content type, announced size), the body, read under its rate and charged
// to the in-flight budget by party, the refusals, and the hold on the
// decision's room (its module's concurrency, the decisions' budget). It
// decodes no review and calls no module: the admission and conversion
// handlers call hold, then decide.
//
// The intake reads a request's body for the guard. Anyone who reaches the
// port may send one, slowly: before, the body's whole announced length was
// taken from the in-flight budget before a byte was read and held until the
// read timeout, so 32 connections announcing 256 KiB and sending a byte
// every half second locked every review out for 10 s. Now:
//   - the budget is charged the buffer the body is read into, grown as
//     bytes arrive (at most twice what arrived, from firstChunk), beyond
//     the first freeBytes, which arrive before anything is charged (a
//     connection's buffers cost as much);
//   - the body must arrive at MinBodyRate after bodyGrace, or the request
//     is answered 408 and its connection closed;
//   - the charge is the caller's (partyOf): an unverified address holds at
//     most its share of the budget, and a reserve stays for the API server
//     (budget.fits);
//   - every refusal reaches the caller as an HTTP answer: a body the
//     budget refused is read to its end (charged nothing) before its 429,
//     so that the connection is not reset under an unread body, and the
//     answer's write deadline is renewed, so that a read cut at the read
//     timeout is not answered past the write timeout (which tls.Conn turns
//     into "bad record MAC" at the client).

type bodyKey struct{}

// guardedBody is what the guard hands a handler: the body it read, and
// when the request's wait for room in the server's budgets ends.
type guardedBody struct {
	body      []byte
	waitUntil time.Time
	// intake holds the body's charge until the decision's (hold) takes
	// over: the decision's charge counts the body too.
	intake *intake
}

// smallRequest is the largest body served from the ordinary reviews'
// budget: kube-apiserver's reviews are a few KiB to a few hundred.
const smallRequest = 256 << 10

// guard refuses what no webhook handler should see: callers without an
// accepted client certificate when client authentication is on (401, 403;
// before anything else, so that they learn nothing of the path), methods
// other than POST (405), bodies that are not JSON (415), bodies over the
// size limit (413), bodies slower than MinBodyRate (408) and bodies that
// find no room in the in-flight budget (429). It reads the body once
// (intake.read) and hands it to the handler through the context.
func (s *Server) guard(path string, next http.Handler, authenticated bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		metrics.InFlight.Inc()
		defer metrics.InFlight.Dec()
		if authenticated && s.opts.ClientAuth != nil {
			if code, msg := s.authenticate(r); code != 0 {
				s.refuse(w, path, code, msg)
				return
			}
			// Modules may trust the review's userInfo: the API server
			// wrote it (module.VerifiedCaller).
			r = r.WithContext(module.WithVerifiedCaller(r.Context()))
		}
		waitUntil := time.Now().Add(s.opts.InFlightWait)
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			s.refuse(w, path, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed: webhooks accept POST", r.Method))
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "" {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				s.refuse(w, path, http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q is not supported: send application/json", ct))
				return
			}
		}
		limit := s.opts.MaxRequestBytes
		if r.ContentLength > limit {
			s.refuse(w, path, http.StatusRequestEntityTooLarge, tooLarge(r.ContentLength, limit))
			return
		}
		// The body is charged to the in-flight budget as it arrives, to
		// the caller's share (intake.read). A body of unknown length is read
		// from the budget of large ones.
		pool := s.inFlight
		if r.ContentLength >= 0 && r.ContentLength <= smallRequest {
			pool = s.inFlightSmall
		}
		now := time.Now()
		in := &intake{
			r: r, rc: http.NewResponseController(w), party: partyOf(r), pool: pool,
			rate: s.opts.MinBodyRate, wait: s.opts.InFlightWait, waitUntil: waitUntil,
			start: now, cutoff: now.Add(s.opts.ReadTimeout),
		}
		defer in.release()
		body, bodyErr := in.read(limit)
		if bodyErr != nil {
			// No Retry-After on a 429 (refuse): the API server must not
			// retry.
			s.refuseBody(w, path, bodyErr)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bodyKey{}, guardedBody{body: body, waitUntil: waitUntil, intake: in})))
	})
}

func tooLarge(size, limit int64) string {
	if size < 0 {
		return fmt.Sprintf("request body exceeds the limit of %d bytes", limit)
	}
	return fmt.Sprintf("request body of %d bytes exceeds the limit of %d bytes", size, limit)
}

// party is who a charge is made for: a verified caller, or the address an
// unverified one connects from (partyOf).
type party struct {
	key      string
	verified bool
}

// partyOf is who r's charges are made for: a verified caller, or the
// address it connects from (its /64 for IPv6, which one host usually
// holds whole).
func partyOf(r *http.Request) party {
	if module.VerifiedCaller(r.Context()) {
		return party{verified: true}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return party{key: host}
	}
	if ip = ip.Unmap(); ip.Is6() {
		prefix, _ := ip.Prefix(64)
		return party{key: prefix.String()}
	}
	return party{key: ip.String()}
}

const (
	// freeBytes are read before a body is charged anything: a connection
	// that sends nothing holds nothing of the budget.
	freeBytes = 4 << 10
	// firstChunk is the first room a body is charged: most reviews fit.
	firstChunk = 32 << 10
	// bodyGrace is how long a body may take before MinBodyRate counts: a
	// connection's first round trips, a caller's scheduling.
	bodyGrace = time.Second
)

// intake is one request body being read.
type intake struct {
	r     *http.Request
	rc    *http.ResponseController
	party party
	pool  *budget
	rate  int64
	wait  time.Duration
	// waitUntil ends the waits for room in pool.
	waitUntil time.Time
	// charged is what the body holds in pool.
	charged int64
	// start, paused and received give the next byte's deadline: start +
	// bodyGrace + paused + received/rate, never after cutoff (the read
	// timeout). paused is the time spent waiting for room, when nothing
	// was read.
	start, cutoff time.Time
	paused        time.Duration
	received      int64
}

// release gives back what the body was charged.
func (in *intake) release() {
	in.pool.releaseFor(in.party, in.charged)
	in.charged = 0
}

// Read reads the body under its deadline.
func (in *intake) Read(p []byte) (int, error) {
	deadline := in.start.Add(bodyGrace + in.paused + time.Duration(in.received)*time.Second/time.Duration(in.rate))
	if deadline.After(in.cutoff) {
		deadline = in.cutoff
	}
	_ = in.rc.SetReadDeadline(deadline)
	n, err := in.r.Body.Read(p)
	in.received += int64(n)
	return n, err
}

// bodyError is why a body was not read: the answer's code and message.
type bodyError struct {
	code int
	msg  string
}

func (e *bodyError) Error() string { return e.msg }

// read reads the whole body of at most limit bytes.
func (in *intake) read(limit int64) ([]byte, *bodyError) {
	defer func() {
		// The body is read (or refused): the read deadline was this
		// body's alone. Left set, it would end the server's background
		// read during a long decision, and with it the request's context.
		_ = in.rc.SetReadDeadline(time.Time{})
	}()
	want, known := in.r.ContentLength, in.r.ContentLength >= 0
	if !known {
		// One byte over the limit tells a body that exceeds it.
		want = limit + 1
	}
	// chargeOf is what a buffer of n bytes is charged.
	chargeOf := func(n int64) int64 {
		if n <= freeBytes {
			return 0
		}
		return n
	}
	buf := make([]byte, 0, min(want, freeBytes))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == want {
				break
			}
			grown := min(max(2*int64(cap(buf)), firstChunk), want)
			if err := in.charge(chargeOf(grown) - chargeOf(int64(cap(buf)))); err != nil {
				return nil, err
			}
			next := make([]byte, len(buf), grown)
			copy(next, buf)
			buf = next
		}
		n, err := in.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			if known && int64(len(buf)) < want {
				return nil, &bodyError{http.StatusBadRequest, fmt.Sprintf("read request body: %d of %d bytes, then the end", len(buf), want)}
			}
			break
		}
		if err != nil {
			return nil, in.failed(err)
		}
	}
	if int64(len(buf)) > limit {
		return nil, &bodyError{http.StatusRequestEntityTooLarge, tooLarge(-1, limit)}
	}
	return buf, nil
}

// charge takes n more room for the body, waiting until waitUntil; when
// there is none, it reads the rest of the body (charged nothing: it is
// discarded) so that the 429 reaches the caller.
func (in *intake) charge(n int64) *bodyError {
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithDeadline(in.r.Context(), in.waitUntil)
	defer cancel()
	began := time.Now()
	err := in.pool.grow(ctx, in.party, n, in.charged)
	in.paused += time.Since(began)
	if err == nil {
		in.charged += n
		return nil
	}
	in.release()
	refusal := &bodyError{http.StatusTooManyRequests, fmt.Sprintf("too many requests in flight: a request of %d bytes found no room in %s", max(in.r.ContentLength, in.received+n), in.wait)}
	if _, err := io.Copy(io.Discard, in); err != nil {
		return in.failed(err)
	}
	return refusal
}

// failed is the answer to a body whose read failed with err.
func (in *intake) failed(err error) *bodyError {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &bodyError{http.StatusRequestTimeout, fmt.Sprintf("request body too slow: %d bytes arrived, at less than %d bytes/s", in.received, in.rate)}
	}
	return &bodyError{http.StatusBadRequest, "read request body: " + err.Error()}
}

// refuseBody answers a request whose body was not read whole. The
// connection closes after the answer (what remains of the body is not
// read), and the answer gets a write deadline of its own: the read may
// have ended at the read timeout, when the server's write deadline has
// passed or is about to.
func (s *Server) refuseBody(w http.ResponseWriter, path string, e *bodyError) {
	if e.code != http.StatusTooManyRequests {
		w.Header().Set("Connection", "close")
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeGrace))
	s.refuse(w, path, e.code, e.msg)
}

// writeGrace is how long after the webhook's declared timeout its answer
// may still be written: the module answers before that timeout (less a
// margin), so the grace only covers encoding and the network.
const writeGrace = 2 * time.Second

// refuse answers a request the server does not decide, with code and msg.
// Refusals for load (429, 503) carry no Retry-After header on purpose:
// kube-apiserver calls webhooks through client-go's REST client, which
// retries a 429 or 5xx naming a Retry-After, up to ten times. A refusal
// meant to apply the webhook's failurePolicy at once would instead be sent
// again every second until the webhook's timeout, adding the load it
// refused and ending as a timeout (BenchmarkConfigcheckBurst50 saw 20 of 50
// creates fail so, after 10 s; TestLoadRefusalsAreNotRetried).
func (s *Server) refuse(w http.ResponseWriter, path string, code int, msg string) {
	metrics.BadRequests.WithLabelValues(path, strconv.Itoa(code)).Inc()
	s.opts.Log.V(1).Info("request refused", "path", path, "code", code, "reason", msg)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}

// hold takes room for one decision: a place in its module's concurrency,
// then the decision's estimated memory in the budget of decisions in
// flight, waiting for both until the request's wait ends (InFlightWait
// after it arrived), and returns the body the guard read. It answers the
// request itself when there is none: 503 when the module is busy, 429 when
// the memory budget is full, 413 when the decision alone would exceed the
// budget. None carries Retry-After (refuse): the API server applies the
// webhook's failurePolicy at once.
func (s *Server) hold(w http.ResponseWriter, r *http.Request, path string, concurrency *semaphore.Weighted, cost module.Cost) (body []byte, release func(), ok bool) {
	// Zero for a request the guard did not read: no body, and no wait.
	g, _ := r.Context().Value(bodyKey{}).(guardedBody)
	// The decision's estimated memory: its body, and what decoding each of
	// its structural tokens builds.
	perToken := cost.BytesPerToken
	if perToken == 0 {
		perToken = DefaultBytesPerToken
	}
	charge := int64(len(g.body)) + structuralTokens(g.body)*perToken
	p := partyOf(r)
	ctx, cancel := context.WithDeadline(r.Context(), g.waitUntil)
	defer cancel()
	// Each case takes its room or refuses, in this order: the decision
	// alone is too large, the module has no place, the budget no room
	// (and the module's place is given back).
	var code int
	var msg string
	switch {
	case charge > s.opts.MaxInFlightDecisionBytes:
		code, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"deciding this review would take about %d MiB (%d bytes of JSON), more than the %d MiB of decisions the server holds in flight",
			charge>>20, len(g.body), s.opts.MaxInFlightDecisionBytes>>20)
	case concurrency != nil && concurrency.Acquire(ctx, 1) != nil:
		code, msg = http.StatusServiceUnavailable, fmt.Sprintf("too many decisions of this module in flight: none ended within %s", s.opts.InFlightWait)
	case s.decisions.grow(ctx, p, charge, 0) != nil:
		if concurrency != nil {
			concurrency.Release(1)
		}
		code, msg = http.StatusTooManyRequests, fmt.Sprintf("too many requests in flight: a decision estimated at %d MiB found no room in %s", charge>>20, s.opts.InFlightWait)
	}
	if code != 0 {
		s.refuse(w, path, code, msg)
		return nil, nil, false
	}
	// The decision's charge counts the body: the body's own charge in the
	// in-flight budget ends, so that a party's share there bounds the
	// bodies it is sending, not the decisions it waits for.
	if g.intake != nil {
		g.intake.release()
	}
	return g.body, func() {
		s.decisions.releaseFor(p, charge)
		if concurrency != nil {
			concurrency.Release(1)
		}
	}, true
}

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
