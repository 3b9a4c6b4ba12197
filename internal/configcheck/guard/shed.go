package guard

import (
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// An admission is shed when Gatehouse has no capacity to decide it in time:
// its party already has as many waiting as it may (fair.ErrFull), no turn,
// render worker or haproxy -c slot came before its deadline, or the check
// could not finish before it. The module's concurrency is taken there and
// only there, after the config's fair turn (pending.go), by the render
// workers and haproxy -c slots: the server holds no module-wide bound
// before the turn (configcheck's watchedCost), which had let one tenant's dry runs,
// creates, or reviews posted straight to the port claiming another
// tenant's namespace take the slots every tenant's admissions waited for.
//
// A shed create or update is undecided (503): the webhook's failurePolicy
// applies, and the message says to try again. It carries no Retry-After,
// neither the header nor the Status's details.retryAfterSeconds:
// kube-apiserver calls webhooks through client-go, which obeys the header
// by sending the review again every second until the webhook's timeout
// (737960a: 20 of 50 creates of a burst timed out so), and
// apierrors.SuggestsClientDelay reads the details for clients that retry
// on it. A refusal meant to apply the failurePolicy at once must say "try
// again" in words only.
//
// A shed DELETE is admitted instead, with a warning: a deletion is never
// refused for Gatehouse's load. Refusing it (the Fail policy) held tenants'
// cleanups, and a deletion that would have removed a failure, behind other
// tenants' floods. It goes ahead of its own party's waiters (fair.Queue.
// AcquireFirst), so a tenant flooding its own party cannot get its own
// deletions shed; one shed all the same is stored unchecked, and if its
// absence breaks the config's rendering, the config's status says so and
// the next changes are judged over that failing state (configcheck's preexisting.go).

// Shed answers req, undecided for lack of capacity (msg says why).
func Shed(req admission.Request, key spec.Key, msg string) admission.Response {
	if req.Operation == admissionv1.Delete {
		metrics.CountUndecided("deletion-unchecked")
		return admission.Allowed("").WithWarnings(Bounded(fmt.Sprintf(
			"HAProxyTemplateConfig %s did not check this deletion, which is never refused for Gatehouse's load: %s", key, msg), 500))
	}
	metrics.CountUndecided("deadline")
	return module.Undecided(msg)
}

// ShedConfirmation answers the confirmation of denial, a cached denial of
// req, that could not run for lack of capacity: a DELETE keeps the cached
// denial (refused for what it removes, as far as Gatehouse could tell, never
// for the load), anything else is undecided.
func ShedConfirmation(req admission.Request, denial admission.Response, msg string) module.Confirmed {
	if req.Operation == admissionv1.Delete {
		return module.Unconfirmed(denial)
	}
	return module.LiveDecision(module.Undecided(msg))
}
