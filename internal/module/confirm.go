package module

import (
	"context"
	"fmt"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Confirmation is a webhook's confirm-before-deny. Decisions read informer
// caches, which may be a moment behind the API server (a snapshot ready a
// second ago, a class just created): nothing may be denied from a stale
// cache. So a policy denial of Admit is made once more from the API
// server's live state before it is returned; only denials pay for the live
// reads. The server runs it (Webhook.Decide), counts it in
// gatehouse_webhook_confirmations_total and logs an overturned denial.
type Confirmation struct {
	// Decide makes the decision again from the API server's live state
	// (typically the module's decision over its live reader). Its answer
	// replaces Admit's:
	//   - allowed: the denial is overturned (the cache was behind), unless
	//     it is Excused;
	//   - a policy denial (IsDenial): the denial is confirmed, and the
	//     answer's message (made from live state) is the one returned;
	//   - anything else (an error, Undecided, the deadline): the request
	//     is undecided, answered Undecided (HTTP 503: the webhook's
	//     failurePolicy applies);
	//   - Unconfirmed: the live state could not be read, and the module
	//     answers from its caches after all; counted undecided, answered as
	//     it is.
	// ctx ends at the bound Timeout sets.
	Decide ConfirmFunc
	// Timeout bounds the decision, Admit and Decide together, counted from
	// when Admit was called, so that an answer still reaches the API server
	// inside the webhook's timeoutSeconds. 0: timeoutSeconds less one
	// second (half of a one-second timeout).
	Timeout time.Duration
}

// ConfirmFunc decides again, from live state, a request that Admit denied;
// denial is Admit's answer.
type ConfirmFunc func(ctx context.Context, req admission.Request, denial admission.Response) admission.Response

// Outcomes of a confirmation, as gatehouse_webhook_confirmations_total's
// result label names them.
const (
	ConfirmationConfirmed  = "confirmed"
	ConfirmationOverturned = "overturned"
	ConfirmationUndecided  = "undecided"
)

// Decision is what Webhook.Decide made of a request.
type Decision struct {
	Response admission.Response
	// Confirmation is the confirmation's outcome (Confirmation* constants),
	// "" when none ran.
	Confirmation string
	// Denial is Admit's denial, when a confirmation ran.
	Denial admission.Response
}

// Decide calls Admit and, when its answer is a policy denial (not
// NotPermitted: a requester's rights are read live already) and the
// webhook declares a Confirmation, confirms the denial. The server and
// offline tools decide through it, so that both take the same path.
func (w Webhook) Decide(ctx context.Context, req admission.Request) Decision {
	start := time.Now()
	resp := w.Admit(ctx, req)
	if w.Confirm == nil || w.Confirm.Decide == nil || !IsDenial(resp) || IsNotPermitted(resp) {
		return Decision{Response: resp}
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(w.confirmTimeout()))
	defer cancel()
	live, unconfirmed := takeUnconfirmed(w.Confirm.Decide(ctx, req, resp))
	d := Decision{Response: live, Denial: resp}
	switch {
	case unconfirmed:
		d.Confirmation = ConfirmationUndecided
	case live.Allowed && !isExcused(live):
		d.Confirmation = ConfirmationOverturned
	case live.Allowed || IsDenial(live):
		d.Confirmation = ConfirmationConfirmed
	default:
		d.Confirmation = ConfirmationUndecided
		if !IsUndecided(live) {
			d.Response = Undecided(fmt.Sprintf("%s: the denial could not be confirmed against the API server: %s", w.Name, resultMessage(live)))
		}
	}
	return d
}

func (w Webhook) confirmTimeout() time.Duration {
	if w.Confirm.Timeout > 0 {
		return w.Confirm.Timeout
	}
	// A second is kept for the answer; of a one-second timeout, half.
	timeout := time.Duration(w.TimeoutSeconds) * time.Second
	return max(timeout-time.Second, timeout/2)
}

// reasonExcused marks an allowed answer of a confirmation that upheld the
// denial and admitted the request on other grounds. It is internal: the
// server never writes an allowed answer's status.
const reasonExcused metav1.StatusReason = "GatehouseExcused"

// Excused marks resp, an admission a confirmation makes although live state
// upholds the denial (pvsafe's bypass label, configcheck's failure that
// stands without the change), so that it is counted as confirmed, not as
// a cache behind.
func Excused(resp admission.Response) admission.Response {
	if resp.Result == nil {
		resp.Result = &metav1.Status{}
	}
	resp.Result.Reason = reasonExcused
	return resp
}

func isExcused(resp admission.Response) bool {
	return resp.Result != nil && resp.Result.Reason == reasonExcused
}

// unconfirmedKey marks an Unconfirmed answer among its audit annotations
// until Decide takes it off: it never reaches the API server.
const unconfirmedKey = "gatehouse-unconfirmed"

// Unconfirmed marks resp, a confirmation's answer made from the caches
// after all because the live state could not be read (pvsafe: the cached
// denial stands, with its advice and its bypass), so that it is answered as
// it is and counted as undecided.
func Unconfirmed(resp admission.Response) admission.Response {
	annotations := make(map[string]string, len(resp.AuditAnnotations)+1)
	maps.Copy(annotations, resp.AuditAnnotations)
	annotations[unconfirmedKey] = "true"
	resp.AuditAnnotations = annotations
	return resp
}

func takeUnconfirmed(resp admission.Response) (admission.Response, bool) {
	if _, ok := resp.AuditAnnotations[unconfirmedKey]; !ok {
		return resp, false
	}
	annotations := maps.Clone(resp.AuditAnnotations)
	delete(annotations, unconfirmedKey)
	if len(annotations) == 0 {
		annotations = nil
	}
	resp.AuditAnnotations = annotations
	return resp, true
}

func resultMessage(resp admission.Response) string {
	if resp.Result == nil || resp.Result.Message == "" {
		return "no answer"
	}
	return resp.Result.Message
}
