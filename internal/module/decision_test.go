package module

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func answer(allowed bool, status *metav1.Status) admission.Response {
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: allowed, Result: status}}
}

// TestClassOfEveryKindOfResponse: the class is read from a response in
// ClassOf alone, for every kind of answer a module or the server makes.
func TestClassOfEveryKindOfResponse(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp admission.Response
		want Class
	}{
		{"allowed", admission.Allowed(""), ClassAllowed},
		{"allowed with a message", admission.Allowed("fine"), ClassAllowed},
		{"allowed with warnings", admission.Allowed("").WithWarnings("careful"), ClassAllowed},
		{"a patch", admission.Patched(""), ClassAllowed},
		// Whatever status an admission carries, it admits.
		{"allowed with NotPermitted's reason", answer(true, &metav1.Status{Code: 403, Reason: ReasonNotPermitted}), ClassAllowed},
		{"allowed with Undecided's status", answer(true, &metav1.Status{Code: 503, Reason: metav1.StatusReasonServiceUnavailable}), ClassAllowed},
		{"admission.Denied", admission.Denied("no"), ClassDenied},
		{"Deny", Deny("quota", "over quota"), ClassDenied},
		{"a denial with no status", answer(false, nil), ClassDenied},
		{"a denial with no code", answer(false, &metav1.Status{Message: "no"}), ClassDenied},
		{"a 403 of another reason", answer(false, &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden}), ClassDenied},
		{"NotPermitted", NotPermitted("you may not"), ClassNotPermitted},
		{"NotPermitted's reason, no code", answer(false, &metav1.Status{Reason: ReasonNotPermitted}), ClassNotPermitted},
		{"NotPermitted given another audit reason", WithReason(NotPermitted("you may not"), "quota"), ClassNotPermitted},
		{"NotPermitted's reason on an error", answer(false, &metav1.Status{Code: http.StatusInternalServerError, Reason: ReasonNotPermitted}), ClassErrored},
		{"Undecided", Undecided("queue too long"), ClassUndecided},
		{"a 503 without Undecided's reason", admission.Errored(http.StatusServiceUnavailable, errors.New("down")), ClassErrored},
		{"Undecided's reason on a 500", answer(false, &metav1.Status{Code: http.StatusInternalServerError, Reason: metav1.StatusReasonServiceUnavailable}), ClassErrored},
		{"a bad request", admission.Errored(http.StatusBadRequest, errors.New("bad object")), ClassErrored},
		{"a panic's answer", admission.Errored(http.StatusInternalServerError, errors.New("internal error")), ClassErrored},
	} {
		if got := ClassOf(tc.resp); got != tc.want {
			t.Errorf("%s: ClassOf = %s, want %s", tc.name, got, tc.want)
		}
		// Warn mode relaxes a policy denial, and nothing else.
		want := tc.want
		if want == ClassDenied {
			want = ClassWarned
		}
		if got := ClassOf(tc.resp); got.Admits() != tc.resp.Allowed {
			t.Errorf("%s: %s admits: %v", tc.name, got, got.Admits())
		}
		if d := Warn.Apply("m", DecisionOf(tc.resp)); d.Class != want || d.Response.Allowed != d.Class.Admits() {
			t.Errorf("%s: in warn mode %s (allowed %v), want %s", tc.name, d.Class, d.Response.Allowed, want)
		}
		if d := Enforce.Apply("m", DecisionOf(tc.resp)); d.Class != tc.want {
			t.Errorf("%s: enforced as %s", tc.name, d.Class)
		}
	}
}

