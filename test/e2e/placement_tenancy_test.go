package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/placement"
)

// foreignPod is a Pod an attacker writes in its own namespace, labelled as
// Flux labels the objects of another namespace's release.
func foreignPod(namespace, name, releaseNamespace, release string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
			"helm.toolkit.fluxcd.io/name": release, "helm.toolkit.fluxcd.io/namespace": releaseNamespace,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
}

// Issue 26, as the attacker: a tenant with edit in its own namespace labels
// its Pods with another tenant's release (helm.toolkit.fluxcd.io/name and
// .../namespace). Gatehouse follows releases in the Pod's own namespace only,
// as Cozystack does: the Pod is neither refused with, nor reported in the
// tenant's PolicyReport with, the other namespace's release, its class or
// its node constraint. The victim's own Pods are still judged by it (the
// control that the release is there, classed and cached).
func TestPlacementAnotherNamespacesReleaseIsNotFollowed(t *testing.T) {
	installReportCRDs(t)
	e := newPlacementEnv(t) // e.ns is the victim's namespace
	e.g = startGatehouse(t, app.Options{
		Catalogue: []module.Module{placement.New(placement.Options{})},
		Modules:   map[string]app.ModuleConfig{"placement": {Enabled: true, Enforcement: module.Enforce}},
		Reports:   app.ReportOptions{Interval: reportInterval},
	})
	ctx := context.Background()
	attackerNS := namespace(t, "attacker")
	attacker, _ := tenantClient(t, attackerNS)
	dc2 := e.classes["dc2"]

	// Before the victim's release exists, a Pod of the attacker's and one
	// of the victim's, labelled with it, are admitted (no release yet).
	if err := attacker.Create(ctx, foreignPod(attackerNS, "early", e.ns, "db")); err != nil {
		t.Fatalf("the attacker's Pod, no release anywhere yet: %v", err)
	}
	victimPod := e.fluxPod("victim-early", "db", nil, nil)
	if err := e.c.Create(ctx, victimPod); err != nil {
		t.Fatalf("the victim's Pod, its release not there yet: %v", err)
	}
	if _, err := e.release("db", dc2); err != nil {
		t.Fatal(err)
	}

	// The control: the victim's Pods are judged by the release.
	eventually(t, "the victim's release cached and judging its Pods", func() error {
		err := e.c.Create(ctx, e.fluxPod("victim-late", "db", nil, nil), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("AffinityClass %q but missing required nodeSelector %s=zone-b", dc2, zoneKey)) {
			return fmt.Errorf("the victim's Pod without its class's selector: %v", err)
		}
		return nil
	})

	// The attack at admission: admitted, as a Pod of no application.
	if err := attacker.Create(ctx, foreignPod(attackerNS, "late", e.ns, "db")); err != nil {
		t.Fatalf("the attacker's Pod labelled with another namespace's release was judged by it: %v", err)
	}

	// The attack through the periodic check: the victim's early Pod is
	// reported in the victim's namespace; once the run that reported it is
	// counted (its reports written), the attacker's namespace has none.
	eventually(t, "the victim's early Pod in the victim's report", func() error {
		r, err := policyReport(t, e.ns, "placement")
		if err != nil {
			return err
		}
		if res := r.resultFor("Pod", victimPod.Name); res == nil || res.Result != "fail" {
			return fmt.Errorf("no fail result for %s in %+v", victimPod.Name, r)
		}
		return nil
	})
	runs := auditRuns("placement", "ok")
	eventually(t, "a complete run of the periodic check", func() error {
		if n := auditRuns("placement", "ok"); n < runs+1 {
			return fmt.Errorf("%v runs, waiting for %v", n, runs+1)
		}
		return nil
	})
	r, err := policyReport(t, attackerNS, "placement")
	if err != nil {
		t.Fatal(err)
	}
	if r != nil {
		t.Fatalf("the attacker's namespace has a report, about another namespace's release: %+v", r)
	}
}

// nodeInZone returns a fake Node of zone.
func nodeInZone(t *testing.T, zone string) string {
	t.Helper()
	var nodes corev1.NodeList
	if err := controlPlane.Client.List(context.Background(), &nodes, client.MatchingLabels{zoneKey: zone}); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) == 0 {
		t.Fatalf("no Node in %s", zone)
	}
	return nodes.Items[0].Name
}

// Issue 26, as the attacker: a tenant with edit creates a Pod of its
// application with the class's nodeSelector (zone-a) but bound at creation
// to a Node of another zone (spec.nodeName skips the scheduler, and with it
// the nodeSelector). It is judged against the Node's labels and refused; the
// same Pod on a Node of the class is admitted, and one bound to a Node that
// does not exist is judged on its selectors alone (it runs nowhere, and a
// Node of that name joining later is held to them by the kubelet).
func TestPlacementPodBoundToANodeOutsideItsClassIsRefused(t *testing.T) {
	e := startPlacement(t, module.Enforce)
	ctx := context.Background()
	tenant, _ := tenantClient(t, e.ns)
	dc1 := e.classes["dc1"]
	if _, err := e.release("db", dc1); err != nil {
		t.Fatal(err)
	}
	bound := func(name, node string) *corev1.Pod {
		p := e.fluxPod(name, "db", map[string]string{zoneKey: "zone-a"}, nil)
		p.Spec.NodeName = node
		return p
	}
	eventually(t, "the release cached and judging its Pods", func() error {
		err := tenant.Create(ctx, e.fluxPod("unplaced", "db", nil, nil), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "missing required nodeSelector") {
			return fmt.Errorf("a Pod without its class's selector: %v", err)
		}
		return nil
	})

	other := nodeInZone(t, "zone-b")
	err := tenant.Create(ctx, bound("elsewhere", other))
	want := fmt.Sprintf(`pod %s/elsewhere belongs to application with AffinityClass %q but is bound to node %q (spec.nodeName), which is not in the class`, e.ns, dc1, other)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "to proceed:") {
		t.Fatalf("a Pod bound to a Node of another zone: %v; want %q", err, want)
	}
	if err := tenant.Create(ctx, bound("in-class", nodeInZone(t, "zone-a"))); err != nil {
		t.Fatalf("a Pod bound to a Node of its class: %v", err)
	}
	if err := tenant.Create(ctx, bound("nowhere", "no-such-node-"+randSuffix()), client.DryRunAll); err != nil {
		t.Fatalf("a Pod with its class's selector bound to no existing Node: %v", err)
	}
}
