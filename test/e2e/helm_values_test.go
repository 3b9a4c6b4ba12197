package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

var pvsafeSettings = []string{
	"modules.pvsafe.webhook.failurePolicy=Ignore",
	"modules.pvsafe.webhook.timeoutSeconds=4",
	"modules.pvsafe.webhook.namespaceExclusions={tenant-z,tenant-a}",
	"modules.pvsafe.webhook.objectSelector.matchLabels.protected=yes",
	"modules.pvsafe.webhook.matchConditions[0].name=not-ci",
	"modules.pvsafe.webhook.matchConditions[0].expression=request.userInfo.username != 'ci'",
}

// The same values reach the --config file (managed mode: Gatehouse renders
// them) and the static configuration the chart renders, alike: the static
// entry equals what Gatehouse's renderer makes of the same settings.
func TestHelmWebhookSettingsReachBothModes(t *testing.T) {
	ns := namespace(t, "helm-settings")
	objs := renderChart(t, ns, pvsafeSettings...)
	dryRunApply(t, objs)
	args := deploymentArgs(t, objs)
	wantArgs(t, args, "--config=/etc/gatehouse/config/config.yaml", "--instance-name="+helmRelease+"-gatehouse")
	cfg, _ := renderedConfig(t, objs)
	settings := cfg.Modules["pvsafe"].Webhook
	want := &webhookconfig.Settings{
		FailurePolicy: ptr.To(admissionregistrationv1.Ignore), TimeoutSeconds: ptr.To[int32](4),
		NamespaceExclusions: []string{"tenant-z", "tenant-a"},
	}
	if settings == nil || !reflect.DeepEqual(settings.FailurePolicy, want.FailurePolicy) || *settings.TimeoutSeconds != 4 ||
		!slices.Equal(settings.NamespaceExclusions, want.NamespaceExclusions) || settings.ObjectSelector.MatchLabels["protected"] != "yes" ||
		len(settings.MatchConditions) != 1 || settings.MatchConditions[0].Expression != "request.userInfo.username != 'ci'" {
		t.Fatalf("pvsafe settings in the --config file: %+v", settings)
	}
	if c, ok := cfg.Modules["nodegroup"]; ok {
		t.Errorf("nodegroup, off by default, in the --config file: %+v", c)
	}

	// Static mode renders the same.
	objs = renderChart(t, ns, append([]string{"certificates.mode=certManager", "webhooks.mode=static"}, pvsafeSettings...)...)
	dryRunApply(t, objs)
	vwc := findObject[admissionregistrationv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration")
	if vwc.Name != helmRelease+"-gatehouse-validating" || vwc.Labels[webhookconfig.InstanceLabel] != helmRelease+"-gatehouse" {
		t.Errorf("configuration %s labels %v: want the install's name and label", vwc.Name, vwc.Labels)
	}
	hook := pvsafe.New(pvsafe.Options{}).Webhooks()[0]
	hook, err := settings.Apply(hook, nil)
	if err != nil {
		t.Fatal(err)
	}
	rendered := webhookconfig.Render([]module.Webhook{hook}, webhookconfig.Target{URL: "https://x", Namespace: ns}).Validating.Webhooks[0]
	for _, w := range vwc.Webhooks {
		if w.Name != hook.Name {
			if *w.FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("webhook %s: failurePolicy %s, pvsafe's settings changed another module's", w.Name, *w.FailurePolicy)
			}
			continue
		}
		if !reflect.DeepEqual(w.FailurePolicy, rendered.FailurePolicy) || !reflect.DeepEqual(w.TimeoutSeconds, rendered.TimeoutSeconds) ||
			!reflect.DeepEqual(w.NamespaceSelector, rendered.NamespaceSelector) || !reflect.DeepEqual(w.ObjectSelector, rendered.ObjectSelector) ||
			!reflect.DeepEqual(w.MatchConditions, rendered.MatchConditions) {
			t.Errorf("static entry %s:\n failurePolicy %s timeout %d namespaceSelector %v objectSelector %v matchConditions %v\nGatehouse renders:\n failurePolicy %s timeout %d namespaceSelector %v objectSelector %v matchConditions %v",
				w.Name, *w.FailurePolicy, *w.TimeoutSeconds, w.NamespaceSelector, w.ObjectSelector, w.MatchConditions,
				*rendered.FailurePolicy, *rendered.TimeoutSeconds, rendered.NamespaceSelector, rendered.ObjectSelector, rendered.MatchConditions)
		}
		return
	}
	t.Fatalf("no static entry %s", hook.Name)
}

