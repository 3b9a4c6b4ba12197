package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

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

func (s *Server) newIntake(w http.ResponseWriter, r *http.Request, p party, pool *budget, waitUntil time.Time) *intake {
	now := time.Now()
	return &intake{
		r: r, rc: http.NewResponseController(w), party: p, pool: pool,
		rate: s.opts.MinBodyRate, wait: s.opts.InFlightWait, waitUntil: waitUntil,
		start: now, cutoff: now.Add(s.opts.ReadTimeout),
	}
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
