package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// The chart is rendered with the pinned bin/helm (make bin/helm) and what it
// renders is applied to the test control plane with a server-side dry run.

const helmRelease = "gh"

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root, _ := testenv.RepoRoot()
	bin := filepath.Join(root, "bin/helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: build it with `make %s`", err, bin)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), errors.New(err.Error() + ": " + stderr.String() + string(out))
	}
	return string(out), nil
}

// renderChart runs helm template in namespace ns and decodes the objects.
func renderChart(t *testing.T, ns string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", helmRelease, "charts/gatehouse", "--namespace", ns}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return decodeRender(t, args)
}

// decodeRender runs helm with args and decodes the objects it prints.
func decodeRender(t *testing.T, args []string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm %v: %v", args, err)
	}
	return decodeObjects(t, []byte(out))
}

// decodeObjects are the objects of a multi-document YAML text, empty
// documents left out.
func decodeObjects(t *testing.T, text []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	docs, err := testenv.YAMLDocuments(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	return objs
}

// dryRunApply applies every object with a server-side dry run; kinds whose
// API the test control plane lacks (cert-manager) are returned instead.
func dryRunApply(t *testing.T, objs []*unstructured.Unstructured) (notApplied []*unstructured.Unstructured) {
	t.Helper()
	for _, obj := range objs {
		if obj.GroupVersionKind().Group == "cert-manager.io" {
			notApplied = append(notApplied, obj)
			continue
		}
		// The helm test's objects exist only while `helm test` runs: its Pod
		// names a ServiceAccount a dry run never creates
		// (TestHelmTestChecksThroughTheAPIServer creates them for real).
		if obj.GetAnnotations()["helm.sh/hook"] == "test" {
			continue
		}
		// Validated as a whole object, never merged with what earlier tests
		// left in the shared cluster (a server-side apply would merge the
		// chart's service reference into a managed Gatehouse's url):
		// a dry-run create, or a dry-run replace of an existing namesake.
		ctx := context.Background()
		candidate := obj.DeepCopy()
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(obj.GroupVersionKind())
		var err error
		switch getErr := controlPlane.Client.Get(ctx, client.ObjectKeyFromObject(obj), existing); {
		case getErr == nil:
			candidate.SetResourceVersion(existing.GetResourceVersion())
			err = controlPlane.Client.Update(ctx, candidate, client.DryRunAll)
		case apierrors.IsNotFound(getErr):
			err = controlPlane.Client.Create(ctx, candidate, client.DryRunAll)
		default:
			err = getErr
		}
		if err != nil {
			t.Errorf("dry-run apply %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return notApplied
}

func findObjects[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) []*T {
	t.Helper()
	var out []*T
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		v := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, v); err != nil {
			t.Fatalf("%s %s: %v", kind, o.GetName(), err)
		}
		out = append(out, v)
	}
	return out
}

func findObject[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) *T {
	t.Helper()
	found := findObjects[T](t, objs, kind)
	if len(found) != 1 {
		t.Fatalf("want one %s, rendered %d", kind, len(found))
	}
	return found[0]
}

// renderedWebhooks checks what every rendered webhook must carry (the
// release's Service, a namespaceSelector excluding kube-system,
// kube-node-lease and the release namespace) and returns their clientConfigs
// by name.
func renderedWebhooks(t *testing.T, objs []*unstructured.Unstructured, ns string) map[string]admissionregistrationv1.WebhookClientConfig {
	t.Helper()
	out := map[string]admissionregistrationv1.WebhookClientConfig{}
	check := func(name string, sel *metav1.LabelSelector, cc admissionregistrationv1.WebhookClientConfig) {
		out[name] = cc
		if cc.Service == nil || cc.Service.Namespace != ns || cc.Service.Name != helmRelease+"-gatehouse-webhook" || cc.Service.Port == nil || *cc.Service.Port != 443 {
			t.Errorf("webhook %s: service reference %+v, want %s/%s-gatehouse-webhook:443", name, cc.Service, ns, helmRelease)
		}
		var excluded []string
		if sel != nil {
			for _, e := range sel.MatchExpressions {
				if e.Key == "kubernetes.io/metadata.name" && e.Operator == metav1.LabelSelectorOpNotIn {
					excluded = append(excluded, e.Values...)
				}
			}
		}
		for _, want := range []string{"kube-system", "kube-node-lease", ns} {
			if !slices.Contains(excluded, want) {
				t.Errorf("webhook %s: namespaceSelector %v does not exclude %s", name, sel, want)
			}
		}
	}
	for _, c := range findObjects[admissionregistrationv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration") {
		for _, w := range c.Webhooks {
			check(w.Name, w.NamespaceSelector, w.ClientConfig)
		}
	}
	for _, c := range findObjects[admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration") {
		for _, w := range c.Webhooks {
			check(w.Name, w.NamespaceSelector, w.ClientConfig)
		}
	}
	return out
}

// committedWebhooks are the webhook names of config/webhook/manifests.yaml,
// rendered from the modules' declarations.
func committedWebhooks(t *testing.T) []string {
	t.Helper()
	root, _ := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "config/webhook/manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	docs, err := testenv.YAMLDocuments(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		var c struct {
			Webhooks []struct{ Name string } `json:"webhooks"`
		}
		if err := utilyaml.Unmarshal(doc, &c); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.Webhooks {
			names = append(names, w.Name)
		}
	}
	slices.Sort(names)
	return names
}

func deploymentArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	d := findObject[appsv1.Deployment](t, objs, "Deployment")
	// The server alone; with configcheck its sandbox runner is a sidecar
	// (TestHelmConfigcheckSeparateIdentity).
	containers := d.Spec.Template.Spec.Containers
	if len(containers) != 1 || containers[0].Name != "gatehouse" {
		t.Fatalf("want the gatehouse container alone, got %d containers", len(containers))
	}
	c := containers[0]
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext %+v: want non-root, read-only root fs, drop ALL, seccomp RuntimeDefault", sc)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", d.Spec.Replicas)
	}
	return c.Args
}

func wantArgs(t *testing.T, args []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("Deployment args %q lack %q", args, w)
		}
	}
}

