package pvsafe

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_pvsafe_decisions_total",
		Help: "pvsafe decisions by kind of object and result (allowed, denied, bypassed).",
	}, []string{"kind", "result"})
	bypasses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_pvsafe_bypasses_total",
		Help: "Deletions allowed by the pv-safe.io/force-delete label, by kind and by where the label was (object, namespace).",
	}, []string{"kind", "via"})
	bypassReviewFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gatehouse_pvsafe_bypass_review_failures_total",
		Help: "SubjectAccessReviews of a bypass that failed (the bypass was refused).",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(decisions, bypasses, bypassReviewFailures)
}
