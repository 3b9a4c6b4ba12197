package e2e

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// image.digest pins the image: repository@digest, the tag kept beside it
// only when one was set, in the Deployment and in the uninstall hook alike.
func TestHelmImageDigest(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"image.digest=" + digest}, "ghcr.io/gatehouse-dev/gatehouse@" + digest},
		{[]string{"image.digest=" + digest, "image.tag=v9"}, "ghcr.io/gatehouse-dev/gatehouse:v9@" + digest},
		{[]string{"image.tag=v9"}, "ghcr.io/gatehouse-dev/gatehouse:v9"},
	} {
		objs := renderChart(t, "gatehouse-system", tc.set...)
		d := findObject[appsv1.Deployment](t, objs, "Deployment")
		job := findObject[batchv1.Job](t, objs, "Job")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != tc.want {
			t.Errorf("--set %v: Deployment image %q, want %q", tc.set, got, tc.want)
		}
		if got := job.Spec.Template.Spec.Containers[0].Image; got != tc.want {
			t.Errorf("--set %v: uninstall hook image %q, want %q", tc.set, got, tc.want)
		}
	}
}

// The ServiceMonitor takes scrapeTimeout and both relabelings; the
// PodMonitor takes the same, and with metrics.secure authenticates with a
// token from a Secret (authorization), never the deprecated
// bearerTokenFile, and verifies the serving certificate.
func TestHelmScrapeMonitors(t *testing.T) {
	ns := namespace(t, "helm-monitors")
	objs := renderChart(t, ns,
		"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.scrapeTimeout=10s",
		"metrics.serviceMonitor.relabelings[0].action=labeldrop", "metrics.serviceMonitor.relabelings[0].regex=pod",
		"metrics.serviceMonitor.metricRelabelings[0].action=drop", "metrics.serviceMonitor.metricRelabelings[0].regex=go_.*",
		"metrics.serviceMonitor.metricRelabelings[0].sourceLabels={__name__}",
		"metrics.podMonitor.enabled=true", "metrics.podMonitor.interval=15s", "metrics.podMonitor.scrapeTimeout=5s",
		"metrics.podMonitor.labels.release=prom",
		"metrics.podMonitor.relabelings[0].action=replace", "metrics.podMonitor.relabelings[0].targetLabel=cluster",
		"metrics.podMonitor.relabelings[0].replacement=eu-1",
		"metrics.secure=true", "metrics.podMonitor.authorization.secretName=prometheus-token")
	monitor := func(kind string) *unstructured.Unstructured {
		t.Helper()
		for _, o := range objs {
			if o.GetKind() == kind {
				return o
			}
		}
		t.Fatalf("no %s rendered", kind)
		return nil
	}
	endpoint := func(o *unstructured.Unstructured, field string) map[string]any {
		t.Helper()
		eps, _, _ := unstructured.NestedSlice(o.Object, "spec", field)
		if len(eps) != 1 {
			t.Fatalf("%s %s: %v", o.GetKind(), field, eps)
		}
		return eps[0].(map[string]any)
	}
	sm := endpoint(monitor("ServiceMonitor"), "endpoints")
	if sm["scrapeTimeout"] != "10s" || sm["interval"] != "30s" {
		t.Errorf("ServiceMonitor endpoint %v: want interval 30s, scrapeTimeout 10s", sm)
	}
	if r, _, _ := unstructured.NestedSlice(sm, "relabelings"); len(r) != 1 || r[0].(map[string]any)["action"] != "labeldrop" {
		t.Errorf("ServiceMonitor relabelings %v", r)
	}
	if r, _, _ := unstructured.NestedSlice(sm, "metricRelabelings"); len(r) != 1 || r[0].(map[string]any)["regex"] != "go_.*" {
		t.Errorf("ServiceMonitor metricRelabelings %v", r)
	}

	pmObj := monitor("PodMonitor")
	if pmObj.GetNamespace() != ns || pmObj.GetLabels()["release"] != "prom" {
		t.Errorf("PodMonitor %s/%s labels %v", pmObj.GetNamespace(), pmObj.GetName(), pmObj.GetLabels())
	}
	if sel, _, _ := unstructured.NestedStringMap(pmObj.Object, "spec", "selector", "matchLabels"); sel["app.kubernetes.io/instance"] != helmRelease || sel["app.kubernetes.io/name"] != "gatehouse" || len(sel) != 2 {
		t.Errorf("PodMonitor selects %v, want this release's pods", sel)
	}
	pm := endpoint(pmObj, "podMetricsEndpoints")
	if pm["port"] != "metrics" || pm["interval"] != "15s" || pm["scrapeTimeout"] != "5s" || pm["scheme"] != "https" {
		t.Errorf("PodMonitor endpoint %v", pm)
	}
	if _, ok := pm["bearerTokenFile"]; ok {
		t.Error("PodMonitor uses the deprecated bearerTokenFile")
	}
	if typ, _, _ := unstructured.NestedString(pm, "authorization", "type"); typ != "Bearer" {
		t.Errorf("PodMonitor authorization %v: want Bearer", pm["authorization"])
	}
	if name, _, _ := unstructured.NestedString(pm, "authorization", "credentials", "name"); name != "prometheus-token" {
		t.Errorf("PodMonitor authorization credentials %v: want the Secret prometheus-token", pm["authorization"])
	}
	if key, _, _ := unstructured.NestedString(pm, "authorization", "credentials", "key"); key != "token" {
		t.Errorf("PodMonitor authorization key %q, want token", key)
	}
	if sn, _, _ := unstructured.NestedString(pm, "tlsConfig", "serverName"); sn != helmRelease+"-gatehouse-webhook."+ns+".svc" {
		t.Errorf("PodMonitor tlsConfig serverName %q", sn)
	}
	if r, _, _ := unstructured.NestedSlice(pm, "relabelings"); len(r) != 1 || r[0].(map[string]any)["replacement"] != "eu-1" {
		t.Errorf("PodMonitor relabelings %v", r)
	}

	// The ServiceMonitor presents Prometheus's own token by default, and a
	// Secret's through authorization once one is named.
	if sm["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("ServiceMonitor endpoint %v: want Prometheus's own token by default", sm)
	}
	for _, o := range renderChart(t, ns, "metrics.serviceMonitor.enabled=true", "metrics.secure=true",
		"metrics.serviceMonitor.authorization.secretName=prometheus-token") {
		if o.GetKind() != "ServiceMonitor" {
			continue
		}
		ep := endpoint(o, "endpoints")
		if _, ok := ep["bearerTokenFile"]; ok {
			t.Error("ServiceMonitor with authorization still uses the deprecated bearerTokenFile")
		}
		if name, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name"); name != "prometheus-token" {
			t.Errorf("ServiceMonitor authorization %v: want the Secret prometheus-token", ep["authorization"])
		}
	}

	// Plain HTTP without metrics.secure: no credentials at all.
	for _, o := range renderChart(t, ns, "metrics.podMonitor.enabled=true") {
		if o.GetKind() != "PodMonitor" {
			continue
		}
		ep := endpoint(o, "podMetricsEndpoints")
		if _, ok := ep["authorization"]; ok || ep["scheme"] == "https" {
			t.Errorf("PodMonitor without metrics.secure: %v", ep)
		}
		if _, ok := ep["scrapeTimeout"]; ok {
			t.Errorf("PodMonitor scrapeTimeout %v rendered although empty", ep["scrapeTimeout"])
		}
	}
	for _, o := range renderChart(t, ns) {
		if o.GetKind() == "PodMonitor" || o.GetKind() == "ServiceMonitor" {
			t.Errorf("%s rendered by default", o.GetKind())
		}
	}
}

