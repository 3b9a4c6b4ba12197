package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cozyv1alpha1 "github.com/gatehouse-dev/gatehouse/api/cozystack.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/placement"
	"github.com/gatehouse-dev/gatehouse/internal/testing/clustertest"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

const zoneKey = "topology.kubernetes.io/zone"

// schemalessCRD is clustertest.SchemalessCRD: an operator's kind.
var schemalessCRD = clustertest.SchemalessCRD

// placementEnv is one test's classes (named after the test, as classes are
// cluster-scoped), tenant namespace and Gatehouse.
type placementEnv struct {
	t       *testing.T
	c       client.Client
	ns      string
	classes map[string]string // short name → class name
	g       *testenv.Gatehouse
}

func startPlacement(t *testing.T, mode module.Enforcement, opts ...placement.Options) *placementEnv {
	t.Helper()
	e := newPlacementEnv(t)
	var o placement.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	e.g = startGatehouse(t, app.Options{
		Catalogue: []module.Module{placement.New(o)},
		Modules:   map[string]app.ModuleConfig{"placement": {Enabled: true, Enforcement: mode}},
	})
	return e
}

// newPlacementEnv creates the test's classes and tenant; no Gatehouse yet.
func newPlacementEnv(t *testing.T) *placementEnv {
	t.Helper()
	c := controlPlane.Client
	if err := cozyv1alpha1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	if err := helmv2.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	e := &placementEnv{t: t, c: c, ns: namespace(t, "tenant"), classes: map[string]string{}}
	suffix := randSuffix()
	for short, zone := range map[string]string{"dc1": "zone-a", "dc2": "zone-b"} {
		e.createClass(short+"-"+suffix, short, map[string]string{zoneKey: zone})
	}
	e.createClass("gpu-"+suffix, "gpu", map[string]string{"gpu": "true"})
	// "dc1 OR dc2", the proposal's open question 5, as node affinity.
	e.createClassSpec("either-"+suffix, "either", cozyv1alpha1.AffinityClassSpec{NodeAffinity: &cozyv1alpha1.ClassNodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: cozyv1alpha1.ClassNodeSelector{NodeSelectorTerms: []cozyv1alpha1.ClassNodeSelectorTerm{
			{MatchExpressions: []cozyv1alpha1.ClassNodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}}},
			{MatchExpressions: []cozyv1alpha1.ClassNodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-b"}}}},
		}},
	}})
	e.tenantSecret(fmt.Sprintf("_namespace:\n  defaultAffinityClass: %s\n  allowedAffinityClasses: [%s, %s, %s]\n",
		e.classes["dc1"], e.classes["dc1"], e.classes["dc2"], e.classes["either"]))
	return e
}

func (e *placementEnv) createClass(name, short string, selector map[string]string) {
	e.t.Helper()
	e.createClassSpec(name, short, cozyv1alpha1.AffinityClassSpec{NodeSelector: selector})
}

func (e *placementEnv) createClassSpec(name, short string, spec cozyv1alpha1.AffinityClassSpec) {
	e.t.Helper()
	ac := &cozyv1alpha1.AffinityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := e.c.Create(context.Background(), ac); err != nil {
		e.t.Fatal(err)
	}
	e.classes[short] = name
	e.t.Cleanup(func() {
		// Releases go first (the guard refuses a class in use).
		_ = e.c.DeleteAllOf(context.Background(), &helmv2.HelmRelease{}, client.InNamespace(e.ns))
		_ = e.c.Delete(context.Background(), ac)
	})
}

func (e *placementEnv) tenantSecret(values string) {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cozystack-values"}, Data: map[string][]byte{"values.yaml": []byte(values)}}
	if err := e.c.Create(context.Background(), s); err != nil {
		e.t.Fatal(err)
	}
}

func (e *placementEnv) release(name, class string) (*helmv2.HelmRelease, error) {
	hr := &helmv2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Labels: map[string]string{"apps.cozystack.io/application.kind": "Postgres"}},
		Spec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: 300_000_000_000},
			Chart:    &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "postgres", SourceRef: helmv2.CrossNamespaceObjectReference{Kind: "HelmRepository", Name: "cozystack"}}},
		},
	}
	if class != "" {
		hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(`{"affinityClass":%q}`, class))}
	}
	return hr, e.c.Create(context.Background(), hr)
}

