package module

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func TestConfirmationsAndReasonsAreDeclaredDeliberately(t *testing.T) {
	allow := func(context.Context, admission.Request) admission.Response { return admission.Allowed("") }
	confirm := func(context.Context, admission.Request, admission.Response) Confirmed {
		return Overturned(admission.Allowed(""))
	}
	hook := func(change func(*Webhook)) Webhook {
		w := Webhook{Name: "a.test", Path: "/a", Type: Validating, FailurePolicy: admissionregistrationv1.Fail,
			SideEffects: admissionregistrationv1.SideEffectClassNone, TimeoutSeconds: 5, Admit: allow}
		change(&w)
		return w
	}
	for _, tc := range []struct {
		name string
		w    Webhook
		ok   bool
	}{
		{"a confirmation inside the timeout", hook(func(w *Webhook) { w.Confirm = &Confirmation{Decide: confirm, Timeout: 4 * time.Second} }), true},
		{"the default timeout", hook(func(w *Webhook) { w.Confirm = &Confirmation{Decide: confirm} }), true},
		{"a confirmation as long as the timeout", hook(func(w *Webhook) { w.Confirm = &Confirmation{Decide: confirm, Timeout: 5 * time.Second} }), false},
		{"a confirmation without Decide", hook(func(w *Webhook) { w.Confirm = &Confirmation{} }), false},
		{"declared reasons", hook(func(w *Webhook) { w.DenialReasons = []string{"class-in-use", "tests"} }), true},
		{"a reason that is no short word", hook(func(w *Webhook) { w.DenialReasons = []string{"Class In Use"} }), false},
		{"other declared", hook(func(w *Webhook) { w.DenialReasons = []string{ReasonOther} }), false},
		{"not-permitted declared", hook(func(w *Webhook) { w.DenialReasons = []string{ReasonNotPermittedLabel} }), false},
	} {
		if err := tc.w.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestDenialReasonIsDeclaredOrOther(t *testing.T) {
	declared := []string{"quota"}
	for _, tc := range []struct {
		resp admission.Response
		want string
	}{
		{Deny("quota", "m"), "quota"},
		{Deny("tenant-chosen", "m"), ReasonOther},
		{admission.Denied("no reason"), ReasonOther},
		{NotPermitted("m"), ReasonNotPermittedLabel},
		// Only NotPermitted gives not-permitted.
		{Deny(ReasonNotPermittedLabel, "m"), ReasonOther},
	} {
		if got := DenialReason(DecisionOf(tc.resp), declared); got != tc.want {
			t.Errorf("DenialReason(%v) = %q, want %q", tc.resp.AuditAnnotations, got, tc.want)
		}
	}
}

func TestTheDefaultConfirmationTimeoutLeavesTimeToAnswer(t *testing.T) {
	for seconds, want := range map[int32]time.Duration{10: 9 * time.Second, 3: 2 * time.Second, 1: 500 * time.Millisecond} {
		w := Webhook{TimeoutSeconds: seconds, Confirm: &Confirmation{}}
		if got := w.confirmTimeout(); got != want {
			t.Errorf("timeoutSeconds %d: %v, want %v", seconds, got, want)
		}
	}
}