// crdConversion is the rendered nodegroups.deckhouse.io and its conversion
// stanza; nil when it is not rendered (nodegroup off, the default).
func crdConversion(t *testing.T, objs []*unstructured.Unstructured) (*apiextensionsv1.CustomResourceDefinition, *apiextensionsv1.CustomResourceConversion) {
	t.Helper()
	for _, crd := range findObjects[apiextensionsv1.CustomResourceDefinition](t, objs, "CustomResourceDefinition") {
		if crd.Name == "nodegroups.deckhouse.io" {
			return crd, crd.Spec.Conversion
		}
	}
	return nil, nil
}

func TestHelmLint(t *testing.T) {
	for _, set := range [][]string{
		{},
		{"certificates.mode=certManager"},
		{"certificates.mode=certManager", "webhooks.mode=static"},
		{"certificates.mode=secret", "certificates.secret.name=tls"},
		{"certificates.mode=secret", "certificates.secret.name=tls", "webhooks.mode=static", "certificates.secret.caBundle=" + base64.StdEncoding.EncodeToString([]byte("ca"))},
		{"modules.nodegroup.enabled=true", "metrics.serviceMonitor.enabled=true"},
		{"modules.placement.enabled=true", "modules.placement.ownerResources[0].apiGroup=kubevirt.io", "modules.placement.ownerResources[0].resources={virtualmachineinstances}"},
		{"modules.configcheck.enabled=true", "modules.configcheck.watchedResources[0].apiGroup=", "modules.configcheck.watchedResources[0].resources={configmaps}"},
		{"networkPolicy.enabled=true", "metrics.secure=true", "metrics.serviceMonitor.enabled=true", "webhooks.clientAuth.enabled=true", "webhooks.clientAuth.caConfigMap=apiserver-ca"},
	} {
		args := []string{"lint", "--strict", "charts/gatehouse"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, err := helm(t, args...); err != nil {
			t.Errorf("helm lint %v: %v\n%s", set, err, out)
		}
	}
}

func TestHelmRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"certificates.mode=bogus"}, "at '/certificates/mode': value must be one of 'selfManaged', 'certManager', 'secret'"},
		{[]string{"certificates.mode=selfSigned"}, "use selfManaged"},
		{[]string{"certificates.mode=secret"}, "certificates.secret.name is required"},
		{[]string{"certificates.mode=secret", "certificates.secret.name=tls", "webhooks.mode=static"}, "certificates.secret.caBundle"},
		{[]string{"webhooks.mode=static"}, "selfManaged needs webhooks.mode=managed"},
		{[]string{"webhooks.mode=bogus"}, "at '/webhooks/mode': value must be one of 'managed', 'static'"},
		{[]string{"modules.pvsafe.enforcement=audit"}, "at '/modules/pvsafe/enforcement': value must be one of 'enforce', 'warn'"},
		{[]string{"modules.pvsafe.bypass=anyone"}, "at '/modules/pvsafe/bypass': value must be one of 'authorized', 'label'"},
		// values.schema.json: a type error or a typo is an error, not a
		// value silently ignored.
		{[]string{"replicaCount=abc"}, "at '/replicaCount': got string, want integer"},
		{[]string{"replicaCoutn=2"}, "additional properties 'replicaCoutn' not allowed"},
		{[]string{"modules.pvsafe.enabeld=true"}, "at '/modules/pvsafe': additional properties 'enabeld' not allowed"},
		{[]string{"modules.pvsafe.webhook.timeoutSeconds=31"}, "at '/modules/pvsafe/webhook/timeoutSeconds': maximum: got 31, want 30"},
		{[]string{"modules.pvsafe.webhook.failurePolicy=Open"}, "at '/modules/pvsafe/webhook/failurePolicy': value must be one of 'Fail', 'Ignore'"},
		{[]string{"modules.pvsafe.webhook.namespaceExclusions={Bad_Name}"}, "at '/modules/pvsafe/webhook/namespaceExclusions/0'"},
		{[]string{"logLevel=verbose"}, "at '/logLevel'"},
		{[]string{"leaderElection.leaseDuration=soon"}, "at '/leaderElection/leaseDuration'"},
		{[]string{"policyReports.interval=soon"}, "at '/policyReports/interval'"},
		{[]string{"policyReports.maxResults=0"}, "at '/policyReports/maxResults'"},
		// A guard's failurePolicy and objectSelector are locked, in static
		// mode as Gatehouse locks them in managed mode.
		{[]string{"certificates.mode=certManager", "webhooks.mode=static", "modules.placement.enabled=true", "modules.placement.webhook.failurePolicy=Ignore"},
			"modules.placement.webhook.failurePolicy: webhook placement-affinityclass.gatehouse.dev must stay Fail: it keeps a tenant's placement boundary"},
		{[]string{"certificates.mode=certManager", "webhooks.mode=static", "modules.placement.enabled=true", "modules.placement.webhook.objectSelector.matchLabels.a=b"},
			"modules.placement.webhook.objectSelector: webhook placement-affinityclass.gatehouse.dev takes no objectSelector"},
		// And at render time in managed mode (the default), rather than a
		// Gatehouse that refuses to start after the upgrade.
		{[]string{"modules.placement.enabled=true", "modules.placement.webhook.failurePolicy=Ignore"},
			"modules.placement.webhook.failurePolicy: webhook placement-affinityclass.gatehouse.dev must stay Fail: it keeps a tenant's placement boundary"},
		{[]string{"modules.placement.enabled=true", "modules.placement.webhook.objectSelector.matchLabels.a=b"},
			"modules.placement.webhook.objectSelector: webhook placement-affinityclass.gatehouse.dev takes no objectSelector"},
		// Match conditions are refused where an objectSelector is, in both
		// modes; a name the webhook declares already is an error.
		{[]string{"modules.placement.enabled=true", "modules.placement.webhook.matchConditions[0].name=a", "modules.placement.webhook.matchConditions[0].expression=request.dryRun"},
			"modules.placement.webhook.matchConditions: webhook placement-affinityclass.gatehouse.dev takes no matchConditions"},
		{[]string{"certificates.mode=certManager", "webhooks.mode=static", "modules.placement.enabled=true",
			"modules.placement.webhook.matchConditions[0].name=a", "modules.placement.webhook.matchConditions[0].expression=request.dryRun"},
			"modules.placement.webhook.matchConditions: webhook placement-affinityclass.gatehouse.dev takes no matchConditions"},
		{[]string{"modules.pvsafe.webhook.matchConditions[0].name=a"}, "at '/modules/pvsafe/webhook/matchConditions/0': missing property 'expression'"},
		// configcheck's author and config webhooks see every namespace but
		// the always-excluded ones: a config they do not see carries a
		// record nobody checked.
		{[]string{"modules.configcheck.enabled=true", "modules.configcheck.webhook.namespaceExclusions={tenant-a}"},
			"excludes only kube-system, kube-node-lease and Gatehouse's namespace: a config the webhooks do not see carries a record nobody checked"},
		{[]string{"certificates.mode=certManager", "webhooks.mode=static", "modules.configcheck.enabled=true", "modules.configcheck.webhook.objectSelector.matchLabels.a=b"},
			"modules.configcheck.webhook.objectSelector: webhook configcheck-"},
		// A memory limit GOMEMLIMIT cannot be derived from: 512m is half a
		// byte to Kubernetes, 1gb no quantity at all.
		{[]string{"resources.limits.memory=512m"}, `resources.limits.memory "512m": not a memory quantity`},
		{[]string{"resources.limits.memory=1gb"}, `resources.limits.memory "1gb": not a memory quantity`},
		{[]string{"image.digest=sha256:abc"}, "at '/image/digest'"},
		{[]string{"metrics.podMonitor.enabled=true", "metrics.secure=true"}, "metrics.podMonitor.authorization.secretName is required"},
		{[]string{"metrics.serviceMonitor.scrapeTimeout=10 seconds"}, "at '/metrics/serviceMonitor/scrapeTimeout'"},
		{[]string{"modules.pvsafe.enabled=false"}, "enable at least one module"},
		{[]string{"webhooks.clientAuth.enabled=true"}, "needs caSecret or caConfigMap"},
		{[]string{"webhooks.clientAuth.enabled=true", "webhooks.clientAuth.caSecret=a", "webhooks.clientAuth.caConfigMap=b"}, "not both"},
	} {
		args := []string{"template", helmRelease, "charts/gatehouse"}
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		if _, err := helm(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm template %v: error %v, want %q", tc.set, err, tc.want)
		}
	}
}

