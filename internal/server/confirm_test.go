package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// confirmed declares a validating webhook whose Admit answers first and
// whose confirmation answers live, counting the confirmation's calls.
func confirmed(name string, first admission.Response, live func(ctx context.Context) module.Confirmed, calls *atomic.Int32) module.Webhook {
	w := validating(name, "/"+name, func(context.Context, admission.Request) admission.Response { return first })
	w.DenialReasons = []string{"cached-reason", "live-reason"}
	w.Confirm = &module.Confirmation{Decide: func(ctx context.Context, _ admission.Request, denial admission.Response) module.Confirmed {
		calls.Add(1)
		if denial.Result == nil || denial.Result.Message != first.Result.Message {
			return module.LiveDecision(admission.Errored(http.StatusInternalServerError, errors.New("the confirmation was not handed Admit's denial")))
		}
		return live(ctx)
	}}
	return w
}

func answer(c module.Confirmed) func(context.Context) module.Confirmed {
	return func(context.Context) module.Confirmed { return c }
}

// The server confirms a policy denial before it answers: a confirmation
// that allows overturns it, one that denies answers with its own message,
// one that cannot decide answers undecided (503), unless it answers from the
// caches after all (Unconfirmed); an allow, an error and a NotPermitted
// refusal are never confirmed. Each outcome is counted with the module
// label, as the confirmation's outcome says, not as its answer looks: the
// same admission is overturned, excused or unconfirmed, the same denial
// upheld or unconfirmed. No answer carries anything but the module's own
// fields and the reason.
func TestTheServerConfirmsDenialsBeforeAnswering(t *testing.T) {
	cached := module.Deny("cached-reason", "denied from the cache")
	liveDenial := module.Deny("live-reason", "denied from the API server")
	liveAdmission := admission.Allowed("admitted live")
	cases := []struct {
		name      string
		first     admission.Response
		live      func(context.Context) module.Confirmed
		calls     int32
		code      int
		allowed   bool
		message   string
		result    string // the confirmation's outcome, "" for none
		decision  string
		reason    string
		annotated string
	}{
		{name: "overturned", first: cached, live: answer(module.Overturned(liveAdmission)), calls: 1, code: 200, allowed: true,
			result: module.ConfirmationOverturned, decision: metrics.DecisionAllowed},
		{name: "live-allowed", first: cached, live: answer(module.LiveDecision(liveAdmission)), calls: 1, code: 200, allowed: true,
			result: module.ConfirmationOverturned, decision: metrics.DecisionAllowed},
		{name: "confirmed", first: cached, live: answer(module.Upheld(liveDenial)), calls: 1, code: 200, message: "denied from the API server",
			result: module.ConfirmationConfirmed, decision: metrics.DecisionDenied, reason: "live-reason", annotated: "live-reason"},
		{name: "live-denied", first: cached, live: answer(module.LiveDecision(liveDenial)), calls: 1, code: 200, message: "denied from the API server",
			result: module.ConfirmationConfirmed, decision: metrics.DecisionDenied, reason: "live-reason", annotated: "live-reason"},
		{name: "excused", first: cached, live: answer(module.Excused(liveAdmission)), calls: 1, code: 200, allowed: true,
			result: module.ConfirmationConfirmed, decision: metrics.DecisionAllowed},
		{name: "failed", first: cached, live: answer(module.LiveDecision(admission.Errored(http.StatusInternalServerError, errors.New("connection refused")))), calls: 1,
			code: http.StatusServiceUnavailable, message: "confirm-failed: the denial could not be confirmed against the API server: connection refused",
			result: module.ConfirmationUndecided, decision: metrics.DecisionUndecided},
		{name: "undecided", first: cached, live: answer(module.LiveDecision(module.Undecided("live lists took too long"))), calls: 1,
			code: http.StatusServiceUnavailable, message: "live lists took too long",
			result: module.ConfirmationUndecided, decision: metrics.DecisionUndecided},
		{name: "unconfirmed", first: cached, live: answer(module.Unconfirmed(module.Deny("cached-reason", "denied from the cache after all"))), calls: 1,
			code: 200, message: "denied from the cache after all", result: module.ConfirmationUndecided, decision: metrics.DecisionDenied, reason: "cached-reason", annotated: "cached-reason"},
		{name: "unconfirmed-admission", first: cached, live: answer(module.Unconfirmed(liveAdmission)), calls: 1, code: 200, allowed: true,
			result: module.ConfirmationUndecided, decision: metrics.DecisionAllowed},
		{name: "contradicted", first: cached, live: answer(module.Overturned(liveDenial)), calls: 1,
			code: http.StatusServiceUnavailable, message: `confirm-contradicted: the confirmation's outcome \"overturned\" contradicts its answer (denied)`,
			result: module.ConfirmationUndecided, decision: metrics.DecisionUndecided},
		{name: "timeout", first: cached, live: func(ctx context.Context) module.Confirmed {
			<-ctx.Done()
			return module.LiveDecision(admission.Errored(http.StatusInternalServerError, ctx.Err()))
		}, calls: 1, code: http.StatusServiceUnavailable, message: "context deadline exceeded",
			result: module.ConfirmationUndecided, decision: metrics.DecisionUndecided},
		{name: "allowed", first: admission.Allowed("fine"), live: answer(module.Upheld(liveDenial)), calls: 0, code: 200, allowed: true, decision: metrics.DecisionAllowed},
		{name: "errored", first: admission.Errored(http.StatusBadRequest, errors.New("bad object")), live: answer(module.Overturned(liveAdmission)), calls: 0,
			code: 200, message: "bad object", decision: metrics.DecisionErrored},
		{name: "not-permitted", first: module.NotPermitted("you may not"), live: answer(module.Overturned(liveAdmission)), calls: 0, code: 200,
			message: "you may not", decision: metrics.DecisionDenied, reason: module.ReasonNotPermittedLabel, annotated: module.ReasonNotPermittedLabel},
	}
	calls := make([]atomic.Int32, len(cases))
	h := start(t, nil, func(s *server.Server) {
		for i, tc := range cases {
			w := confirmed("confirm-"+tc.name, tc.first, tc.live, &calls[i])
			if tc.name == "timeout" {
				w.Confirm.Timeout = 200 * time.Millisecond
			}
			s.Admission("confirmtest", w, module.Enforce)
		}
	})
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hook := "confirm-" + tc.name
			results := map[string]float64{}
			for _, r := range []string{module.ConfirmationConfirmed, module.ConfirmationOverturned, module.ConfirmationUndecided} {
				results[r] = testutil.ToFloat64(metrics.Confirmations.WithLabelValues(hook, "confirmtest", r))
			}
			decided := testutil.ToFloat64(metrics.Requests.WithLabelValues(hook, "confirmtest", "CREATE", tc.decision))
			var denials float64
			if tc.reason != "" {
				denials = testutil.ToFloat64(metrics.Denials.WithLabelValues(hook, "confirmtest", tc.reason, metrics.DecisionDenied))
			}

			code, body := h.post(t, "/"+hook, review("uid-"+tc.name, admissionv1.Create))
			if code != tc.code {
				t.Fatalf("HTTP %d, want %d: %s", code, tc.code, body)
			}
			if code == 200 {
				resp := decodeResponse(t, body)
				if resp.Allowed != tc.allowed {
					t.Fatalf("allowed %v, want %v: %s", resp.Allowed, tc.allowed, body)
				}
				if tc.message != "" && (resp.Result == nil || resp.Result.Message != tc.message) {
					t.Fatalf("answer %s, want the message %q", body, tc.message)
				}
				if got := resp.AuditAnnotations[module.ReasonAnnotation]; got != tc.annotated {
					t.Fatalf("audit annotation reason %q, want %q", got, tc.annotated)
				}
				// The outcome travels beside the answer: nothing of it is
				// written (the allowed answer's status goes, the denial's
				// is the module's, the one annotation is the reason).
				for key := range resp.AuditAnnotations {
					if key != module.ReasonAnnotation {
						t.Fatalf("the answer carries the audit annotation %q: %s", key, body)
					}
				}
				if resp.Allowed && resp.Result != nil {
					t.Fatalf("an admission carries a status: %s", body)
				}
				if !resp.Allowed && resp.Result.Reason != "" && resp.Result.Reason != metav1.StatusReasonForbidden && resp.Result.Reason != module.ReasonNotPermitted {
					t.Fatalf("a denial carries the reason %q: %s", resp.Result.Reason, body)
				}
			} else if !strings.Contains(string(body), tc.message) {
				t.Fatalf("503 body %s lacks %q", body, tc.message)
			}
			if got := calls[i].Load(); got != tc.calls {
				t.Fatalf("the confirmation ran %d times, want %d", got, tc.calls)
			}
			for r, before := range results {
				want := before
				if r == tc.result {
					want++
				}
				if got := testutil.ToFloat64(metrics.Confirmations.WithLabelValues(hook, "confirmtest", r)); got != want {
					t.Errorf("confirmations{result=%q} went from %v to %v, want %v", r, before, got, want)
				}
			}
			if got := testutil.ToFloat64(metrics.Requests.WithLabelValues(hook, "confirmtest", "CREATE", tc.decision)); got != decided+1 {
				t.Errorf("requests{decision=%q} went from %v to %v", tc.decision, decided, got)
			}
			if tc.reason != "" {
				if got := testutil.ToFloat64(metrics.Denials.WithLabelValues(hook, "confirmtest", tc.reason, metrics.DecisionDenied)); got != denials+1 {
					t.Errorf("denials{reason=%q} went from %v to %v", tc.reason, denials, got)
				}
			}
		})
	}
}

