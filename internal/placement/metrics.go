package placement

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	unresolved = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gatehouse_placement_lineage_unresolved_total",
		Help: "Pods admitted because a link of their ownership could not be followed from the caches.",
	})
	ownerKinds = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gatehouse_placement_owner_kinds",
		Help: "Owner kinds whose metadata is cached for lineage walks.",
	})
	ownerKindsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gatehouse_placement_owner_kinds_refused_total",
		Help: "Lineage walks that met a new owner kind beyond the bound on followed kinds.",
	})
	ownerWaits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_placement_owner_waits_total",
		Help: "Pod decisions that waited for the informer of an owner kind (seen for the first time, or its CRD back), by result: synced, or timed-out (the decision went on without it).",
	}, []string{"result"})
	ownerLinksUnfollowed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_placement_owner_links_unfollowed_total",
		Help: "Ownership links not followed, answered at once, because the owner's kind cannot be read from a cache, by reason: not-served (no CRD serves it), not-permitted (Gatehouse may not list and watch it), not-synced (its informer did not sync in time).",
	}, []string{"reason"})
	podsLabelled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_placement_pods_labelled_total",
		Help: "Pods seen by the lineage-labels webhook (--placement-lineage-labels), by result: labelled, no-application (none in the lineage: unchanged), undecided (the lineage could not be walked: unchanged).",
	}, []string{"result"})
	noncompliant = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gatehouse_placement_noncompliant_pods",
		Help: "Pods the last periodic check found violating their application's AffinityClass.",
	})
	audits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_placement_audits_total",
		Help: "Periodic checks of running Pods, by result.",
	}, []string{"result"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(unresolved, ownerWaits, ownerLinksUnfollowed, podsLabelled, ownerKinds, ownerKindsRefused, noncompliant, audits)
	ownerKinds.Set(float64(len(workloadKinds)))
}