// On a cluster where another owner's CRD exists (the test control plane's
// nodegroups.deckhouse.io carries no Helm release annotations), the chart
// does not render it, so Helm does not fail the install, and says why.
func TestHelmForeignCRDIsNotRendered(t *testing.T) {
	ns := namespace(t, "helm-foreign")
	kubeconfig, err := controlPlane.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, "install", helmRelease, "charts/gatehouse", "--namespace", ns, "--kubeconfig", path, "--dry-run=server",
		"--set", "modules.nodegroup.enabled=true", "--set", "modules.configcheck.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	// The test control plane installed every CRD itself, without Helm's
	// annotations: each is another owner's.
	if strings.Contains(out, "kind: CustomResourceDefinition") {
		t.Error("a foreign CRD is rendered: helm install would fail with \"exists and cannot be imported\"")
	}
	if !strings.Contains(out, "CRDs not installed by this release, because another owner's already exist:\n  haproxytemplateconfigs.gatehouse.dev\n  nodegroups.deckhouse.io\nGatehouse uses them as they are") {
		t.Errorf("NOTES do not name the foreign CRD:\n%s", out[max(0, len(out)-2500):])
	}
	// helm template has no cluster: every enabled module's CRD is rendered.
	objs := renderChart(t, ns, "modules.nodegroup.enabled=true")
	crd, conv := crdConversion(t, objs)
	if crd == nil {
		t.Error("helm template rendered no nodegroups.deckhouse.io with nodegroup on")
	}
	if conv != nil && conv.Strategy != "None" {
		t.Errorf("conversion %+v in managed mode", conv)
	}
}

// topologySpreadConstraints, priorityClassName, startupProbe, leader
// election timings, the ResourceQuota and the uninstall hook.
func TestHelmDeploymentPolish(t *testing.T) {
	ns := namespace(t, "helm-polish")
	// The ResourceQuota is on by default: the default priority class must
	// schedule where a quota has to name it.
	objs := renderChart(t, ns, "leaderElection.leaseDuration=30s")
	dryRunApply(t, objs)
	d := findObject[appsv1.Deployment](t, objs, "Deployment")
	spec := d.Spec.Template.Spec
	// Spread over zones and over nodes, neither blocking scheduling on a
	// cluster with one zone, one node or no zone labels.
	var keys []string
	for _, c := range spec.TopologySpreadConstraints {
		keys = append(keys, c.TopologyKey)
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.MaxSkew != 1 || c.LabelSelector.MatchLabels["app.kubernetes.io/instance"] != helmRelease ||
			c.LabelSelector.MatchLabels["app.kubernetes.io/name"] != "gatehouse" {
			t.Errorf("topologySpreadConstraint %+v: want maxSkew 1 over this release's pods, ScheduleAnyway", c)
		}
	}
	if !slices.Equal(keys, []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}) {
		t.Errorf("topologySpreadConstraints over %v, want zones and nodes", keys)
	}
	if one := findObject[appsv1.Deployment](t, renderChart(t, ns, "replicaCount=1"), "Deployment"); len(one.Spec.Template.Spec.TopologySpreadConstraints) != 0 {
		t.Errorf("one replica, yet topologySpreadConstraints %+v", one.Spec.Template.Spec.TopologySpreadConstraints)
	}
	if spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", spec.PriorityClassName)
	}
	c := spec.Containers[0]
	if c.StartupProbe == nil || c.StartupProbe.HTTPGet.Path != "/healthz" || c.StartupProbe.FailureThreshold*c.StartupProbe.PeriodSeconds != 300 {
		t.Errorf("startupProbe %+v", c.StartupProbe)
	}
	wantArgs(t, c.Args, "--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s", "--zap-log-level=info")
	if d.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("no checksum/config annotation: a settings change would not roll the replicas")
	}
	quota := findObject[corev1.ResourceQuota](t, objs, "ResourceQuota")
	if quota.Spec.ScopeSelector == nil || !slices.Contains(quota.Spec.ScopeSelector.MatchExpressions[0].Values, "system-cluster-critical") {
		t.Errorf("ResourceQuota %+v does not admit the priority class", quota.Spec)
	}

	job := findObject[batchv1.Job](t, objs, "Job")
	if job.Annotations["helm.sh/hook"] != "pre-delete" || !strings.Contains(job.Annotations["helm.sh/hook-delete-policy"], "hook-succeeded") {
		t.Errorf("uninstall Job annotations %v", job.Annotations)
	}
	jc := job.Spec.Template.Spec.Containers[0]
	wantArgs(t, jc.Args, "uninstall", "--instance-name="+helmRelease+"-gatehouse", "--namespace="+ns, "--deployment="+helmRelease+"-gatehouse")
	if jc.Image != c.Image || job.Spec.Template.Spec.ServiceAccountName != helmRelease+"-gatehouse-uninstall" {
		t.Errorf("uninstall Job image %s service account %s", jc.Image, job.Spec.Template.Spec.ServiceAccountName)
	}
	for k, v := range job.Spec.Template.Labels {
		if d.Spec.Selector.MatchLabels[k] == v && k == "app.kubernetes.io/name" {
			t.Errorf("the hook's Pod carries the Deployment's selector label %s=%s: it would wait for itself", k, v)
		}
	}
	for _, o := range renderChart(t, ns, "uninstallHook.enabled=false", "resourceQuota.enabled=false") {
		if o.GetKind() == "Job" || strings.HasSuffix(o.GetName(), "-uninstall") {
			t.Errorf("%s %s rendered with uninstallHook.enabled=false", o.GetKind(), o.GetName())
		}
		if o.GetKind() == "ResourceQuota" {
			t.Error("ResourceQuota rendered without resourceQuota.enabled")
		}
	}
	for _, o := range renderChart(t, ns, "priorityClassName=") {
		if o.GetKind() == "ResourceQuota" {
			t.Error("ResourceQuota rendered without a priorityClassName to admit")
		}
	}
}

