package certs

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// caExpiry lets an alert fire well before a CA nobody rotated expires
	// (the failure behind kyverno#10063), whatever the certificate mode.
	caExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gatehouse_certificate_ca_expiry_timestamp_seconds",
		Help: "Earliest expiry (NotAfter, Unix seconds) of the CAs in the published CA bundle.",
	})

	rotationSteps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_certificate_rotation_steps_total",
		Help: "Self-managed certificate steps written to the Secret by the leader, by step and result.",
	}, []string{"step", "result"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(caExpiry, rotationSteps)
}
