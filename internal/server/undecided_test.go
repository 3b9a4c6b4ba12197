package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// An undecided admission is a failed call, not an answer: HTTP 503 with a
// Status body, so that the API server applies the webhook's failurePolicy at
// once. Warn mode leaves it alone (it is not a denial).
func TestUndecidedIsAnswered503WithAStatus(t *testing.T) {
	undecided := func(ctx context.Context, req admission.Request) admission.Response {
		return module.Undecided("queue too long")
	}
	cases := []struct {
		name, hook, path string
		mode             module.Enforcement
	}{
		{"enforce", "undecided.test", "/undecided", module.Enforce},
		{"warn", "undecided-warn.test", "/undecided-warn", module.Warn},
	}
	h := start(t, nil, func(s *server.Server) {
		for _, tc := range cases {
			s.Admission("test", validating(tc.hook, tc.path, undecided), tc.mode)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			undecided := metrics.Requests.WithLabelValues(tc.hook, "test", "CREATE", metrics.DecisionUndecided)
			before := testutil.ToFloat64(undecided)
			resp, err := h.client.Post(h.url+tc.path, "application/json", bytes.NewReader(review("uid-503", admissionv1.Create)))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]any
			var status metav1.Status
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("HTTP %d, want 503: %s", resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if err := json.Unmarshal(body, &raw); err != nil {
				t.Fatalf("body is not JSON: %v: %s", err, body)
			}
			if err := json.Unmarshal(body, &status); err != nil {
				t.Fatalf("body is not a Status: %v: %s", err, body)
			}
			if status.Kind != "Status" || status.APIVersion != "v1" || status.Code != http.StatusServiceUnavailable ||
				status.Message != "queue too long" || status.Status != metav1.StatusFailure ||
				status.Reason != metav1.StatusReasonServiceUnavailable {
				t.Fatalf("status %+v, want kind Status, apiVersion v1, code 503, message %q: %s", status, "queue too long", body)
			}
			if _, ok := raw["response"]; ok {
				t.Fatalf("a 503 carries an AdmissionReview response: %s", body)
			}
			if after := testutil.ToFloat64(undecided); after != before+1 {
				t.Fatalf("undecided decisions went from %v to %v", before, after)
			}
		})
	}
}

// TestWithdrawnModuleIsUndecided: once a module is withdrawn (it failed
// while running), its webhooks answer 503 without calling it, and another
// module's webhook still decides.
func TestWithdrawnModuleIsUndecided(t *testing.T) {
	var called bool
	admit := func(ctx context.Context, req admission.Request) admission.Response {
		called = true
		return admission.Denied("no")
	}
	var srv *server.Server
	h := start(t, nil, func(s *server.Server) {
		srv = s
		s.Admission("gone", validating("gone.test", "/gone", admit), module.Enforce)
		s.Admission("kept", validating("kept.test", "/kept", func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("")
		}), module.Enforce)
	})
	srv.Withdraw("gone")
	post := func(path string) int {
		resp, err := h.client.Post(h.url+path, "application/json", bytes.NewReader(review("uid-withdrawn", admissionv1.Create)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if code := post("/gone"); code != http.StatusServiceUnavailable || called {
		t.Fatalf("a withdrawn module's webhook: HTTP %d, module called %v; want 503 without calling it", code, called)
	}
	if code := post("/kept"); code != http.StatusOK {
		t.Fatalf("another module's webhook: HTTP %d, want 200", code)
	}
}
