package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gatehouse-dev/gatehouse/internal/version"
)

// Decision values of the decision label.
const (
	DecisionAllowed = "allowed"
	DecisionDenied  = "denied"
	DecisionWarned  = "warned"
	DecisionErrored = "errored"
	// DecisionUndecided is an answer of HTTP 503 (module.Undecided): the
	// module could not decide in time, and the webhook's failurePolicy
	// decides.
	DecisionUndecided = "undecided"
)

var (
	// Requests counts admission and conversion requests by outcome.
	Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_webhook_requests_total",
		Help: "Webhook requests by webhook, module, operation and decision.",
	}, []string{"webhook", "module", "operation", "decision"})

	// Latency observes handling time, from body read to response written.
	// The buckets reach past the API server's 10 s webhook timeout so that
	// slow requests stay visible instead of piling up in +Inf.
	Latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gatehouse_webhook_latency_seconds",
		Help:    "Time to handle a webhook request.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15},
	}, []string{"webhook", "module"})

	// BadRequests counts requests refused before a handler ran.
	BadRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_webhook_rejected_requests_total",
		Help: "Requests refused before reaching a handler, by path and HTTP status code.",
	}, []string{"path", "code"})

	// Panics counts handler panics recovered into HTTP 500.
	Panics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_webhook_panics_total",
		Help: "Handler panics recovered by the server.",
	}, []string{"webhook", "module"})

	// ForeignKinds counts reviews whose kind is not one the webhook at
	// their path judges (module.Webhook.Kinds), allowed without a
	// decision. The review's kind is the caller's to choose, so it is no
	// label: the module is.
	ForeignKinds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_webhook_foreign_kind_total",
		Help: "Reviews of a kind the webhook at their path does not judge, allowed without a decision, by module.",
	}, []string{"module"})

	// InFlight is how many webhook requests the server holds: from the
	// guard's first look, through a wait for room in the in-flight budgets
	// and the decision, to the answer. Near the budgets it says why
	// requests get 429.
	InFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gatehouse_webhook_requests_in_flight",
		Help: "Webhook requests being served: waiting for room, read, or being decided.",
	})

	// Confirmations counts the denials made again from the API server's
	// live state before they were returned (module.Confirmation), by result:
	// confirmed, overturned (the cache was behind: admitted), undecided (the
	// confirmation could not decide).
	Confirmations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_webhook_confirmations_total",
		Help: "Denials confirmed against the API server's live state before they were returned, by webhook, module and result (confirmed, overturned: the cache was behind and the request was admitted, undecided: the confirmation could not decide).",
	}, []string{"webhook", "module", "result"})

	// Denials counts denials by the reason the module gave, from each
	// webhook's declared set (module.Webhook.DenialReasons; "other" for any
	// other), and by decision: denied, or warned (warn mode admitted it).
	Denials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_webhook_denials_total",
		Help: "Policy denials by webhook, module, reason (each webhook's declared set, other for any other) and decision (denied, or warned in warn mode).",
	}, []string{"webhook", "module", "reason", "decision"})

	// CacheSynced is 1 once a cache a module needs has synced.
	CacheSynced = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gatehouse_cache_synced",
		Help: "1 when the named cache has synced, 0 before.",
	}, []string{"cache"})

	// ModuleReady is 1 for each enabled module that started and serves,
	// 0 for one that could not start: its webhooks are neither served nor
	// written into the webhook configurations, and /readyz names it. The
	// other modules serve either way (docs/modules.md, "A module that
	// cannot start").
	ModuleReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gatehouse_module_ready",
		Help: "1 when the enabled module started and serves its webhooks, 0 when it could not start (its webhooks are withdrawn; the other modules serve).",
	}, []string{"module"})

	// CertificateReloads counts serving-certificate loads by source and result.
	CertificateReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_certificate_reloads_total",
		Help: "Serving certificate loads by source and result.",
	}, []string{"source", "result"})

	// CertificateExpiry is the NotAfter time of the certificate being served.
	CertificateExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gatehouse_certificate_expiry_timestamp_seconds",
		Help: "Expiry (NotAfter, Unix seconds) of the serving certificate.",
	})
)

// buildInfo is 1, labelled with what the build says of itself, so that
// dashboards and alerts can tell versions apart during a rollout.
func buildInfo() prometheus.Collector {
	info := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "gatehouse_build_info",
		Help:        "Always 1; its labels say which Gatehouse build this is.",
		ConstLabels: prometheus.Labels{"version": info.Version, "revision": info.Revision, "goversion": info.GoVersion},
	})
	g.Set(1)
	return g
}

func init() {
	ctrlmetrics.Registry.MustRegister(Requests, Latency, BadRequests, Panics, ForeignKinds, InFlight, Confirmations, Denials, CacheSynced, ModuleReady, CertificateReloads, CertificateExpiry, buildInfo())
}