// Warn mode applies to the confirmed answer: a denial the API server
// upholds becomes warnings carrying the confirmation's message, one it
// overturns warns of nothing.
func TestWarnModeAppliesAfterTheConfirmation(t *testing.T) {
	var upheld, overturned atomic.Int32
	cached := module.Deny("cached-reason", "denied from the cache")
	h := start(t, nil, func(s *server.Server) {
		s.Admission("confirmwarn", confirmed("warn-upheld", cached, answer(module.Upheld(module.Deny("live-reason", "denied from the API server"))), &upheld), module.Warn)
		s.Admission("confirmwarn", confirmed("warn-overturned", cached, answer(module.Overturned(admission.Allowed(""))), &overturned), module.Warn)
	})
	warned := metrics.Denials.WithLabelValues("warn-upheld", "confirmwarn", "live-reason", metrics.DecisionWarned)
	before := testutil.ToFloat64(warned)
	code, body := h.post(t, "/warn-upheld", review("uid-warn-1", admissionv1.Create))
	resp := decodeResponse(t, body)
	if code != 200 || !resp.Allowed || len(resp.Warnings) != 2 || resp.Warnings[1] != "denied from the API server" {
		t.Fatalf("upheld denial in warn mode: HTTP %d %s", code, body)
	}
	if resp.AuditAnnotations[module.ReasonAnnotation] != "live-reason" {
		t.Fatalf("the warned request's audit annotations %v lack its reason", resp.AuditAnnotations)
	}
	if got := testutil.ToFloat64(warned); got != before+1 {
		t.Fatalf("denials{decision=warned} went from %v to %v", before, got)
	}
	code, body = h.post(t, "/warn-overturned", review("uid-warn-2", admissionv1.Create))
	if resp := decodeResponse(t, body); code != 200 || !resp.Allowed || len(resp.Warnings) != 0 {
		t.Fatalf("overturned denial in warn mode: HTTP %d %s", code, body)
	}
	if upheld.Load() != 1 || overturned.Load() != 1 {
		t.Fatalf("confirmations ran %d and %d times", upheld.Load(), overturned.Load())
	}
}

