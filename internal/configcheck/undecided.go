package configcheck

import (
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// undecidedVerdict answers req, for which v reached no decision.
func undecidedVerdict(req admission.Request, key spec.Key, v judge.Verdict) admission.Response {
	if v.Shed {
		return guard.Shed(req, key, v.Undecided)
	}
	metrics.CountUndecided("deadline")
	return module.Undecided(v.Undecided)
}