// noWebhookConfigurations checks managed mode: Gatehouse writes the webhook
// configurations and the CRD conversion stanza, so the chart renders neither.
func noWebhookConfigurations(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			t.Errorf("%s %s rendered in webhooks.mode=managed", o.GetKind(), o.GetName())
		}
		if _, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("%s %s: cainjector annotation in webhooks.mode=managed", o.GetKind(), o.GetName())
		}
	}
	if _, conv := crdConversion(t, objs); conv != nil && conv.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("CRD conversion %+v rendered in webhooks.mode=managed; an upgrade would reset what Gatehouse wrote", conv)
	}
}

// coreRole is the core's Role in the release namespace: the certificate
// Secret and leader election.
func coreRole(t *testing.T, objs []*unstructured.Unstructured, ns string) *rbacv1.Role {
	t.Helper()
	for _, r := range findObjects[rbacv1.Role](t, objs, "Role") {
		if r.Name == helmRelease+"-gatehouse" && r.Namespace == ns {
			return r
		}
	}
	return nil
}

func allows(r *rbacv1.Role, group, resource, name, verb string) bool {
	if r == nil {
		return false
	}
	for _, rule := range r.Rules {
		if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) &&
			(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, name)) {
			return true
		}
	}
	return false
}

// TestHelmDefaults: self-managed certificates and managed webhooks.
func TestHelmDefaults(t *testing.T) {
	ns := namespace(t, "helm-defaults")
	objs := renderChart(t, ns)
	dryRunApply(t, objs)
	noWebhookConfigurations(t, objs)
	if len(findObjects[corev1.Secret](t, objs, "Secret")) != 0 {
		t.Error("the chart renders a Secret; Gatehouse creates it in selfManaged mode")
	}
	secret := helmRelease + "-gatehouse-serving-cert"
	args := deploymentArgs(t, objs)
	// pvsafe alone by default: nodegroup is for Deckhouse clusters.
	wantArgs(t, args, "--modules=pvsafe", "--cert-secret="+ns+"/"+secret, "--self-managed-certs",
		"--webhook-service="+helmRelease+"-gatehouse-webhook", "--leader-elect")
	svc := findObjects[corev1.Service](t, objs, "Service")
	if !slices.ContainsFunc(svc, func(s *corev1.Service) bool {
		return s.Name == helmRelease+"-gatehouse-webhook" && len(s.Spec.Ports) == 1 && s.Spec.Ports[0].Port == 443
	}) {
		t.Error("no webhook Service on port 443")
	}

	role := coreRole(t, objs, ns)
	for _, verb := range []string{"get", "list", "watch", "update", "create", "patch"} {
		if !allows(role, "", "secrets", secret, verb) {
			t.Errorf("core Role does not allow %s on Secret %s", verb, secret)
		}
	}
	// The Secret is created by server-side apply, which the API server
	// authorizes with its name: no other Secret may be created.
	for _, verb := range []string{"get", "list", "watch", "update", "create", "patch"} {
		if allows(role, "", "secrets", "another-secret", verb) {
			t.Errorf("core Role allows %s on every Secret", verb)
		}
	}
	for _, verb := range []string{"get", "update"} {
		if !allows(role, "coordination.k8s.io", "leases", app.LeaseName(helmRelease+"-gatehouse"), verb) || allows(role, "coordination.k8s.io", "leases", "another-lease", verb) {
			t.Errorf("core Role does not allow %s on lease %s alone", verb, app.LeaseName(helmRelease+"-gatehouse"))
		}
	}
	if !allows(role, "coordination.k8s.io", "leases", "", "create") {
		t.Error("core Role does not allow creating the lease")
	}
	bound := false
	for _, b := range findObjects[rbacv1.RoleBinding](t, objs, "RoleBinding") {
		if b.RoleRef.Name == role.Name && b.Namespace == ns && len(b.Subjects) == 1 && b.Subjects[0].Name == helmRelease+"-gatehouse" {
			bound = true
		}
	}
	if !bound {
		t.Error("core Role not bound to the ServiceAccount")
	}
}

