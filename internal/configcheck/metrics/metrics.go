package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/haproxy"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// confinement is what confines checks and renderings on this replica,
// set when the module starts (GatehouseConfigcheckConfinementReduced).
var Confinement = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "gatehouse_configcheck_confinement",
	Help: "What confines configcheck's checks and renderings on this replica, by layer: landlock_abi (the Landlock ABI in force, 0 none: files protected by their permissions only), seccomp (1 the filter is installed: processes, TCP and Unix sockets, signals, privileged calls), separate_identity (1 when checks run under another user and group than the server, through a sandbox runner), separate_identity_wanted (1 when a runner was asked for: --sandbox-runner-dir or --sandbox-runner-user).",
}, []string{"layer"})

// recordConfinement sets the gauge from what the kernel offers, and whether
// a separate identity was asked for (an alert compares the two).
func RecordConfinement(caps sandbox.Capabilities, identityWanted bool) {
	Confinement.WithLabelValues("landlock_abi").Set(float64(caps.LandlockABI))
	seccomp := 0.0
	if caps.Seccomp {
		seccomp = 1
	}
	Confinement.WithLabelValues("seccomp").Set(seccomp)
	identity := 0.0
	if caps.SeparateIdentity {
		identity = 1
	}
	Confinement.WithLabelValues("separate_identity").Set(identity)
	wanted := 0.0
	if identityWanted {
		wanted = 1
	}
	Confinement.WithLabelValues("separate_identity_wanted").Set(wanted)
}

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
		Help: "Admissions ended before rendering (structure: denied, unselected, namespace-terminating; object-bounds: denied, the object past its watched resource's bounds) or ended by a phase (render, haproxy, tests: denied, or pre-existing when the state without the change fails the same way and the change is admitted).",
	}, []string{"phase", "outcome"})
	// undecided says why the caches' judgement was undecided, which the
	// server's decision="undecided" does not; a confirmation that could not
	// decide is in gatehouse_webhook_confirmations_total{result="undecided"}.
	undecided = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_configcheck_undecided_total",
		Help: "Admissions answered 503 from the caches' judgement so that the failure policy applies, by reason (not-synced; deadline: no capacity in time; deletion-unchecked: a DELETE admitted so, unchecked); an unconfirmed denial is counted in gatehouse_webhook_confirmations_total{result=\"undecided\"}.",
	}, []string{"reason"})
	admissionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gatehouse_configcheck_admission_seconds",
		Help:    "Time to decide a watched resource's admission, by watched resource and decision.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"watched", "decision"})
	// configs lets an alert see configs that are invalid or whose
	// rendering is not published (docs/monitoring.md) without a label per
	// config: which ones, kubectl get haproxytemplateconfigs says.
	configs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gatehouse_configcheck_configs",
		Help: "HAProxyTemplateConfigs by condition (Valid, Published, Ready), status (True, False, Unknown) and reason, as their status says; every replica counts the configs its cache holds.",
	}, []string{"condition", "status", "reason"})
	Published = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_configcheck_publications_total",
		Help: "Renderings of the cluster's state by outcome: published, unchanged, rejected (render or haproxy failed; the last accepted one stays), not-owned (an object of an output's name is not the config's: nothing written), forbidden (Gatehouse may not write in the config's namespace: nothing written), or too-large (the rendering exceeds what a ConfigMap or Secret holds: nothing written).",
	}, []string{"outcome"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(HAProxyChecks, phaseSeconds, phaseOutcomes, undecided, admissionSeconds, configs, Published, Confinement, HapticConfigs)
}

