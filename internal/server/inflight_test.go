package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// A request being decided is counted in flight until it is answered; a
// refused one leaves nothing behind.
func TestRequestsInFlightAreCountedUntilAnswered(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	h := start(t, nil, func(s *server.Server) {
		s.Admission("test", validating("held.test", "/held", func(ctx context.Context, req admission.Request) admission.Response {
			close(entered)
			<-release
			return admission.Allowed("")
		}), module.Enforce)
	})
	before := testutil.ToFloat64(metrics.InFlight)
	result := make(chan int, 1)
	go func() {
		code, _ := h.post(t, "/held", review("held", admissionv1.Create))
		result <- code
	}()
	<-entered
	if got := testutil.ToFloat64(metrics.InFlight); got != before+1 {
		t.Errorf("in flight while a request is decided: %v, want %v", got, before+1)
	}
	close(release)
	if code := <-result; code != http.StatusOK {
		t.Fatalf("held request got %d", code)
	}
	resp, err := h.client.Get(h.url + "/held")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET got %d, want 405", resp.StatusCode)
	}
	// The handler leaves the count just after its answer is written.
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(metrics.InFlight) != before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := testutil.ToFloat64(metrics.InFlight); got != before {
		t.Errorf("in flight after the answers: %v, want %v", got, before)
	}
}