func TestHelmCertManagerStatic(t *testing.T) {
	ns := namespace(t, "helm-certmanager")
	// Every module on, as in config/default, whose webhooks are compared.
	objs := renderChart(t, ns, "certificates.mode=certManager", "webhooks.mode=static", "modules.nodegroup.enabled=true", "modules.placement.enabled=true", "modules.configcheck.enabled=true")
	hooks := renderedWebhooks(t, objs, ns)
	var names []string
	for name, cc := range hooks {
		names = append(names, name)
		if len(cc.CABundle) != 0 {
			t.Errorf("webhook %s: caBundle set; cert-manager's cainjector owns it", name)
		}
	}
	slices.Sort(names)
	if want := committedWebhooks(t); !slices.Equal(names, want) {
		t.Errorf("chart renders webhooks %v, config/webhook/manifests.yaml has %v", names, want)
	}
	inject := ns + "/" + helmRelease + "-gatehouse-serving"
	// cainjector fills every webhook configuration and the CRDs that have a
	// conversion webhook (nodegroups); the other CRDs need no CA.
	for _, o := range objs {
		want := ""
		switch o.GetKind() {
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			want = inject
		case "CustomResourceDefinition":
			if o.GetName() == "nodegroups.deckhouse.io" {
				want = inject
			}
		default:
			continue
		}
		if got := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != want {
			t.Errorf("%s %s: cert-manager.io/inject-ca-from %q, want %q", o.GetKind(), o.GetName(), got, want)
		}
	}
	_, conv := crdConversion(t, objs)
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook.ClientConfig.Service.Namespace != ns ||
		conv.Webhook.ClientConfig.Service.Path == nil || *conv.Webhook.ClientConfig.Service.Path != "/convert-nodegroup" || len(conv.Webhook.ClientConfig.CABundle) != 0 {
		t.Errorf("CRD conversion %+v: want a webhook to %s/.../convert-nodegroup without caBundle", conv, ns)
	}
	secret := helmRelease + "-gatehouse-serving-cert"
	args := deploymentArgs(t, objs)
	wantArgs(t, args, "--modules=configcheck,nodegroup,placement,pvsafe", "--enforcement=configcheck=enforce,nodegroup=enforce,placement=enforce,pvsafe=enforce", "--cert-secret="+ns+"/"+secret)
	for _, a := range args {
		if strings.HasPrefix(a, "--webhook-service") || a == "--leader-elect" || a == "--self-managed-certs" {
			t.Errorf("Deployment arg %q in static cert-manager mode", a)
		}
	}
	if role := coreRole(t, objs, ns); allows(role, "coordination.k8s.io", "leases", app.LeaseName(helmRelease+"-gatehouse"), "get") ||
		allows(role, "", "secrets", secret, "create") || allows(role, "", "secrets", secret, "update") {
		t.Errorf("core Role %+v: leases or Secret writes without leader election or self-managed certificates", role)
	}
	certManagerObjects(t, dryRunApply(t, objs), ns, secret)
}

func TestHelmCertManagerManaged(t *testing.T) {
	ns := namespace(t, "helm-certmanager-managed")
	objs := renderChart(t, ns, "certificates.mode=certManager", "modules.nodegroup.enabled=true", "modules.pvsafe.enforcement=warn")
	noWebhookConfigurations(t, objs)
	args := deploymentArgs(t, objs)
	wantArgs(t, args, "--enforcement=nodegroup=enforce,pvsafe=warn", "--cert-secret="+ns+"/"+helmRelease+"-gatehouse-serving-cert",
		"--webhook-service="+helmRelease+"-gatehouse-webhook", "--leader-elect")
	if slices.Contains(args, "--self-managed-certs") {
		t.Error("--self-managed-certs with cert-manager")
	}
	role := coreRole(t, objs, ns)
	if !allows(role, "coordination.k8s.io", "leases", app.LeaseName(helmRelease+"-gatehouse"), "update") || allows(role, "", "secrets", helmRelease+"-gatehouse-serving-cert", "create") {
		t.Errorf("core Role %+v: want leases, no Secret writes", role)
	}
	certManagerObjects(t, dryRunApply(t, objs), ns, helmRelease+"-gatehouse-serving-cert")
}

// certManagerObjects checks the Issuer and Certificate the test control
// plane could not apply (it has no cert-manager).
func certManagerObjects(t *testing.T, notApplied []*unstructured.Unstructured, ns, secret string) {
	t.Helper()
	var kinds []string
	for _, o := range notApplied {
		kinds = append(kinds, o.GetKind())
		if o.GetKind() != "Certificate" {
			continue
		}
		spec, _ := o.Object["spec"].(map[string]any)
		if spec["secretName"] != secret {
			t.Errorf("Certificate secretName %v, want %s", spec["secretName"], secret)
		}
		dns, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "dnsNames")
		if !slices.Contains(dns, helmRelease+"-gatehouse-webhook."+ns+".svc") {
			t.Errorf("Certificate dnsNames %v lack the Service's name", dns)
		}
		if name, _, _ := unstructured.NestedString(o.Object, "spec", "issuerRef", "name"); name != helmRelease+"-gatehouse-selfsigned" {
			t.Errorf("Certificate issuerRef %q, want the rendered Issuer", name)
		}
		if o.GetNamespace() != ns || o.GetName() != helmRelease+"-gatehouse-serving" {
			t.Errorf("Certificate %s/%s, want %s/%s-gatehouse-serving", o.GetNamespace(), o.GetName(), ns, helmRelease)
		}
	}
	slices.Sort(kinds)
	if !slices.Equal(kinds, []string{"Certificate", "Issuer"}) {
		t.Errorf("cert-manager objects %v, want Certificate and Issuer", kinds)
	}
}

