package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// TestDrainHandsConnectionsOverWithoutFailingARequest plays kube-apiserver
// during a rolling update: it keeps its keep-alive connection to a replica
// that is told to drain (SIGTERM with --shutdown-delay). Every request is
// still answered; each answer from then on closes its connection, so the
// caller's next request opens a new one (through the Service, to another
// replica), and /readyz fails. Before Drain, the replica kept serving the
// old connection until the listener closed and dropped it under a request
// being written: "write: broken pipe", a failed admission.
func TestDrainHandsConnectionsOverWithoutFailingARequest(t *testing.T) {
	h := start(t, nil, func(s *server.Server) {
		s.Admission("test", validating("allow.test", "/allow", func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("")
		}), module.Enforce)
	})
	h.client.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	// send posts a review and says whether it went over a reused
	// connection and whether the answer closed it.
	send := func() (reused, closed bool) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, h.url+"/allow", bytes.NewReader(review("u", admissionv1.Create)))
		if err != nil {
			t.Fatal(err)
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatalf("a request failed: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !decodeResponse(t, body).Allowed {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		return reused, resp.Close
	}
	readyz := func() (int, string) {
		resp, err := h.client.Get(h.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	send()
	if reused, closed := send(); !reused || closed {
		t.Fatalf("before the drain: reused %v, closed %v; want the keep-alive connection kept", reused, closed)
	}
	if code, _ := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz before the drain: %d", code)
	}

	h.srv.Drain()
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Fatalf("/readyz while draining = %d %q, want 503 saying it is shutting down", code, body)
	}
	for i := range 3 {
		reused, closed := send()
		if !closed {
			t.Fatalf("answer %d while draining kept its connection open", i)
		}
		if i > 0 && reused {
			t.Fatalf("request %d while draining went over a connection the server had closed", i)
		}
	}
}