// deployment makes a Deployment as Flux's helm-controller would render it
// for release: labelled with the release, its Pods with nodeSelector.
func (e *placementEnv) deployment(name, release string, nodeSelector map[string]string) *appsv1.Deployment {
	e.t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Labels: map[string]string{
			"helm.toolkit.fluxcd.io/name": release, "helm.toolkit.fluxcd.io/namespace": e.ns,
		}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: nodeSelector,
					Containers:   []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
				},
			},
		},
	}
	if err := e.c.Create(context.Background(), d); err != nil {
		e.t.Fatal(err)
	}
	return d
}

// podsOf waits for the Deployment's ReplicaSet and returns its Pods.
func (e *placementEnv) podsOf(d *appsv1.Deployment, want int) []corev1.Pod {
	e.t.Helper()
	var pods corev1.PodList
	eventually(e.t, "the Deployment's Pods are created", func() error {
		if err := e.c.List(context.Background(), &pods, client.InNamespace(e.ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return err
		}
		if len(pods.Items) < want {
			return fmt.Errorf("%d Pods", len(pods.Items))
		}
		return nil
	})
	return pods.Items
}

// replicaFailure waits for the ReplicaSet controller to report that the
// API server refused its Pods, and returns the reason.
func (e *placementEnv) replicaFailure(d *appsv1.Deployment) string {
	e.t.Helper()
	var msg string
	eventually(e.t, "the ReplicaSet reports the refused Pods", func() error {
		var sets appsv1.ReplicaSetList
		if err := e.c.List(context.Background(), &sets, client.InNamespace(e.ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return err
		}
		for _, rs := range sets.Items {
			for _, c := range rs.Status.Conditions {
				if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
					msg = c.Message
					return nil
				}
			}
		}
		return fmt.Errorf("no ReplicaFailure condition on %d ReplicaSets", len(sets.Items))
	})
	return msg
}

func TestPlacementReleaseGetsItsClassAndPodsAreCheckedThroughTheLineage(t *testing.T) {
	e := startPlacement(t, module.Enforce)
	ctx := context.Background()
	dc1 := e.classes["dc1"]

	hr, err := e.release("db", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
		t.Fatal(err)
	}
	if hr.Labels["apps.cozystack.io/affinity-class"] != dc1 || !strings.Contains(string(hr.Spec.Values.Raw), `"_scheduling":{"affinityClass":"`+dc1+`","nodeSelector":{"`+zoneKey+`":"zone-a"}}`) {
		t.Fatalf("the tenant's default class was not recorded: labels %v values %s", hr.Labels, hr.Spec.Values.Raw)
	}

	// A pair beyond the class's is fine: the class asks for its own only.
	good := e.deployment("good", "db", map[string]string{zoneKey: "zone-a", "kubernetes.io/hostname": "fake-node-zone-a-1"})
	for _, p := range e.podsOf(good, 2) {
		if p.Spec.NodeSelector[zoneKey] != "zone-a" {
			t.Fatalf("pod %s", p.Name)
		}
	}
	eventually(t, "the scheduler places the admitted Pods on the fake nodes", func() error {
		for _, p := range e.podsOf(good, 2) {
			if p.Spec.NodeName == "" {
				return fmt.Errorf("pod %s not scheduled", p.Name)
			}
		}
		return nil
	})

	bad := e.deployment("bad", "db", nil)
	msg := e.replicaFailure(bad)
	want := fmt.Sprintf(`belongs to application with AffinityClass %q but missing required nodeSelector %s=zone-a`, dc1, zoneKey)
	if !strings.Contains(msg, `admission webhook "placement-pod.gatehouse.dev" denied the request: pod `+e.ns+"/bad-") || !strings.Contains(msg, want) {
		t.Fatalf("ReplicaFailure %q lacks the seed's message %q", msg, want)
	}
}

// fluxPod is a Pod Flux labelled with its release directly (no owner).
func (e *placementEnv) fluxPod(name, release string, selector map[string]string, affinity *corev1.NodeSelector) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Labels: map[string]string{"helm.toolkit.fluxcd.io/name": release}},
		Spec:       corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	if affinity != nil {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: affinity}}
	}
	return p
}