func TestHelmExistingSecretAndDisabledModule(t *testing.T) {
	ns := namespace(t, "helm-secret")
	ca := []byte("-----BEGIN CERTIFICATE-----\nnot checked by the chart\n-----END CERTIFICATE-----\n")
	objs := renderChart(t, ns, "certificates.mode=secret", "certificates.secret.name=my-tls", "webhooks.mode=static",
		"certificates.secret.caBundle="+base64.StdEncoding.EncodeToString(ca))
	dryRunApply(t, objs)

	hooks := renderedWebhooks(t, objs, ns)
	if _, ok := hooks["pvsafe.gatehouse.dev"]; !ok || len(hooks) != 1 {
		t.Errorf("webhooks %v, want only pvsafe.gatehouse.dev with nodegroup off (the default)", hooks)
	}
	for name, cc := range hooks {
		if !bytes.Equal(cc.CABundle, ca) {
			t.Errorf("webhook %s: caBundle %q, want the configured one", name, cc.CABundle)
		}
	}
	if len(findObjects[corev1.Secret](t, objs, "Secret")) != 0 {
		t.Error("the chart renders a Secret in secret mode")
	}
	// Only the enabled modules' CRDs: with nodegroup off (the default) the
	// chart must not try to own Deckhouse's nodegroups.deckhouse.io.
	for _, crd := range findObjects[apiextensionsv1.CustomResourceDefinition](t, objs, "CustomResourceDefinition") {
		t.Errorf("CRD %s rendered with nodegroup off (pvsafe has none)", crd.Name)
	}
	args := deploymentArgs(t, objs)
	wantArgs(t, args, "--modules=pvsafe", "--enforcement=pvsafe=enforce", "--cert-secret="+ns+"/my-tls")
	for _, a := range args {
		if strings.Contains(a, "nodegroup") {
			t.Errorf("Deployment arg %q names the disabled module", a)
		}
	}

	// Managed: the caBundle comes from the Secret's ca.crt, read by Gatehouse.
	objs = renderChart(t, ns, "certificates.mode=secret", "certificates.secret.name=my-tls")
	dryRunApply(t, objs)
	noWebhookConfigurations(t, objs)
	wantArgs(t, deploymentArgs(t, objs), "--cert-secret="+ns+"/my-tls", "--webhook-service="+helmRelease+"-gatehouse-webhook", "--leader-elect")
	if allows(coreRole(t, objs, ns), "", "secrets", "my-tls", "update") {
		t.Error("Gatehouse may write a Secret it does not manage")
	}
}

// TestHelmRBAC checks that the chart's RBAC is config/'s: rendered as
// config/ deploys (every module, self-managed certificates, managed
// webhooks, leader election, release gatehouse in gatehouse-system), each
// source's roles grant what config/rbac/<source>/role.yaml grants, no more
// and no less. The core's rules are written twice (the chart's template for
// its modes, internal/app/rbac.go's markers): this keeps them equal.
func TestHelmRBAC(t *testing.T) {
	const ns = "gatehouse-system"
	fixedNamespace(t, ns)
	args := []string{"template", "gatehouse", "charts/gatehouse", "--namespace", ns, "--set", "fullnameOverride=gatehouse"}
	for _, m := range chartModules {
		args = append(args, "--set", "modules."+m+".enabled=true")
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{} // source -> granted atoms
	var rbacObjs []*unstructured.Unstructured
	docs, err := testenv.YAMLDocuments([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		var r rbacv1.Role
		if err := utilyaml.Unmarshal(doc, &r); err != nil {
			t.Fatal(err)
		}
		// Gatehouse's own roles (not those for people, such as pvsafe's
		// bypass, nor the uninstall hook's, which exist only while it runs).
		if (r.Kind == "Role" || r.Kind == "ClusterRole") && r.Labels["gatehouse.dev/granted-to"] != "users" && r.Labels["gatehouse.dev/rbac-for"] != "uninstall" && r.Labels["gatehouse.dev/rbac-for"] != "test" {
			source := r.Labels["gatehouse.dev/rbac-for"]
			got[source] = append(got[source], grants(r.Kind, r.Namespace, r.Rules)...)
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatal(err)
		}
		if obj.GroupVersionKind().Group == rbacv1.GroupName || obj.GetKind() == "ServiceAccount" {
			rbacObjs = append(rbacObjs, obj)
		}
	}
	root, _ := testenv.RepoRoot()
	dirs, err := filepath.Glob(filepath.Join(root, "config/rbac/*/role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for _, path := range dirs {
		source := filepath.Base(filepath.Dir(path))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := testenv.YAMLDocuments(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range docs {
			var r rbacv1.Role
			if err := utilyaml.Unmarshal(doc, &r); err != nil {
				t.Fatal(err)
			}
			want[source] = append(want[source], grants(r.Kind, r.Namespace, r.Rules)...)
		}
	}
	if len(want) != len(chartModules)+1 {
		t.Errorf("config/rbac has roles of %v, want the core's and every module's %v", keys(want), chartModules)
	}
	if !slices.Equal(keys(got), keys(want)) {
		t.Errorf("chart renders roles of %v, config/rbac has %v", keys(got), keys(want))
	}
	for source, w := range want {
		slices.Sort(w)
		g := slices.Compact(slices.Sorted(slices.Values(got[source])))
		if w = slices.Compact(w); !slices.Equal(g, w) {
			t.Errorf("%s: the chart grants\n%s\nconfig/rbac/%s/role.yaml grants\n%s", source, strings.Join(g, "\n"), source, strings.Join(w, "\n"))
		}
	}
	dryRunApply(t, rbacObjs)
}

// TestHelmPVSafeBypassRole: in the default authorized bypass mode the chart
// sets pvsafe's setting bypass in the --config file and renders config/'s
// ClusterRole granting the bypass, aggregated into no other role; in the
// label mode, no such role.
func TestHelmPVSafeBypassRole(t *testing.T) {
	objs := renderChart(t, "gatehouse-system")
	wantSettings(t, objs, "pvsafe", `{"bypass":"authorized"}`)
	root, _ := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "config/rbac/pvsafe/bypass_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want rbacv1.ClusterRole
	if err := utilyaml.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	var found *rbacv1.ClusterRole
	for _, r := range findObjects[rbacv1.ClusterRole](t, objs, "ClusterRole") {
		if r.Name == pvsafe.BypassClusterRole {
			found = r
		}
	}
	if found == nil || fmtRules(found.Rules) != fmtRules(want.Rules) {
		t.Fatalf("ClusterRole %s: %+v, want the rules of config/rbac/pvsafe/bypass_role.yaml %+v", pvsafe.BypassClusterRole, found, want.Rules)
	}
	for k := range found.Labels {
		if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
			t.Fatalf("the bypass role is aggregated: %v", found.Labels)
		}
	}
	objs = renderChart(t, "gatehouse-system", "modules.pvsafe.bypass=label")
	wantSettings(t, objs, "pvsafe", `{"bypass":"label"}`)
	for _, r := range findObjects[rbacv1.ClusterRole](t, objs, "ClusterRole") {
		if r.Name == pvsafe.BypassClusterRole {
			t.Fatal("the label mode renders the bypass role")
		}
	}
}

// grants lists what rules grant, one "namespace group resource names verb"
// per line.
func grants(kind, namespace string, rules []rbacv1.PolicyRule) []string {
	if kind == "ClusterRole" {
		namespace = "*"
	}
	var out []string
	for _, r := range rules {
		names := slices.Sorted(slices.Values(r.ResourceNames))
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, fmt.Sprintf("%s %q %s %v %s", namespace, g, res, names, v))
				}
			}
		}
	}
	return out
}

