package placement

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// audit re-checks every Pod in the cache with the admission decision. The
// Pod webhook fails open (a Gatehouse outage must never stop Pods from
// starting), so a Pod created while it was unreachable is found here: it is
// counted in gatehouse_placement_noncompliant_pods and gets a Warning Event.
// The host runs it on the leader only (module.Audit), so each violation is
// reported once, and writes what it returns as PolicyReports (report.go).
type audit struct {
	m        *Module
	events   record.EventRecorder
	excluded map[string]bool

	// reported are the Pods an Event was recorded for.
	reported map[types.UID]bool
}

// run checks every Pod once and returns the violations, and the Pods it
// could not judge.
func (a *audit) run(ctx context.Context) ([]module.Finding, error) {
	log := logf.FromContext(ctx).WithName("placement-audit")
	var pods corev1.PodList
	if err := a.m.pods.List(ctx, &pods); err != nil {
		audits.WithLabelValues("error").Inc()
		return nil, fmt.Errorf("listing Pods from the cache: %w", err)
	}
	var findings []module.Finding
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
		if v.Err != nil {
			findings = append(findings, podUndecided(pod, v.Err))
			continue
		}
		if len(v.Denials) == 0 {
			continue
		}
		found++
		seen[pod.UID] = true
		findings = append(findings, podFinding(pod, v.Denials))
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
	return findings, nil
}

// hasLineage is the Pod webhook's match condition, for the audit.
func hasLineage(pod *corev1.Pod) bool {
	_, flux := pod.Labels[fluxNameLabel]
	return len(pod.OwnerReferences) > 0 || flux
}