// TestHelmRendersForGitOps renders the chart as Argo CD and Flux's
// post-renderers see it (helm template: no cluster, lookup finds nothing)
// for a cluster where Deckhouse owns nodegroups.deckhouse.io and another
// release owns the pvsafe bypass role: neither is in what Argo would apply,
// chosen by values alone; and every object of the uninstall hook is a
// PreDelete hook for Argo CD as it is a pre-delete hook for Helm, so that
// deleting the Application removes the fail-closed webhook configurations.
func TestHelmRendersForGitOps(t *testing.T) {
	objs := renderChart(t, "gatehouse-system", "modules.nodegroup.enabled=true", "crds.external={nodegroups.deckhouse.io}", "modules.pvsafe.bypassRole=false")
	hooks := 0
	for _, obj := range objs {
		if obj.GetKind() == "CustomResourceDefinition" {
			t.Errorf("CRD %s rendered although crds.external names it", obj.GetName())
		}
		if obj.GetKind() == "ClusterRole" && obj.GetName() == pvsafe.BypassClusterRole {
			t.Error("the bypass role is rendered with modules.pvsafe.bypassRole=false")
		}
		a := obj.GetAnnotations()
		if a["helm.sh/hook"] == "pre-delete" {
			hooks++
			if a["argocd.argoproj.io/hook"] != "PreDelete" || !strings.HasPrefix(a["argocd.argoproj.io/hook-delete-policy"], "BeforeHookCreation,HookSucceeded") {
				t.Errorf("%s %s is Helm's pre-delete hook but not Argo CD's PreDelete hook: %v", obj.GetKind(), obj.GetName(), a)
			}
		} else if a["argocd.argoproj.io/hook"] != "" {
			t.Errorf("%s %s is an Argo CD hook but no Helm hook: %v", obj.GetKind(), obj.GetName(), a)
		}
	}
	if hooks == 0 {
		t.Fatal("no uninstall hook rendered: the configurations would outlive an Argo CD Application")
	}
	// Without those values helm template renders both, as it cannot see
	// the cluster: what the values are for.
	var crd, role bool
	for _, obj := range renderChart(t, "gatehouse-system", "modules.nodegroup.enabled=true") {
		crd = crd || obj.GetKind() == "CustomResourceDefinition" && obj.GetName() == "nodegroups.deckhouse.io"
		role = role || obj.GetKind() == "ClusterRole" && obj.GetName() == pvsafe.BypassClusterRole
	}
	if !crd || !role {
		t.Errorf("defaults: CRD rendered %v, bypass role rendered %v; want both", crd, role)
	}
	// Every CRD stays when its module is turned off or the Application
	// deleted, under Argo CD's and Flux's pruning (docs/gitops.md);
	// TestInstallAsArgoCDAndDeleteAsArgoCD prunes as they do.
	crds := 0
	for _, obj := range renderChart(t, "gatehouse-system", "modules.nodegroup.enabled=true", "modules.placement.enabled=true", "modules.configcheck.enabled=true") {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crds++
		a := obj.GetAnnotations()
		if a["helm.sh/resource-policy"] != "keep" || a["argocd.argoproj.io/sync-options"] != "Prune=false,Delete=false" || a["kustomize.toolkit.fluxcd.io/prune"] != "disabled" {
			t.Errorf("CRD %s may be deleted by Helm, Argo CD or Flux: %v", obj.GetName(), a)
		}
	}
	if crds != 3 {
		t.Errorf("%d CRDs rendered with every module on, want 3", crds)
	}
}