func namedClusterRole(t *testing.T, objs []*unstructured.Unstructured, name string) *rbacv1.ClusterRole {
	t.Helper()
	for _, r := range findObjects[rbacv1.ClusterRole](t, objs, "ClusterRole") {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no ClusterRole %s", name)
	return nil
}

func fmtRules(rules []rbacv1.PolicyRule) string {
	b, _ := yaml.Marshal(rules)
	return string(b)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// placement is off by default; enabled, it passes --modules and grants
// list/watch on the operator kinds the values name.
func TestHelmPlacementModule(t *testing.T) {
	objs := renderChart(t, "gatehouse-system")
	args := findObject[appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0].Args
	wantArgs(t, args, "--modules=pvsafe")

	objs = renderChart(t, "gatehouse-system", "modules.nodegroup.enabled=true", "modules.placement.enabled=true", "modules.placement.enforcement=warn",
		"modules.placement.ownerResources[0].apiGroup=kubevirt.io", "modules.placement.ownerResources[0].resources={virtualmachineinstances}")
	args = findObject[appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0].Args
	wantArgs(t, args, "--modules=nodegroup,placement,pvsafe", "--enforcement=nodegroup=enforce,placement=warn,pvsafe=enforce")
	role := namedClusterRole(t, objs, helmRelease+"-gatehouse-placement")
	found := false
	for _, r := range role.Rules {
		if slices.Equal(r.APIGroups, []string{"kubevirt.io"}) && slices.Equal(r.Resources, []string{"virtualmachineinstances"}) && slices.Equal(r.Verbs, []string{"list", "watch"}) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no list/watch rule for kubevirt.io virtualmachineinstances in %+v", role.Rules)
	}
}

// configcheck is off by default; enabled, it passes --modules, grants
// get/list/watch on the extra watched kinds the values name, and gives the
// read-only container a writable /tmp for haproxy -c.
func TestHelmConfigcheckModule(t *testing.T) {
	objs := renderChart(t, "gatehouse-system")
	if mounts := findObject[appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0].VolumeMounts; len(mounts) != 1 || mounts[0].MountPath != "/etc/gatehouse/config" {
		t.Fatalf("configcheck off, yet volume mounts %+v (want the --config file's alone)", mounts)
	}
	objs = renderChart(t, namespace(t, "helm-configcheck"), "modules.configcheck.enabled=true",
		"modules.configcheck.watchedResources[0].apiGroup=", "modules.configcheck.watchedResources[0].resources={configmaps}")
	deployment := findObject[appsv1.Deployment](t, objs, "Deployment")
	container := deployment.Spec.Template.Spec.Containers[0]
	wantArgs(t, container.Args, "--modules=configcheck,pvsafe")
	if len(container.VolumeMounts) < 2 || container.VolumeMounts[1].MountPath != "/tmp" ||
		len(deployment.Spec.Template.Spec.Volumes) < 2 || deployment.Spec.Template.Spec.Volumes[1].EmptyDir == nil {
		t.Fatalf("want an emptyDir at /tmp: mounts %+v, volumes %+v", container.VolumeMounts, deployment.Spec.Template.Spec.Volumes)
	}
	role := namedClusterRole(t, objs, helmRelease+"-gatehouse-configcheck")
	found := false
	for _, r := range role.Rules {
		if slices.Equal(r.APIGroups, []string{""}) && slices.Equal(r.Resources, []string{"configmaps"}) && slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no get/list/watch rule for configmaps in %+v", role.Rules)
	}
	dryRunApply(t, objs)
}

// GOMEMLIMIT follows the memory limit (90%, of what configcheck's render
// workers leave), or goMemLimit when set, and is absent without a limit.
func TestHelmGoMemLimit(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{nil, "460MiB"},
		{[]string{"resources.limits.memory=2Gi"}, "1843MiB"},
		// Every notation Kubernetes reads: decimals, decimal suffixes,
		// exponents, plain bytes (as --set and YAML parse them).
		{[]string{"resources.limits.memory=1.5Gi"}, "1382MiB"},      // 1.5 * 1024 * 0.9 = 1382.4
		{[]string{"resources.limits.memory=1500M"}, "1287MiB"},      // 1.5e9 * 0.9 / 2^20 = 1287.5
		{[]string{"resources.limits.memory=2G"}, "1716MiB"},         // 2e9 * 0.9 / 2^20 = 1716.6
		{[]string{"resources.limits.memory=512Mi"}, "460MiB"},       // 460.8
		{[]string{"resources.limits.memory=.5Gi"}, "460MiB"},        // 460.8
		{[]string{"resources.limits.memory=1500k"}, "1MiB"},         // 1.5e6 * 0.9 / 2^20 = 1.29
		{[]string{"resources.limits.memory=1e9"}, "858MiB"},         // 858.3
		{[]string{"resources.limits.memory=1.5e9"}, "1287MiB"},      // as 1500M
		{[]string{"resources.limits.memory=2147483648"}, "1843MiB"}, // 2Gi in bytes
		{[]string{"resources.limits.memory=1Ti"}, "943718MiB"},      // 1048576 * 0.9 = 943718.4
		{[]string{"goMemLimit=300MiB"}, "300MiB"},
		// The render workers' 512Mi are not the Go heap's, where they run
		// in the server's container.
		{[]string{"modules.configcheck.enabled=true", "modules.configcheck.separateIdentity=false", "resources.limits.memory=1Gi"}, "460MiB"},
		// With the sandbox runner (the default) they run in its container:
		// the server's limit is the server's.
		{[]string{"modules.configcheck.enabled=true", "resources.limits.memory=1Gi"}, "921MiB"},
		{[]string{"modules.configcheck.enabled=true"}, "460MiB"},
		{[]string{"resources.limits=null"}, ""},
	} {
		objs := renderChart(t, "gatehouse-system", tc.set...)
		if got := goMemLimit(findObject[appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0]); got != tc.want {
			t.Errorf("--set %v: GOMEMLIMIT %q, want %q", tc.set, got, tc.want)
		}
	}
	// The sandbox runner's: 90% of its limit less the workers'.
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{nil, "460MiB"}, // 1Gi
		{[]string{"modules.configcheck.sandboxRunner.resources.limits.memory=2Gi"}, "1382MiB"},
		{[]string{"modules.configcheck.sandboxRunner.resources.limits=null"}, ""},
	} {
		objs := renderChart(t, "gatehouse-system", append([]string{"modules.configcheck.enabled=true"}, tc.set...)...)
		runners := findObject[appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.InitContainers
		if len(runners) != 1 {
			t.Fatalf("--set %v: %d init containers, want the sandbox runner", tc.set, len(runners))
		}
		if got := goMemLimit(runners[0]); got != tc.want {
			t.Errorf("--set %v: the sandbox runner's GOMEMLIMIT %q, want %q", tc.set, got, tc.want)
		}
	}
}

// goMemLimit is a container's GOMEMLIMIT, or "".
func goMemLimit(c corev1.Container) string {
	for _, env := range c.Env {
		if env.Name == "GOMEMLIMIT" {
			return env.Value
		}
	}
	return ""
}

// TestHelmHardening: client certificate authentication of the API server,
// the NetworkPolicy and protected metrics, each opt-in and each rendered
// with what it needs, and nothing of them by default.
func TestHelmHardening(t *testing.T) {
	ns := namespace(t, "helm-hardening")
	defaults := renderChart(t, ns)
	args := deploymentArgs(t, defaults)
	wantArgs(t, args, "--metrics-bind-address=:8080")
	for _, arg := range args {
		if strings.HasPrefix(arg, "--client-ca-file") || arg == "--metrics-secure" {
			t.Errorf("default Deployment args carry %s", arg)
		}
	}
	if np := findObjects[networkingv1.NetworkPolicy](t, defaults, "NetworkPolicy"); len(np) != 0 {
		t.Error("a NetworkPolicy is rendered by default")
	}
	for _, r := range findObjects[rbacv1.ClusterRole](t, defaults, "ClusterRole") {
		if strings.HasSuffix(r.Name, "-metrics-auth") || strings.HasSuffix(r.Name, "-metrics-reader") {
			t.Errorf("ClusterRole %s rendered without metrics.secure", r.Name)
		}
	}
	noMetrics := deploymentArgs(t, renderChart(t, ns, "metrics.enabled=false"))
	wantArgs(t, noMetrics, "--metrics-bind-address=0")

	objs := renderChart(t, ns,
		"webhooks.clientAuth.enabled=true", "webhooks.clientAuth.caSecret=apiserver-webhook-ca", "webhooks.clientAuth.caKey=bundle.pem",
		"webhooks.clientAuth.allowedNames={kube-apiserver,kube-apiserver-2}",
		"networkPolicy.enabled=true",
		"networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.0/24",
		"networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring",
		"networkPolicy.extraIngress[0].ports[0].port=9444",
		"metrics.secure=true",
		"metrics.readers[0].kind=ServiceAccount", "metrics.readers[0].name=prometheus", "metrics.readers[0].namespace=monitoring",
	)
	dryRunApply(t, objs)
	args = deploymentArgs(t, objs)
	wantArgs(t, args, "--client-ca-file=/etc/gatehouse/client-ca/ca.crt", "--client-names=kube-apiserver,kube-apiserver-2",
		"--metrics-secure", "--metrics-bind-address=:8080")
	d := findObject[appsv1.Deployment](t, objs, "Deployment")
	mounted := slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "client-ca" && m.MountPath == "/etc/gatehouse/client-ca" && m.ReadOnly
	})
	sourced := slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == "client-ca" && v.Secret != nil && v.Secret.SecretName == "apiserver-webhook-ca" &&
			len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == "bundle.pem" && v.Secret.Items[0].Path == "ca.crt"
	})
	if !mounted || !sourced {
		t.Errorf("client CA not mounted from Secret apiserver-webhook-ca key bundle.pem: mounts %+v, volumes %+v",
			d.Spec.Template.Spec.Containers[0].VolumeMounts, d.Spec.Template.Spec.Volumes)
	}
	// Probes stay without a client certificate: on the webhook port, which
	// serves /healthz and /readyz to anyone.
	if p := d.Spec.Template.Spec.Containers[0].ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v", p)
	}

	np := findObject[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy")
	if np.Namespace != ns || np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "gatehouse" ||
		np.Spec.PodSelector.MatchLabels["app.kubernetes.io/instance"] != helmRelease {
		t.Errorf("NetworkPolicy %s/%s selects %v, want Gatehouse's pods", np.Namespace, np.Name, np.Spec.PodSelector)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes %v, want [Ingress]", np.Spec.PolicyTypes)
	}
	rule := func(port int) *networkingv1.NetworkPolicyIngressRule {
		for i, r := range np.Spec.Ingress {
			if len(r.Ports) == 1 && r.Ports[0].Port != nil && r.Ports[0].Port.IntValue() == port {
				return &np.Spec.Ingress[i]
			}
		}
		t.Fatalf("no ingress rule for port %d in %+v", port, np.Spec.Ingress)
		return nil
	}
	if r := rule(9443); len(r.From) != 1 || r.From[0].IPBlock == nil || r.From[0].IPBlock.CIDR != "10.0.0.0/24" {
		t.Errorf("webhook port admits %+v, want only 10.0.0.0/24", r.From)
	}
	if r := rule(8080); len(r.From) != 1 || r.From[0].NamespaceSelector == nil ||
		r.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
		t.Errorf("metrics port admits %+v, want only the monitoring namespace", r.From)
	}
	if r := rule(9444); len(r.From) != 0 {
		t.Errorf("extra rule %+v not rendered as written", r)
	}
	if len(np.Spec.Ingress) != 3 {
		t.Errorf("ingress rules %+v, want webhook, metrics and the extra one", np.Spec.Ingress)
	}
	// Without metricsFrom the metrics port is admitted from nowhere.
	closed := findObject[networkingv1.NetworkPolicy](t, renderChart(t, ns, "networkPolicy.enabled=true"), "NetworkPolicy")
	if len(closed.Spec.Ingress) != 1 || closed.Spec.Ingress[0].Ports[0].Port.IntValue() != 9443 {
		t.Errorf("default NetworkPolicy ingress %+v, want the webhook port only", closed.Spec.Ingress)
	}

	fullname := helmRelease + "-gatehouse"
	roles := map[string]*rbacv1.ClusterRole{}
	for _, r := range findObjects[rbacv1.ClusterRole](t, objs, "ClusterRole") {
		roles[r.Name] = r
	}
	auth, reader := roles[fullname+"-metrics-auth"], roles[fullname+"-metrics-reader"]
	if auth == nil || len(auth.Rules) != 2 ||
		!slices.ContainsFunc(auth.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Equal(r.APIGroups, []string{"authentication.k8s.io"}) && slices.Equal(r.Resources, []string{"tokenreviews"}) && slices.Equal(r.Verbs, []string{"create"})
		}) ||
		!slices.ContainsFunc(auth.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Equal(r.APIGroups, []string{"authorization.k8s.io"}) && slices.Equal(r.Resources, []string{"subjectaccessreviews"}) && slices.Equal(r.Verbs, []string{"create"})
		}) {
		t.Errorf("metrics-auth ClusterRole %+v, want create tokenreviews and subjectaccessreviews only", auth)
	}
	if reader == nil || len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].NonResourceURLs, []string{"/metrics"}) ||
		!slices.Equal(reader.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("metrics-reader ClusterRole %+v, want get /metrics only", reader)
	}
	bindings := map[string]*rbacv1.ClusterRoleBinding{}
	for _, b := range findObjects[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding") {
		bindings[b.Name] = b
	}
	if b := bindings[fullname+"-metrics-auth"]; b == nil || b.RoleRef.Name != fullname+"-metrics-auth" ||
		len(b.Subjects) != 1 || b.Subjects[0].Name != fullname || b.Subjects[0].Namespace != ns {
		t.Errorf("metrics-auth binding %+v, want Gatehouse's ServiceAccount", b)
	}
	if b := bindings[fullname+"-metrics-reader"]; b == nil || b.RoleRef.Name != fullname+"-metrics-reader" ||
		len(b.Subjects) != 1 || b.Subjects[0].Name != "prometheus" || b.Subjects[0].Namespace != "monitoring" {
		t.Errorf("metrics-reader binding %+v, want monitoring/prometheus", b)
	}
}