// No rights of the uninstall hook outlive an uninstall, failed or not: its
// ServiceAccount and roles are created before the Job (a lower weight) and
// carry delete policies for success and failure, for Helm and for Argo CD
// alike. The Job stays after a failure, for its logs, which Helm prints.
func TestHelmUninstallHookLeavesNoRBAC(t *testing.T) {
	objs := renderChart(t, "gatehouse-system")
	var rbac []string
	for _, o := range objs {
		a := o.GetAnnotations()
		if a["helm.sh/hook"] != "pre-delete" {
			continue
		}
		helmPolicy := strings.Split(a["helm.sh/hook-delete-policy"], ",")
		argoPolicy := strings.Split(a["argocd.argoproj.io/hook-delete-policy"], ",")
		if o.GetKind() == "Job" {
			if a["helm.sh/hook-weight"] != "0" || !slices.Contains(helmPolicy, "hook-succeeded") || a["helm.sh/hook-output-log-policy"] != "hook-failed" {
				t.Errorf("uninstall Job annotations %v: want weight 0, deleted on success, logs printed on failure", a)
			}
			continue
		}
		rbac = append(rbac, o.GetKind())
		if a["helm.sh/hook-weight"] != "-10" {
			t.Errorf("%s %s: weight %q, want -10 (before the Job)", o.GetKind(), o.GetName(), a["helm.sh/hook-weight"])
		}
		for _, p := range []string{"before-hook-creation", "hook-succeeded", "hook-failed"} {
			if !slices.Contains(helmPolicy, p) {
				t.Errorf("%s %s: helm.sh/hook-delete-policy %v lacks %s", o.GetKind(), o.GetName(), helmPolicy, p)
			}
		}
		for _, p := range []string{"BeforeHookCreation", "HookSucceeded", "HookFailed"} {
			if !slices.Contains(argoPolicy, p) {
				t.Errorf("%s %s: argocd.argoproj.io/hook-delete-policy %v lacks %s", o.GetKind(), o.GetName(), argoPolicy, p)
			}
		}
	}
	slices.Sort(rbac)
	if want := []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"}; !slices.Equal(rbac, want) {
		t.Errorf("uninstall hook's identity %v, want %v", rbac, want)
	}
}
