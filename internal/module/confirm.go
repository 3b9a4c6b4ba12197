package module

import (
	"context"
	"fmt"
	"time"

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
	// (typically the module's decision over its live reader) and says what
	// came of the denial (Confirmed). Its answer replaces Admit's:
	//   - OutcomeOverturned, an admission: the cache was behind;
	//   - OutcomeExcused, an admission although live state upholds the
	//     denial (pvsafe's bypass label): counted as confirmed;
	//   - OutcomeUpheld, a policy denial: confirmed, and the answer's
	//     message (made from live state) is the one returned;
	//   - OutcomeUnconfirmed: the live state could not be read, and the
	//     module answers from its caches after all; counted undecided,
	//     answered as it is;
	//   - OutcomeUndecided (an error, Undecided, the deadline), or an
	//     outcome its answer contradicts: the request is undecided,
	//     answered Undecided (HTTP 503: the webhook's failurePolicy
	//     applies).
	// LiveDecision reads the outcome from an answer that is only the
	// decision made again. ctx ends at the bound Timeout sets.
	Decide ConfirmFunc
	// Timeout bounds the decision, Admit and Decide together, counted from
	// when Admit was called, so that an answer still reaches the API server
	// inside the webhook's timeoutSeconds. 0: timeoutSeconds less one
	// second (half of a one-second timeout).
	Timeout time.Duration
}

// ConfirmFunc decides again, from live state, a request that Admit denied;
// denial is Admit's answer.
type ConfirmFunc func(ctx context.Context, req admission.Request, denial admission.Response) Confirmed

// Confirmed is a confirmation's answer and what it makes of the denial. The
// outcome travels beside the answer, never in it: nothing the module sets
// in a response (a reason, an audit annotation) is read as an outcome.
type Confirmed struct {
	Outcome  ConfirmOutcome
	Response admission.Response
}

// ConfirmOutcome is what a confirmation made of a denial. It is not a
// string, so that it never compares equal to a metric label by accident
// (Result gives the label).
type ConfirmOutcome int

const (
	// OutcomeNone: no confirmation ran (the decision was no policy
	// denial, or the webhook declares no Confirmation).
	OutcomeNone ConfirmOutcome = iota
	// OutcomeUpheld: live state upholds the denial; Response is the
	// denial, made from live state.
	OutcomeUpheld
	// OutcomeOverturned: live state allows the request (the cache was
	// behind); Response admits it.
	OutcomeOverturned
	// OutcomeExcused: live state upholds the denial, and the request is
	// admitted on other grounds (pvsafe's bypass label, configcheck's
	// failure that stands without the change); Response admits it.
	OutcomeExcused
	// OutcomeUnconfirmed: live state could not be read; Response is the
	// module's answer from its caches after all, answered as it is.
	OutcomeUnconfirmed
	// OutcomeUndecided: the confirmation could not decide (an error, the
	// deadline); the request is answered Undecided.
	OutcomeUndecided
)

func (o ConfirmOutcome) String() string {
	switch o {
	case OutcomeUpheld:
		return "upheld"
	case OutcomeOverturned:
		return "overturned"
	case OutcomeExcused:
		return "excused"
	case OutcomeUnconfirmed:
		return "unconfirmed"
	case OutcomeUndecided:
		return "undecided"
	}
	return "none"
}

// Result is the outcome's value of gatehouse_webhook_confirmations_total's
// result label: an excused denial was confirmed, an unconfirmed one was not.
func (o ConfirmOutcome) Result() string {
	switch o {
	case OutcomeUpheld, OutcomeExcused:
		return ConfirmationConfirmed
	case OutcomeOverturned:
		return ConfirmationOverturned
	}
	return ConfirmationUndecided
}

// Outcomes of a confirmation, as gatehouse_webhook_confirmations_total's
// result label names them (ConfirmOutcome.Result).
const (
	ConfirmationConfirmed  = "confirmed"
	ConfirmationOverturned = "overturned"
	ConfirmationUndecided  = "undecided"
)

