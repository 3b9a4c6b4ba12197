package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	ngv1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/nodegroup"
	"github.com/gatehouse-dev/gatehouse/internal/placement"
)

// A tenant (edit in its namespace) runs Pods that break its application's
// AffinityClass, as many as it likes (warn mode admits them). Its
// namespace's report holds at most MaxResults of them and counts them all;
// the results name what the tenant's namespace holds and the class its
// release chose, never the rest of the tenant's allow-list, which lives in
// Secret cozystack-values; no other namespace gets a report. Mended (the
// Pods gone), the report goes.
func TestPolicyReportsPlacementTenantViolations(t *testing.T) {
	installReportCRDs(t)
	e := newPlacementEnv(t)
	e.g = startGatehouse(t, app.Options{
		Catalogue: []module.Module{placement.New(placement.Options{})},
		Modules:   map[string]app.ModuleConfig{"placement": {Enabled: true, Enforcement: module.Warn}},
		Reports:   app.ReportOptions{Interval: reportInterval, MaxResults: 5},
	})
	other := namespace(t, "bystander")
	if _, err := e.release("db", ""); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tenant := "tenant-" + randSuffix()
	if err := controlPlane.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "edit-" + tenant},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenant}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
	}); err != nil {
		t.Fatal(err)
	}
	tc := impersonated(t, tenant)
	labels := map[string]string{"app": "flood"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "flood", Labels: map[string]string{
			"helm.toolkit.fluxcd.io/name": "db", "helm.toolkit.fluxcd.io/namespace": e.ns,
		}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](12),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
	eventually(t, "the tenant creates its Deployment", func() error { return tc.Create(ctx, d) })

	eventually(t, "twelve violating Pods fill a report bounded to five results", func() error {
		r, err := policyReport(t, e.ns, "placement")
		if err != nil || r == nil {
			return fmt.Errorf("report: %v, %v", r, err)
		}
		if r.Summary.Fail != 12 || r.Summary.Skip != 1 || len(r.Results) != 6 {
			return fmt.Errorf("summary %+v, %d results", r.Summary, len(r.Results))
		}
		for _, res := range r.Results[:5] {
			if res.Rule != placement.PodRule || res.Result != "fail" || len(res.Resources) != 1 || res.Resources[0].Kind != "Pod" ||
				!strings.Contains(res.Message, fmt.Sprintf("belongs to application with AffinityClass %q but missing required nodeSelector", e.classes["dc1"])) {
				t.Fatalf("result %+v", res)
			}
			for _, hidden := range []string{e.classes["dc2"], e.classes["either"]} {
				if strings.Contains(res.Message, hidden) {
					t.Fatalf("a result reveals %q from the tenant's cozystack-values: %q", hidden, res.Message)
				}
			}
		}
		return nil
	})
	// The check's own gauge counts the same Pods, report or not.
	if n := gaugeValue("gatehouse_placement_noncompliant_pods"); n != 12 {
		t.Errorf("gatehouse_placement_noncompliant_pods %v, want 12", n)
	}
	if r, err := policyReport(t, other, "placement"); err != nil || r != nil {
		t.Fatalf("a namespace without violations got a report: %+v (%v)", r, err)
	}

	eventually(t, "the tenant scales its Deployment to zero", func() error {
		scaled := &appsv1.Deployment{}
		if err := tc.Get(ctx, client.ObjectKeyFromObject(d), scaled); err != nil {
			return err
		}
		scaled.Spec.Replicas = ptr.To[int32](0)
		return tc.Update(ctx, scaled)
	})
	eventually(t, "mended, the namespace's report goes", func() error {
		r, err := policyReport(t, e.ns, "placement")
		if err != nil || r != nil {
			return fmt.Errorf("report: %+v, %v", r, err)
		}
		if n := gaugeValue("gatehouse_placement_noncompliant_pods"); n != 0 {
			return fmt.Errorf("gatehouse_placement_noncompliant_pods %v", n)
		}
		return nil
	})
}

// A Pod the periodic check cannot judge is an error result, in the Pod
// webhook's own words, not a Pod skipped: here its owner kind is beyond
// the module's bound (no slot past the six workload kinds), so the webhook
// answered undecided and its failure policy (Ignore) admitted it. It would
// comply if judged; the result goes with the Pod.
func TestPolicyReportsPlacementUndecidedPodIsAnError(t *testing.T) {
	installReportCRDs(t)
	e := newPlacementEnv(t)
	e.g = startGatehouse(t, app.Options{
		Catalogue: []module.Module{placement.New(placement.Options{MaxOwnerKinds: 6})},
		Modules:   map[string]app.ModuleConfig{"placement": {Enabled: true, Enforcement: module.Enforce}},
		Reports:   app.ReportOptions{Interval: reportInterval},
	})
	ctx := context.Background()
	pod, _ := e.operatorPod(t, "undecided.example.org", "pg", e.classes["dc2"])
	created := pod(map[string]string{zoneKey: "zone-b"})
	if err := e.c.Create(ctx, created); err != nil {
		t.Fatalf("failurePolicy Ignore should admit an undecided Pod: %v", err)
	}
	want := fmt.Sprintf("placement of pod %s/%s could not be decided: ", e.ns, created.Name)
	eventually(t, "the Pod stands in its namespace's report as an error", func() error {
		r, err := policyReport(t, e.ns, "placement")
		if err != nil || r == nil {
			return fmt.Errorf("report: %v, %v", r, err)
		}
		res := r.resultFor("Pod", created.Name)
		if res == nil || res.Result != "error" || res.Rule != placement.PodRule || r.Summary.Error != 1 || r.Summary.Fail != 0 ||
			!strings.Contains(res.Message, want) || !strings.Contains(res.Message, "owner kinds exhausted") {
			return fmt.Errorf("summary %+v, result %+v; want one error result saying %q", r.Summary, res, want)
		}
		return nil
	})
	if err := e.c.Delete(ctx, created, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Pod gone, the report goes", func() error {
		if r, err := policyReport(t, e.ns, "placement"); err != nil || r != nil {
			return fmt.Errorf("report: %+v, %v", r, err)
		}
		return nil
	})
}