// Whatever reason a denial carries (here the request's name, a tenant's to
// choose), the metric and the audit annotation name a declared reason or
// "other": the series stay the declared ones.
func TestDenialReasonsStayBounded(t *testing.T) {
	w := validating("reasons.test", "/reasons", func(_ context.Context, req admission.Request) admission.Response {
		if req.Name == "declared" {
			return module.Deny("quota", "over quota")
		}
		return module.Deny(req.Name, "denied for "+req.Name)
	})
	w.DenialReasons = []string{"quota"}
	h := start(t, nil, func(s *server.Server) { s.Admission("reasons", w, module.Enforce) })
	series := func() int {
		families, err := ctrlRegistryGather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range families {
			if f.GetName() != "gatehouse_webhook_denials_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "webhook" && l.GetValue() == "reasons.test" {
						n++
					}
				}
			}
		}
		return n
	}
	other := metrics.Denials.WithLabelValues("reasons.test", "reasons", module.ReasonOther, metrics.DecisionDenied)
	quota := metrics.Denials.WithLabelValues("reasons.test", "reasons", "quota", metrics.DecisionDenied)
	before := series()
	for i := range 50 {
		code, out := h.post(t, "/reasons", reviewNamed(t, fmt.Sprintf("uid-r%d", i), fmt.Sprintf("tenant-chosen-%d", i)))
		resp := decodeResponse(t, out)
		if code != 200 || resp.Allowed || resp.AuditAnnotations[module.ReasonAnnotation] != module.ReasonOther {
			t.Fatalf("HTTP %d: %s", code, out)
		}
	}
	if _, out := h.post(t, "/reasons", reviewNamed(t, "uid-declared", "declared")); decodeResponse(t, out).AuditAnnotations[module.ReasonAnnotation] != "quota" {
		t.Fatalf("a declared reason was not kept: %s", out)
	}
	if got := series(); got != before || got != 2 {
		t.Fatalf("%d series of gatehouse_webhook_denials_total for the webhook (%d before), want 2: quota and other", got, before)
	}
	if testutil.ToFloat64(other) != 50 || testutil.ToFloat64(quota) != 1 {
		t.Fatalf("other %v, quota %v", testutil.ToFloat64(other), testutil.ToFloat64(quota))
	}
}

