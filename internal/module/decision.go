package module

import (
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Class is what a decision amounts to. Modules answer with an
// admission.Response, so that they stay portable; the server reads the
// class from it once (ClassOf) and decides by the class alone what to
// confirm, what warn mode relaxes, what it counts and logs, and which HTTP
// status it answers with.
type Class int

const (
	// ClassAllowed admits the request.
	ClassAllowed Class = iota
	// ClassDenied is a policy denial (403, or no code): confirmed before it
	// is returned, relaxed into warnings in warn mode.
	ClassDenied
	// ClassNotPermitted is a denial because the requester lacks a right the
	// request would exercise through Gatehouse (NotPermitted): a live
	// decision already, enforced in every mode.
	ClassNotPermitted
	// ClassWarned is a policy denial warn mode turned into an admission
	// with warnings (Enforcement.Apply); ClassOf never returns it.
	ClassWarned
	// ClassUndecided is a failure to decide in time (Undecided): answered
	// with HTTP 503, so that the webhook's failurePolicy applies at once.
	ClassUndecided
	// ClassErrored is any other failure to decide (a code other than 403
	// and 503's Undecided): never confirmed, never relaxed.
	ClassErrored
)

// String names the class in tests and logs.
func (c Class) String() string {
	switch c {
	case ClassAllowed:
		return "allowed"
	case ClassDenied:
		return "denied"
	case ClassNotPermitted:
		return "not-permitted"
	case ClassWarned:
		return "warned"
	case ClassUndecided:
		return "undecided"
	case ClassErrored:
		return "errored"
	}
	return "unknown"
}

// IsDenial reports a denial, relaxed by warn mode or not: one the server
// counts in gatehouse_webhook_denials_total with its reason.
func (c Class) IsDenial() bool {
	return c == ClassDenied || c == ClassNotPermitted || c == ClassWarned
}

// Admits reports an answer that admits the request, with warnings or not.
func (c Class) Admits() bool { return c == ClassAllowed || c == ClassWarned }

// ClassOf is the one place a response's class is read from its fields: the
// constructors (Deny, NotPermitted, Undecided, admission.Errored) say what
// they answer through them, and nothing else does.
func ClassOf(resp admission.Response) Class {
	switch {
	case resp.Allowed:
		return ClassAllowed
	case resp.Result == nil || resp.Result.Code == 0 || resp.Result.Code == http.StatusForbidden:
		if resp.Result != nil && resp.Result.Reason == ReasonNotPermitted {
			return ClassNotPermitted
		}
		return ClassDenied
	case resp.Result.Code == http.StatusServiceUnavailable && resp.Result.Reason == metav1.StatusReasonServiceUnavailable:
		return ClassUndecided
	}
	return ClassErrored
}

// Decision is what Webhook.Decide made of a request: the answer, its class,
// and the confirmation's outcome when one ran.
type Decision struct {
	Response admission.Response
	// Class is the answer's: ClassOf(Response), or ClassWarned once warn
	// mode relaxed a denial.
	Class Class
	// Confirmation is the confirmation's outcome, OutcomeNone when none ran.
	Confirmation ConfirmOutcome
	// Denial is Admit's denial, when a confirmation ran.
	Denial admission.Response
}

// DecisionOf is the decision answering resp, with no confirmation: the
// server's own answers (a kind the webhook does not judge, a withdrawn
// module, a panic) and a webhook without a confirmation.
func DecisionOf(resp admission.Response) Decision {
	return Decision{Response: resp, Class: ClassOf(resp)}
}
