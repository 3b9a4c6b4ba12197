package reports

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

var (
	runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_audit_runs_total",
		Help: "Runs of the modules' periodic checks on the leader, by module and outcome (ok, error: the check failed and the reports stay as they were, write_error: a report could not be written).",
	}, []string{"module", "outcome"})
	findingsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gatehouse_audit_findings",
		Help: "Findings of the last run of each module's periodic check, by result (fail, warn, error), written to PolicyReports when that API is served.",
	}, []string{"module", "result"})
)

func init() { ctrlmetrics.Registry.MustRegister(runs, findingsGauge) }

// Runner runs one module's audit every period and writes its findings. It
// is a manager.Runnable that needs leader election: one writer per
// cluster, so that two replicas never fight over a report.
type Runner struct {
	Writer *Writer
	Module string
	Audit  module.Audit
	// Period overrides the audit's own when not zero.
	Period time.Duration
}

// NeedLeaderElection: only the leader audits and writes.
func (r *Runner) NeedLeaderElection() bool { return true }

// Start runs the audit at once, then every period, until ctx ends. A run
// that fails is tried again sooner (retryAfter, at most the period): the
// first run may come before an optional kind's informer has synced.
func (r *Runner) Start(ctx context.Context) error {
	period := r.Period
	if period <= 0 {
		period = r.Audit.Period
	}
	for {
		next := period
		if !r.runOnce(ctx) {
			next = min(period, retryAfter)
		}
		timer := time.NewTimer(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}

// retryAfter is how soon a failed run is tried again.
const retryAfter = 10 * time.Second

// runOnce runs the audit and writes its findings; it reports whether both
// succeeded.
func (r *Runner) runOnce(ctx context.Context) bool {
	log := logf.FromContext(ctx).WithName("audit")
	findings, err := r.Audit.Run(ctx)
	if ctx.Err() != nil {
		return true
	}
	if err != nil {
		runs.WithLabelValues(r.Module, "error").Inc()
		log.Error(err, "periodic check failed; its reports stay as they were")
		return false
	}
	counts := map[module.Result]int{module.ResultFail: 0, module.ResultWarn: 0, module.ResultError: 0}
	for _, f := range findings {
		counts[f.Result]++
	}
	for result, n := range counts {
		findingsGauge.WithLabelValues(r.Module, string(result)).Set(float64(n))
	}
	if err := r.Writer.Write(ctx, r.Module, findings); err != nil {
		if ctx.Err() != nil {
			return true // stopping (leadership lost): not a failure
		}
		runs.WithLabelValues(r.Module, "write_error").Inc()
		log.Error(err, "writing the policy reports")
		return false
	}
	runs.WithLabelValues(r.Module, "ok").Inc()
	return true
}