// renderedModules are the catalogue's modules configured from the chart's
// rendered --config file, as the server configures them.
func renderedModules(t *testing.T, objs []*unstructured.Unstructured) []module.Module {
	t.Helper()
	cfg, text := renderedConfig(t, objs)
	mods := catalogue.All()
	if err := app.ConfigureModules(mods, cfg.Modules, nil); err != nil {
		t.Fatalf("the rendered settings are refused: %v\n%s", err, text)
	}
	return mods
}

// renderedConfig loads the chart's rendered --config file as the server
// does, and returns it with its text.
func renderedConfig(t *testing.T, objs []*unstructured.Unstructured) (*app.FileConfig, string) {
	t.Helper()
	var config *corev1.ConfigMap
	for _, cm := range findObjects[corev1.ConfigMap](t, objs, "ConfigMap") {
		if cm.Name == helmRelease+"-gatehouse-config" {
			config = cm
		}
	}
	if config == nil {
		t.Fatal("no ConfigMap with the --config file")
	}
	text := config.Data["config.yaml"]
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := app.LoadFile(path)
	if err != nil {
		t.Fatalf("the rendered --config file does not load: %v\n%s", err, text)
	}
	return cfg, text
}

// wantSettings checks the settings the server takes from the rendered
// chart for module name, as JSON.
func wantSettings(t *testing.T, objs []*unstructured.Unstructured, name, want string) {
	t.Helper()
	for _, m := range renderedModules(t, objs) {
		if c, ok := m.(module.Configurable); ok && m.Name() == name {
			got, err := json.Marshal(c.Settings())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("%s settings from the chart: %s, want %s", name, got, want)
			}
			return
		}
	}
	t.Fatalf("no module %s with settings", name)
}

// TestHelmModuleSettingsReachTheConfigFile: the modules' settings reach
// the server through the --config file, never as per-setting arguments,
// from the older values keys (modules.pvsafe.bypass) and from
// modules.<name>.settings, which wins; the values schema (generated from
// the settings structs) refuses an unknown setting as the server does.
func TestHelmModuleSettingsReachTheConfigFile(t *testing.T) {
	on := []string{"webhooks.mode=managed", "modules.placement.enabled=true", "modules.configcheck.enabled=true"}
	objs := renderChart(t, "gatehouse-system", on...)
	for _, arg := range deploymentArgs(t, objs) {
		for _, flag := range []string{"--pvsafe-", "--placement-", "--configcheck-"} {
			if strings.HasPrefix(arg, flag) {
				t.Errorf("argument %s: settings belong in the --config file", arg)
			}
		}
	}
	wantSettings(t, objs, "pvsafe", `{"bypass":"authorized"}`)
	wantSettings(t, objs, "placement", `{"platformUsers":["system:serviceaccount:flux-system:helm-controller"],"platformGroups":["system:masters"]}`)
	wantSettings(t, objs, "configcheck", `{"confinement":"required"}`)

	objs = renderChart(t, "gatehouse-system", append(on,
		"modules.placement.platformGroups=null", "modules.placement.lineageLabels=true", "modules.placement.settings.platformUsers={a,b}",
		"modules.pvsafe.bypass=authorized", "modules.pvsafe.settings.bypass=label",
		"modules.configcheck.confinement=bestEffort", "modules.configcheck.settings.allowLua=true")...)
	wantSettings(t, objs, "pvsafe", `{"bypass":"label"}`)
	wantSettings(t, objs, "placement", `{"platformUsers":["a","b"],"platformGroups":["system:masters"],"lineageLabels":true}`)
	wantSettings(t, objs, "configcheck", `{"allowLua":true,"confinement":"bestEffort"}`)

	out, err := helm(t, "template", helmRelease, "charts/gatehouse", "--set", "modules.pvsafe.settings.bypas=label")
	if err == nil || !strings.Contains(out+err.Error(), "bypas") {
		t.Errorf("an unknown setting rendered: %v\n%s", err, out)
	}
}