// The PodDisruptionBudget never asks more than all replicas but one: with
// replicaCount=1 a minAvailable of 2 (or 1) would block every node drain.
func TestHelmDisruptionBudgetLetsADrainThrough(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want int // minAvailable; -1: no budget
	}{
		{nil, 2},
		{[]string{"replicaCount=2"}, 1},
		{[]string{"replicaCount=1"}, -1},
		{[]string{"podDisruptionBudget.enabled=false"}, -1},
	} {
		pdbs := findObjects[policyv1.PodDisruptionBudget](t, renderChart(t, "gatehouse-system", tc.set...), "PodDisruptionBudget")
		switch {
		case tc.want < 0 && len(pdbs) != 0:
			t.Errorf("--set %v: PodDisruptionBudget %+v, want none", tc.set, pdbs[0].Spec)
		case tc.want >= 0 && (len(pdbs) != 1 || pdbs[0].Spec.MinAvailable == nil || pdbs[0].Spec.MinAvailable.IntValue() != tc.want):
			t.Errorf("--set %v: PodDisruptionBudgets %v, want one with minAvailable %d", tc.set, pdbs, tc.want)
		}
	}
}

// Chart.yaml says which Kubernetes it needs, the lowest minor make
// test-minors runs: helm refuses the one before and renders for it and
// a provider's build of it (EKS's v1.33.5-eks-..., a pre-release to semver).
func TestHelmKubeVersion(t *testing.T) {
	root, _ := testenv.RepoRoot()
	chart := filepath.Join(root, "charts/gatehouse")
	if out, err := helm(t, "template", "g", chart, "--kube-version", "1.32.9"); err == nil {
		t.Errorf("rendered for Kubernetes 1.32, which no test runs on:\n%.300s", out)
	}
	for _, v := range []string{"1.33.0", "v1.33.5-eks-3025e55"} {
		if _, err := helm(t, "template", "g", chart, "--kube-version", v); err != nil {
			t.Errorf("Kubernetes %s, the lowest tested minor: %v", v, err)
		}
	}
}