// Upheld confirms the denial with resp, the denial made from live state.
func Upheld(resp admission.Response) Confirmed { return Confirmed{OutcomeUpheld, resp} }

// Overturned admits, with resp, a request live state allows.
func Overturned(resp admission.Response) Confirmed { return Confirmed{OutcomeOverturned, resp} }

// Excused admits, with resp, a request live state would deny, on other
// grounds (pvsafe's bypass label), so that it is counted as confirmed, not
// as a cache behind.
func Excused(resp admission.Response) Confirmed { return Confirmed{OutcomeExcused, resp} }

// Unconfirmed answers resp, made from the caches after all because the live
// state could not be read (pvsafe: the cached denial stands, with its
// advice and its bypass): answered as it is, counted as undecided.
func Unconfirmed(resp admission.Response) Confirmed { return Confirmed{OutcomeUnconfirmed, resp} }

// LiveDecision is the outcome of resp, the decision made again from live
// state and nothing more: an admission overturns the denial, a denial
// upholds it, anything else (an error, Undecided) leaves it undecided.
func LiveDecision(resp admission.Response) Confirmed {
	switch ClassOf(resp) {
	case ClassAllowed:
		return Overturned(resp)
	case ClassDenied, ClassNotPermitted:
		return Upheld(resp)
	}
	return Confirmed{OutcomeUndecided, resp}
}

// Decide calls Admit and, when its answer is a policy denial (not
// NotPermitted: a requester's rights are read live already) and the
// webhook declares a Confirmation, confirms the denial. The server and
// offline tools decide through it, so that both take the same path.
func (w Webhook) Decide(ctx context.Context, req admission.Request) Decision {
	start := time.Now()
	first := DecisionOf(w.Admit(ctx, req))
	if w.Confirm == nil || w.Confirm.Decide == nil || first.Class != ClassDenied {
		return first
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(w.confirmTimeout()))
	defer cancel()
	c := w.Confirm.Decide(ctx, req, first.Response)
	d := DecisionOf(c.Response)
	d.Denial, d.Confirmation = first.Response, c.Outcome
	if !c.Outcome.answeredBy(d.Class) {
		// A module's mistake: the outcome its answer contradicts is not
		// guessed at, and the request is left to the failure policy. The
		// answer is not quoted: an admission's message is no caller's to
		// read.
		d = DecisionOf(Undecided(fmt.Sprintf("%s: the confirmation's outcome %q contradicts its answer (%s)", w.Name, c.Outcome, d.Class)))
		d.Denial, d.Confirmation = first.Response, OutcomeUndecided
	} else if c.Outcome == OutcomeUndecided && d.Class != ClassUndecided {
		d = DecisionOf(Undecided(fmt.Sprintf("%s: the denial could not be confirmed against the API server: %s", w.Name, resultMessage(c.Response))))
		d.Denial, d.Confirmation = first.Response, OutcomeUndecided
	}
	return d
}

// answeredBy says whether an answer of class c can carry outcome o.
func (o ConfirmOutcome) answeredBy(c Class) bool {
	switch o {
	case OutcomeOverturned, OutcomeExcused:
		return c == ClassAllowed
	case OutcomeUpheld:
		return c == ClassDenied || c == ClassNotPermitted
	case OutcomeUnconfirmed:
		return true
	case OutcomeUndecided:
		// An admission is no failure to decide.
		return c != ClassAllowed
	}
	return false
}

func (w Webhook) confirmTimeout() time.Duration {
	if w.Confirm.Timeout > 0 {
		return w.Confirm.Timeout
	}
	// A second is kept for the answer; of a one-second timeout, half.
	timeout := time.Duration(w.TimeoutSeconds) * time.Second
	return max(timeout-time.Second, timeout/2)
}

func resultMessage(resp admission.Response) string {
	if resp.Result == nil || resp.Result.Message == "" {
		return "no answer"
	}
	return resp.Result.Message
}
