package configcheck

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/haproxy"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

var (
	// HAProxyChecks counts how admissions and publications got their
	// haproxy -c verdict: run (valid or invalid), reused from the checksum
	// cache (cached), or not needed because the change leaves what the
	// templates see unchanged (unchanged).
	HAProxyChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_configcheck_haproxy_checks_total",
		Help: "haproxy -c verdicts by result: valid, invalid (haproxy ran), refused (the check policy refused the rendering; haproxy did not run), cached (an identical rendering's verdict reused) or unchanged (the change leaves what the templates see as it is; nothing rendered).",
	}, []string{"result"})
	phaseSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gatehouse_configcheck_phase_seconds",
		Help:    "Time spent in each phase of a dry-run (render, haproxy).",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"phase"})
	phaseOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_configcheck_phase_outcomes_total",
		Help: "Admissions ended before rendering (structure: denied, unselected, namespace-terminating) or ended by a phase (render, haproxy, tests: denied, or pre-existing when the state without the change fails the same way and the change is admitted).",
	}, []string{"phase", "outcome"})
	// undecided says why the caches' judgement was undecided, which the
	// server's decision="undecided" does not; a confirmation that could not
	// decide is in gatehouse_webhook_confirmations_total{result="undecided"}.
	undecided = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_configcheck_undecided_total",
		Help: "Admissions answered 503 from the caches' judgement so that the failure policy applies, by reason (not-synced, deadline); an unconfirmed denial is counted in gatehouse_webhook_confirmations_total{result=\"undecided\"}.",
	}, []string{"reason"})
	admissionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gatehouse_configcheck_admission_seconds",
		Help:    "Time to decide a watched resource's admission, by watched resource and decision.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"watched", "decision"})
	published = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_configcheck_publications_total",
		Help: "Renderings of the cluster's state by outcome: published, unchanged, rejected (render or haproxy failed; the last accepted one stays), not-owned (an object of an output's name is not the config's: nothing written), or forbidden (Gatehouse may not write in the config's namespace: nothing written).",
	}, []string{"outcome"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(HAProxyChecks, phaseSeconds, phaseOutcomes, undecided, admissionSeconds, published)
}

func countCheck(v haproxy.Verdict) {
	switch {
	case v.Cached:
		HAProxyChecks.WithLabelValues("cached").Inc()
	case v.Refused:
		HAProxyChecks.WithLabelValues("refused").Inc()
	case v.Valid:
		HAProxyChecks.WithLabelValues("valid").Inc()
	default:
		HAProxyChecks.WithLabelValues("invalid").Inc()
	}
}

func countPhase(phase, outcome string) { phaseOutcomes.WithLabelValues(phase, outcome).Inc() }
func countUndecided(reason string)     { undecided.WithLabelValues(reason).Inc() }
func observePhase(phase string, d time.Duration) {
	phaseSeconds.WithLabelValues(phase).Observe(d.Seconds())
}

func observeAdmission(watched string, resp admission.Response, d time.Duration) {
	decision := "allowed"
	switch {
	case module.IsUndecided(resp):
		decision = "undecided"
	case !resp.Allowed:
		decision = "denied"
	}
	admissionSeconds.WithLabelValues(watched, decision).Observe(d.Seconds())
}
