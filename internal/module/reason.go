package module

import (
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// ReasonAnnotation is the audit annotation a denial's reason travels in.
// The API server records a webhook's audit annotations prefixed with its
// name ("pvsafe.gatehouse.dev/reason": "claim-would-lose-data"), so the
// audit log says why without parsing the message; a prefixed key of our
// own would be refused there.
const ReasonAnnotation = "reason"

// Reasons every webhook may give without declaring them.
const (
	// ReasonOther counts a denial whose reason the webhook did not declare
	// (or gave none): the label set stays the declared one.
	ReasonOther = "other"
	// ReasonNotPermittedLabel is NotPermitted's reason.
	ReasonNotPermittedLabel = "not-permitted"
)

// Deny refuses a request on the policy's merits, for reason: one of the
// webhook's DenialReasons, a short fixed word (never from the request), so
// that gatehouse_webhook_denials_total and the audit log say why.
func Deny(reason, message string) admission.Response {
	resp := admission.Denied(message)
	resp.AuditAnnotations = map[string]string{ReasonAnnotation: reason}
	return resp
}

// WithReason gives a denial made otherwise (with causes, warnings) its
// reason.
func WithReason(resp admission.Response, reason string) admission.Response {
	if resp.AuditAnnotations == nil {
		resp.AuditAnnotations = map[string]string{}
	}
	resp.AuditAnnotations[ReasonAnnotation] = reason
	return resp
}

// DenialReason is the reason d's denial carries, bounded by declared: a
// reason not declared, or none, is ReasonOther; not-permitted is
// NotPermitted's only.
func DenialReason(d Decision, declared []string) string {
	reason := d.Response.AuditAnnotations[ReasonAnnotation]
	if reason == ReasonNotPermittedLabel && d.Class == ClassNotPermitted {
		return reason
	}
	if reason == "" || !slices.Contains(declared, reason) {
		return ReasonOther
	}
	return reason
}