func CountCheck(v haproxy.Verdict) {
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

func CountPhase(phase, outcome string) { phaseOutcomes.WithLabelValues(phase, outcome).Inc() }
func CountUndecided(reason string)     { undecided.WithLabelValues(reason).Inc() }
func ObservePhase(phase string, d time.Duration) {
	phaseSeconds.WithLabelValues(phase).Observe(d.Seconds())
}

func ObserveAdmission(watched string, resp admission.Response, d time.Duration) {
	decision := "allowed"
	switch {
	case module.ClassOf(resp) == module.ClassUndecided:
		decision = "undecided"
	case !resp.Allowed:
		decision = "denied"
	}
	admissionSeconds.WithLabelValues(watched, decision).Observe(d.Seconds())
}

// hapticConfigs counts haptic's configs by validity
// (GatehouseConfigcheckHapticConfigNotValid): they carry no status of
// Gatehouse's to count them by, so each replica counts what it loaded.
var HapticConfigs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "gatehouse_configcheck_haptic_configs",
	Help: "haptic's HAProxyTemplateConfigs (haproxy-haptic.org) this replica follows, by validity: valid (they compile and their tests pass), spec-invalid (they do not compile: their watched resources are not validated), tests-failed (changes are admitted with the failed tests as warnings), tests-not-run.",
}, []string{"validity"})

// A loaded config's validities (validityOf): hapticConfigs' label values,
// and what setValidity writes into Gatehouse's kind's Valid condition.
const (
	ValidityValid       = "valid"
	ValiditySpecInvalid = "spec-invalid"
	ValidityTestsFailed = "tests-failed"
	ValidityTestsNotRun = "tests-not-run"
)

var HapticValidities = []string{ValidityValid, ValiditySpecInvalid, ValidityTestsFailed, ValidityTestsNotRun}

// countedReasons are the conditions configs counts and the reasons
// Gatehouse writes for each (publish.go). Whoever may write a config's
// status could write any reason, so any other is counted as Other, and a
// condition not written yet as NotWritten: the series stay a bounded set.
var countedReasons = map[string][]string{
	gatehousev1alpha1.ConditionValid:     {"Valid", "SpecInvalid", "TestsFailed", "TestsNotRun"},
	gatehousev1alpha1.ConditionPublished: {"Published", "ConfigInvalid", "Loading", "RenderFailed", "PolicyRefused", "HAProxyCheckFailed", "NotPermitted", "OutputNotOwned", "OutputForbidden", "OutputTooLarge"},
	gatehousev1alpha1.ConditionReady:     {"Ready", "NotReady"},
}

// configSeries is one series of configs: condition, status, reason.
type ConfigSeries [3]string

// countConfigs counts items by condition, status and reason.
func CountConfigs(items []gatehousev1alpha1.HAProxyTemplateConfig) map[ConfigSeries]int {
	counts := map[ConfigSeries]int{}
	for i := range items {
		for condition, reasons := range countedReasons {
			key := ConfigSeries{condition, string(metav1.ConditionUnknown), "NotWritten"}
			if c := meta.FindStatusCondition(items[i].Status.Conditions, condition); c != nil {
				key = ConfigSeries{condition, string(c.Status), "Other"}
				if c.Status != metav1.ConditionTrue && c.Status != metav1.ConditionFalse {
					key[1] = string(metav1.ConditionUnknown)
				}
				for _, r := range reasons {
					if c.Reason == r {
						key[2] = r
					}
				}
			}
			counts[key]++
		}
	}
	return counts
}

// followConfigStates keeps configs counted from the configs' cache: every
// change of a config, its status writes included, recounts them all (a
// cluster holds a few configs, not thousands).
func FollowConfigStates(ctx context.Context, configCache cache.Cache) error {
	informer, err := configCache.GetInformer(ctx, &gatehousev1alpha1.HAProxyTemplateConfig{})
	if err != nil {
		return err
	}
	var mu sync.Mutex
	shown := map[ConfigSeries]bool{}
	recount := func() {
		list := &gatehousev1alpha1.HAProxyTemplateConfigList{}
		if err := configCache.List(ctx, list); err != nil {
			logf.FromContext(ctx).Error(err, "configcheck: count configs for gatehouse_configcheck_configs")
			return
		}
		counts := CountConfigs(list.Items)
		mu.Lock()
		defer mu.Unlock()
		for key := range shown {
			if _, ok := counts[key]; !ok {
				configs.DeleteLabelValues(key[:]...)
				delete(shown, key)
			}
		}
		for key, n := range counts {
			configs.WithLabelValues(key[:]...).Set(float64(n))
			shown[key] = true
		}
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { recount() },
		UpdateFunc: func(_, _ any) { recount() },
		DeleteFunc: func(any) { recount() },
	})
	return err
}
