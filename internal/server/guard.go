package server

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

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
// (intake.go) and hands it to the handler through the context.
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
		// the caller's share (intake.go). A body of unknown length is read
		// from the budget of large ones.
		p := partyOf(r)
		pool := s.inFlight
		if r.ContentLength >= 0 && r.ContentLength <= smallRequest {
			pool = s.inFlightSmall
		}
		in := s.newIntake(w, r, p, pool, waitUntil)
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

// requestBody returns the body the guard read.
func requestBody(r *http.Request) []byte {
	b, _ := r.Context().Value(bodyKey{}).(guardedBody)
	return b.body
}

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