// TestDecideTakesTheOutcomeFromTheConfirmation: what a confirmation made of
// a denial is the outcome it returns beside its answer, never read from the
// answer; an outcome the answer contradicts (or none) leaves the request
// undecided, and an undecided answer is Undecided's 503.
func TestDecideTakesTheOutcomeFromTheConfirmation(t *testing.T) {
	cached := Deny("cached", "denied from the cache")
	allowed := admission.Allowed("admitted")
	denied := Deny("live", "denied live")
	errored := admission.Errored(http.StatusInternalServerError, errors.New("connection refused"))
	for _, tc := range []struct {
		name    string
		live    Confirmed
		outcome ConfirmOutcome
		result  string
		class   Class
		message string // the answer's, when it is not the confirmation's
	}{
		{"overturned", Overturned(allowed), OutcomeOverturned, ConfirmationOverturned, ClassAllowed, ""},
		{"excused", Excused(allowed), OutcomeExcused, ConfirmationConfirmed, ClassAllowed, ""},
		{"upheld", Upheld(denied), OutcomeUpheld, ConfirmationConfirmed, ClassDenied, ""},
		{"upheld by NotPermitted", Upheld(NotPermitted("you may not")), OutcomeUpheld, ConfirmationConfirmed, ClassNotPermitted, ""},
		{"unconfirmed denial", Unconfirmed(cached), OutcomeUnconfirmed, ConfirmationUndecided, ClassDenied, ""},
		{"unconfirmed admission", Unconfirmed(allowed), OutcomeUnconfirmed, ConfirmationUndecided, ClassAllowed, ""},
		{"undecided", LiveDecision(Undecided("too slow")), OutcomeUndecided, ConfirmationUndecided, ClassUndecided, ""},
		{"errored", LiveDecision(errored), OutcomeUndecided, ConfirmationUndecided, ClassUndecided,
			"w.test: the denial could not be confirmed against the API server: connection refused"},
		{"live allowed", LiveDecision(allowed), OutcomeOverturned, ConfirmationOverturned, ClassAllowed, ""},
		{"live denied", LiveDecision(denied), OutcomeUpheld, ConfirmationConfirmed, ClassDenied, ""},
		// A module's mistakes fail to the failure policy.
		{"overturned by a denial", Overturned(denied), OutcomeUndecided, ConfirmationUndecided, ClassUndecided, `w.test: the confirmation's outcome "overturned" contradicts its answer (denied)`},
		{"excused by an error", Excused(errored), OutcomeUndecided, ConfirmationUndecided, ClassUndecided, `w.test: the confirmation's outcome "excused" contradicts its answer (errored)`},
		{"upheld by an admission", Upheld(allowed), OutcomeUndecided, ConfirmationUndecided, ClassUndecided, `w.test: the confirmation's outcome "upheld" contradicts its answer (allowed)`},
		{"undecided by an admission", Confirmed{OutcomeUndecided, allowed}, OutcomeUndecided, ConfirmationUndecided, ClassUndecided, `contradicts its answer (allowed)`},
		{"no outcome", Confirmed{Response: allowed}, OutcomeUndecided, ConfirmationUndecided, ClassUndecided, `w.test: the confirmation's outcome "none" contradicts its answer (allowed)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := Webhook{Name: "w.test", TimeoutSeconds: 5,
				Admit: func(context.Context, admission.Request) admission.Response { return cached },
				Confirm: &Confirmation{Decide: func(_ context.Context, _ admission.Request, denial admission.Response) Confirmed {
					if denial.Result.Message != cached.Result.Message {
						t.Errorf("the confirmation was handed %+v", denial.Result)
					}
					return tc.live
				}}}
			d := w.Decide(context.Background(), admission.Request{})
			if d.Confirmation != tc.outcome || d.Confirmation.Result() != tc.result || d.Class != tc.class || d.Class != ClassOf(d.Response) {
				t.Fatalf("outcome %q (%s), class %s (of the answer: %s); want %q (%s), %s",
					d.Confirmation, d.Confirmation.Result(), d.Class, ClassOf(d.Response), tc.outcome, tc.result, tc.class)
			}
			if d.Denial.Result.Message != cached.Result.Message {
				t.Fatalf("the denial %+v is not Admit's", d.Denial.Result)
			}
			want := tc.live.Response
			if tc.message != "" {
				if !strings.Contains(d.Response.Result.Message, tc.message) {
					t.Fatalf("answer %q, want %q", d.Response.Result.Message, tc.message)
				}
			} else if d.Response.Allowed != want.Allowed || d.Response.Result.Message != want.Result.Message {
				t.Fatalf("answer %+v, want the confirmation's %+v", d.Response.Result, want.Result)
			}
			if d.Response.Allowed && tc.message != "" {
				t.Fatal("a contradicted outcome admitted")
			}
		})
	}
}

// TestOnlyAPolicyDenialIsConfirmed: an admission, an error, Undecided and
// NotPermitted are answered as Admit made them.
func TestOnlyAPolicyDenialIsConfirmed(t *testing.T) {
	for _, first := range []admission.Response{
		admission.Allowed(""), admission.Errored(http.StatusBadRequest, errors.New("bad")), Undecided("later"), NotPermitted("you may not"),
	} {
		w := Webhook{Name: "w.test", TimeoutSeconds: 5,
			Admit: func(context.Context, admission.Request) admission.Response { return first },
			Confirm: &Confirmation{Decide: func(context.Context, admission.Request, admission.Response) Confirmed {
				t.Errorf("%s confirmed", ClassOf(first))
				return Overturned(admission.Allowed(""))
			}}}
		if d := w.Decide(context.Background(), admission.Request{}); d.Confirmation != OutcomeNone || d.Class != ClassOf(first) {
			t.Errorf("%s: decided %s, confirmation %q", ClassOf(first), d.Class, d.Confirmation)
		}
	}
}
