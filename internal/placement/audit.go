package placement

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// audit re-checks every Pod in the cache with the admission decision. The
// Pod webhook fails open (a Gatehouse outage must never stop Pods from
// starting), so a Pod created while it was unreachable is found here: it is
// counted in gatehouse_placement_noncompliant_pods and gets a Warning Event.
// It runs on the leader only, so each violation is reported once.
type audit struct {
	m        *Module
	interval time.Duration
	events   record.EventRecorder
	excluded map[string]bool

	// reported are the Pods an Event was recorded for.
	reported map[types.UID]bool
}

func (a *audit) NeedLeaderElection() bool { return true }

func (a *audit) Start(ctx context.Context) error {
	a.reported = map[types.UID]bool{}
	ticker := time.NewTicker(a.interval)
	defer ticker.Stop()
	for {
		a.run(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// run checks every Pod once.
func (a *audit) run(ctx context.Context) {
	log := logf.FromContext(ctx).WithName("placement-audit")
	var pods corev1.PodList
	if err := a.m.pods.List(ctx, &pods); err != nil {
		audits.WithLabelValues("error").Inc()
		log.Error(err, "listing Pods from the cache")
		return
	}
	found := 0
	seen := make(map[types.UID]bool, len(pods.Items))
	for i := range pods.Items {
		pod := &pods.Items[i]
		if a.excluded[pod.Namespace] || !hasLineage(pod) || pod.DeletionTimestamp != nil {
			continue
		}
		v := a.m.decidePod(ctx, a.m.view, pod.Namespace, pod)
		if v.Err == nil && len(v.Denials) > 0 && a.m.live != nil {
			v = a.m.decidePod(ctx, *a.m.live, pod.Namespace, pod)
		}
		if v.Err != nil || len(v.Denials) == 0 {
			continue
		}
		found++
		seen[pod.UID] = true
		if !a.reported[pod.UID] {
			a.reported[pod.UID] = true
			a.events.Event(pod, corev1.EventTypeWarning, "AffinityClassViolation", strings.Join(v.Denials, "; "))
			log.Info("running Pod violates its application's AffinityClass", "pod", pod.Namespace+"/"+pod.Name, "reasons", v.Denials)
		}
	}
	for uid := range a.reported {
		if !seen[uid] {
			delete(a.reported, uid)
		}
	}
	noncompliant.Set(float64(found))
	audits.WithLabelValues("ok").Inc()
}

// hasLineage is the Pod webhook's match condition, for the audit.
func hasLineage(pod *corev1.Pod) bool {
	_, flux := pod.Labels[fluxNameLabel]
	return len(pod.OwnerReferences) > 0 || flux
}