func TestPlacementWarnModeAdmitsWithWarnings(t *testing.T) {
	e := startPlacement(t, module.Warn)
	if _, err := e.release("db", ""); err != nil {
		t.Fatal(err)
	}
	// The ReplicaSet controller's Pods are admitted in warn mode...
	d := e.deployment("warned", "db", nil)
	e.podsOf(d, 2)

	// ...and a client sees the denial as warnings.
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.WarningHandler = rec
	c, err := client.New(cfg, client.Options{Scheme: e.c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), e.fluxPod("warned-pod", "db", nil, nil)); err != nil {
		t.Fatalf("warn mode refused the Pod: %v", err)
	}
	got := strings.Join(rec.msgs, "\n")
	want := fmt.Sprintf(`pod %s/warned-pod belongs to application with AffinityClass %q but missing required nodeSelector %s=zone-a`, e.ns, e.classes["dc1"], zoneKey)
	if !strings.Contains(got, "placement (enforcement: warn) would deny this request:") || !strings.Contains(got, want) {
		t.Fatalf("warnings %q lack %q", got, want)
	}
}

// A class with node affinity ("zone-a OR zone-b") is recorded in the
// release's values, and a Pod satisfies it when everything it allows is
// inside the class, whatever the spelling.
func TestPlacementNodeAffinityClass(t *testing.T) {
	e := startPlacement(t, module.Enforce)
	ctx := context.Background()
	either := e.classes["either"]
	hr, err := e.release("web", either)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(hr.Spec.Values.Raw), `"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[`) {
		t.Fatalf("the class's node affinity is not in the release's values: %s", hr.Spec.Values.Raw)
	}
	zones := func(z ...string) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: z},
		}}}}
	}
	if err := e.c.Create(ctx, e.fluxPod("both-zones", "web", nil, zones("zone-a", "zone-b"))); err != nil {
		t.Fatalf("a Pod allowed on zone-a or zone-b refused by the class zone-a OR zone-b: %v", err)
	}
	if err := e.c.Create(ctx, e.fluxPod("pinned", "web", map[string]string{zoneKey: "zone-b"}, nil)); err != nil {
		t.Fatalf("a Pod pinned to zone-b refused: %v", err)
	}
	err = e.c.Create(ctx, e.fluxPod("too-wide", "web", nil, zones("zone-a", "zone-c")))
	want := fmt.Sprintf("could be scheduled on a node with %s=zone-c, which the class's required node affinity does not allow", zoneKey)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a Pod that may land in zone-c: %v; want %q", err, want)
	}
}

// The CRD's validation refuses classes the webhook could only misjudge.
func TestAffinityClassValidation(t *testing.T) {
	ctx := context.Background()
	c := controlPlane.Client
	affinity := func(reqs ...string) string {
		return `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [` + strings.Join(reqs, ", ") + `]}]}}}`
	}
	for _, tc := range []struct {
		name, spec, refusal string
	}{
		{"selector", `{nodeSelector: {zone: dc1}}`, ""},
		{"affinity", affinity(`{key: zone, operator: In, values: [dc1]}`, `{key: gen, operator: Gt, values: ["05"]}`), ""},
		{"both", `{nodeSelector: {zone: dc1}, nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: gpu, operator: Exists}]}]}}}`, ""},
		{"neither", `{}`, "an AffinityClass needs spec.nodeSelector, spec.nodeAffinity, or both"},
		{"an empty selector", `{nodeSelector: {}}`, "an AffinityClass needs spec.nodeSelector, spec.nodeAffinity, or both"},
		{"no terms", `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}}}`, "nodeSelectorTerms"},
		{"an empty term", affinity(), "matchExpressions"},
		{"an unknown operator", affinity(`{key: zone, operator: Eq, values: [a]}`), "Unsupported value"},
		{"In without values", affinity(`{key: zone, operator: In}`), "In and NotIn need at least one value"},
		{"Exists with values", affinity(`{key: zone, operator: Exists, values: [a]}`), "Exists and DoesNotExist take no values"},
		{"Gt on a word", affinity(`{key: gen, operator: Gt, values: [a]}`), "Gt and Lt take exactly one non-negative integer"},
		{"Lt with two values", affinity(`{key: gen, operator: Lt, values: ["1", "2"]}`), "Gt and Lt take exactly one non-negative integer"},
		{"a node name", `{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [n]}]}]}}}`, "matchExpressions"},
		{"a bad label key", affinity(`{key: "-zone", operator: Exists}`), "spec.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(`{spec: `+tc.spec+`}`), &u.Object); err != nil {
				t.Fatal(err)
			}
			u.SetAPIVersion("cozystack.io/v1alpha1")
			u.SetKind("AffinityClass")
			u.SetName("validation-" + randSuffix())
			err := c.Create(ctx, u, client.DryRunAll)
			switch {
			case tc.refusal == "" && err != nil:
				t.Fatalf("a valid class refused: %v", err)
			case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
				t.Fatalf("got %v, want a refusal naming %q", err, tc.refusal)
			}
		})
	}
}