// --log-decisions: denied (the default) logs allows at V(1) only, all logs
// them at info, none logs no decision.
func TestLogDecisionsChoosesWhatIsLoggedAtInfo(t *testing.T) {
	for _, tc := range []struct {
		mode             server.LogDecisions
		allowed, denied  bool
		allowedVerbosity int
	}{
		{"", false, true, 1},
		{server.LogDeniedDecisions, false, true, 1},
		{server.LogAllDecisions, true, true, 0},
		{server.LogNoDecisions, false, false, -1},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			var (
				mu    sync.Mutex
				lines []string
			)
			sink := funcr.NewJSON(func(obj string) {
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, obj)
			}, funcr.Options{Verbosity: 1})
			h := start(t, func(o *server.Options) { o.Log = sink; o.LogDecisions = tc.mode }, func(s *server.Server) {
				s.Admission("test", validating("allow.test", "/allow", func(context.Context, admission.Request) admission.Response { return admission.Allowed("") }), module.Enforce)
				s.Admission("test", validating("deny.test", "/deny", denyAll), module.Enforce)
			})
			h.post(t, "/allow", review("uid-allow", admissionv1.Create))
			h.post(t, "/deny", review("uid-deny", admissionv1.Create))
			mu.Lock()
			defer mu.Unlock()
			level := func(uid string) int {
				for _, l := range lines {
					if strings.Contains(l, `"msg":"admission decision"`) && strings.Contains(l, `"uid":"`+uid+`"`) {
						if strings.Contains(l, `"level":1`) {
							return 1
						}
						return 0
					}
				}
				return -1
			}
			if got := level("uid-allow"); got != tc.allowedVerbosity {
				t.Errorf("allowed decision logged at V(%d), want V(%d) (-1: not at all)", got, tc.allowedVerbosity)
			}
			if got := level("uid-deny"); (got == 0) != tc.denied {
				t.Errorf("denied decision logged at V(%d), want at info: %v", got, tc.denied)
			}
		})
	}
}

func ctrlRegistryGather() ([]*dto.MetricFamily, error) { return ctrlmetrics.Registry.Gather() }

// reviewNamed is review's CREATE of an object named name.
func reviewNamed(t *testing.T, uid, name string) []byte {
	t.Helper()
	var r admissionv1.AdmissionReview
	if err := json.Unmarshal(review(uid, admissionv1.Create), &r); err != nil {
		t.Fatal(err)
	}
	r.Request.Name = name
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