// gaugeValue is the value of a gauge without labels in this process.
func gaugeValue(name string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// A NodeGroup admitted under one ModuleConfig becomes one that today's
// policy refuses when the platform drops the toleration its taint needs:
// the ClusterPolicyReport says so, and forgets it when the key is back.
func TestPolicyReportsNodeGroupStandingViolation(t *testing.T) {
	installReportCRDs(t)
	installModuleConfigCRD(t)
	putModuleConfigGlobal(t, "gpu")
	env := startNodeGroupWith(t, app.Options{
		Catalogue: []module.Module{nodegroup.New()},
		Modules:   map[string]app.ModuleConfig{"nodegroup": {Enabled: true}},
		Reports:   app.ReportOptions{Interval: reportInterval},
	})
	name := ngName("gpu")
	group := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic,
		NodeTemplate: &ngv1.NodeTemplate{Taints: []ngv1.Taint{{Key: "gpu", Effect: "NoSchedule"}}}}}
	eventually(t, "the group with a tolerated taint is admitted", func() error { return env.c.Create(context.Background(), group.DeepCopy()) })
	t.Cleanup(func() { deleteNodeGroup(t, name) })

	setTolerations := func(keys ...any) {
		t.Helper()
		mc := &unstructured.Unstructured{}
		mc.SetAPIVersion("deckhouse.io/v1alpha1")
		mc.SetKind("ModuleConfig")
		if err := controlPlane.Client.Get(context.Background(), client.ObjectKey{Name: "global"}, mc); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(mc.Object, append([]any{}, keys...), "spec", "settings", "modules", "placement", "customTolerationKeys"); err != nil {
			t.Fatal(err)
		}
		if err := controlPlane.Client.Update(context.Background(), mc); err != nil {
			t.Fatal(err)
		}
	}
	setTolerations()
	eventually(t, "the group is reported once its taint is no longer tolerated", func() error {
		r, err := policyReport(t, "", "nodegroup")
		if err != nil {
			return err
		}
		res := r.resultFor("NodeGroup", name)
		if res == nil {
			return fmt.Errorf("no result for %s in %+v", name, r)
		}
		if res.Rule != nodegroup.PolicyRule || res.Result != "fail" || !strings.Contains(res.Message, "add: gpu to customTolerationKeys.") {
			t.Fatalf("result %+v", res)
		}
		return nil
	})
	setTolerations("gpu")
	eventually(t, "the group leaves the report once the taint is tolerated again", func() error {
		r, err := policyReport(t, "", "nodegroup")
		if err != nil {
			return err
		}
		if r.resultFor("NodeGroup", name) != nil {
			return fmt.Errorf("still reported: %+v", r)
		}
		return nil
	})
}

// An Ingress stored before the config (no webhook guarded it) points at a
// missing Service: the config's rendering of the cluster fails, and its
// namespace's report says so, by the failure's reason only. The status
// message quotes the template's fail text, which carries whatever the
// rendering read (here a marker in the Ingress's host); the report must
// not. Creating the Service mends it and the report goes.
func TestPolicyReportsConfigcheckRenderFailure(t *testing.T) {
	installReportCRDs(t)
	c := controlPlane.Client
	if err := gatehousev1alpha1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	e := &configcheckEnv{t: t, c: c, app: namespace(t, "app"), scope: "cc-" + randSuffix()}
	e.label(e.app)
	const marker = "only-readers-of-the-status-may-see-this.example"
	ctx := context.Background()
	if err := c.Create(ctx, e.ingress("early", "haproxy", marker, "late-service", 80)); err != nil {
		t.Fatal(err)
	}
	cfg := exampleConfig(t)
	cfg.Namespace = namespace(t, "lb")
	scopeTo(cfg, e.scope)
	e.g = startGatehouse(t, app.Options{
		Catalogue: []module.Module{configcheck.New(configcheck.Options{})},
		Modules:   map[string]app.ModuleConfig{"configcheck": {Enabled: true}},
		Reports:   app.ReportOptions{Interval: reportInterval},
	})
	eventually(t, "the config is admitted", func() error { return c.Create(ctx, cfg) })

	eventually(t, "the failing rendering is reported", func() error {
		stored := &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), stored); err != nil {
			return err
		}
		r, err := policyReport(t, cfg.Namespace, "configcheck")
		if err != nil {
			return err
		}
		res := r.resultFor("HAProxyTemplateConfig", cfg.Name)
		if res == nil {
			return fmt.Errorf("no result in %+v; status %+v", r, stored.Status.Conditions)
		}
		if res.Rule != configcheck.RenderRule || res.Result != "fail" || !strings.Contains(res.Message, "(RenderFailed)") {
			t.Fatalf("result %+v", res)
		}
		if strings.Contains(res.Message, marker) {
			t.Fatalf("the report quotes what the rendering read: %q", res.Message)
		}
		return nil
	})

	eventually(t, "the missing Service is created", func() error {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.app, Name: "late-service"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "late"}},
		}
		return c.Create(ctx, svc)
	})
	eventually(t, "mended, the report goes", func() error {
		r, err := policyReport(t, cfg.Namespace, "configcheck")
		if err != nil || r != nil {
			return fmt.Errorf("report %+v, %v", r, err)
		}
		return nil
	})
}