func TestPlacementOperatorOwnedPodIsCheckedThroughTheCR(t *testing.T) {
	e := startPlacement(t, module.Enforce)
	ctx := context.Background()
	crd := schemalessCRD(schema.GroupVersionKind{Group: "postgresql.cnpg.io", Version: "v1", Kind: "Cluster"}, "clusters")
	if err := e.c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := e.release("pg", e.classes["dc2"]); err != nil {
		t.Fatal(err)
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion("postgresql.cnpg.io/v1")
	cluster.SetKind("Cluster")
	cluster.SetNamespace(e.ns)
	cluster.SetName("pg")
	cluster.SetLabels(map[string]string{"helm.toolkit.fluxcd.io/name": "pg"})
	eventually(t, "the operator's CRD is served", func() error { return e.c.Create(ctx, cluster) })

	pod := func(name string, selector map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "postgresql.cnpg.io/v1", Kind: "Cluster", Name: "pg", UID: cluster.GetUID(), Controller: ptr.To(true),
			}}},
			Spec: corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "pg", Image: "registry.example/pg:16"}}},
		}
	}
	err := e.c.Create(ctx, pod("pg-1", map[string]string{zoneKey: "zone-a"}))
	want := fmt.Sprintf(`pod %s/pg-1 belongs to application with AffinityClass %q but missing required nodeSelector %s=zone-b`, e.ns, e.classes["dc2"], zoneKey)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("pod owned by the CR: %v; want %q", err, want)
	}
	if err := e.c.Create(ctx, pod("pg-2", map[string]string{zoneKey: "zone-b"})); err != nil {
		t.Fatalf("compliant pod owned by the CR refused: %v", err)
	}
}

func TestPlacementRefusesAClassTheTenantMayNotUse(t *testing.T) {
	e := startPlacement(t, module.Enforce)
	_, err := e.release("ml", e.classes["gpu"])
	want := fmt.Sprintf("AffinityClass %q (from spec.values.affinityClass) is not allowed in namespace %s; allowed classes: %s, %s", e.classes["gpu"], e.ns, e.classes["dc1"], e.classes["dc2"])
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("release with a class outside the allow-list: %v; want %q", err, want)
	}
}

func TestPlacementRefusesDeletingAClassInUse(t *testing.T) {
	e := startPlacement(t, module.Enforce)
	ctx := context.Background()
	if _, err := e.release("db", e.classes["dc2"]); err != nil {
		t.Fatal(err)
	}
	ac := &cozyv1alpha1.AffinityClass{ObjectMeta: metav1.ObjectMeta{Name: e.classes["dc2"]}}
	eventually(t, "the release is in the cache and the class guarded", func() error {
		err := e.c.Delete(ctx, ac, client.DryRunAll)
		if err == nil {
			return fmt.Errorf("deleting a class in use was allowed")
		}
		if !strings.Contains(err.Error(), "cannot be deleted: 1 HelmRelease(s) use it") || !strings.Contains(err.Error(), "- "+e.ns+"/db") {
			return fmt.Errorf("unexpected refusal: %v", err)
		}
		return nil
	})
}
