package placement

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

type memTenants map[string]*tenant

func (m memTenants) get(_ context.Context, ns string) (*tenant, error) { return m[ns], nil }

type memClasses map[string]*class

func (m memClasses) get(_ context.Context, name string) (*class, bool, error) {
	c, ok := m[name]
	return c, ok, nil
}

type memReleases map[releaseKey]*metav1.PartialObjectMetadata

func (m memReleases) get(_ context.Context, k releaseKey) (*metav1.PartialObjectMetadata, bool, error) {
	r, ok := m[k]
	return r, ok, nil
}

func (m memReleases) usingClass(_ context.Context, c string) ([]releaseKey, error) {
	var out []releaseKey
	for k, r := range m {
		if r.Labels[classLabel] == c {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

var testClasses = memClasses{
	"dc1": {Name: "dc1", NodeSelector: map[string]string{"topology.kubernetes.io/zone": "dc1"}},
	"gpu": {Name: "gpu", NodeSelector: map[string]string{"gpu": "true"}, Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu-model", Operator: corev1.NodeSelectorOpIn, Values: []string{"a100", "h100"}}},
	}}}},
}

func releaseRequest(t *testing.T, op admissionv1.Operation, obj map[string]any) admission.Request {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "u", Operation: op, Namespace: "tenant-a", Name: "app", Object: runtime.RawExtension{Raw: raw},
	}}
}

func helmRelease(values map[string]any, labels map[string]any) map[string]any {
	meta := map[string]any{"name": "app", "namespace": "tenant-a", "labels": labels}
	spec := map[string]any{"chart": map[string]any{"spec": map[string]any{"chart": "postgres"}}, "interval": "5m", "replicas": json.Number("100000000000000001")}
	if values != nil {
		spec["values"] = values
	}
	return map[string]any{"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": meta, "spec": spec}
}

// apply applies a response's patch to obj, as the API server would.
func apply(t *testing.T, obj map[string]any, resp admission.Response) map[string]any {
	t.Helper()
	raw, _ := json.Marshal(obj)
	if len(resp.Patches) == 0 {
		return obj
	}
	p, _ := json.Marshal(resp.Patches)
	decoded, err := jsonpatch.DecodePatch(p)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := decoded.Apply(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(patched, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReleaseMutation(t *testing.T) {
	m := &Module{view: view{classes: testClasses, tenants: memTenants{"tenant-a": {Default: "dc1", Allowed: []string{"dc1", "gpu"}}}}}
	ctx := context.Background()
	appLabels := map[string]any{applicationKindLabel: "Postgres"}

	resp := m.admitRelease(ctx, releaseRequest(t, admissionv1.Create, helmRelease(map[string]any{"affinityClass": "gpu"}, appLabels)))
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	for _, p := range resp.Patches {
		if !strings.HasPrefix(p.Path, "/metadata/labels") && !strings.HasPrefix(p.Path, "/spec/values") {
			t.Fatalf("patch touches %s: only the class label and spec.values._scheduling may change", p.Path)
		}
	}
	got := apply(t, helmRelease(map[string]any{"affinityClass": "gpu"}, appLabels), resp)
	if got["metadata"].(map[string]any)["labels"].(map[string]any)[classLabel] != "gpu" {
		t.Fatalf("class label not set: %v", got["metadata"])
	}
	sched := got["spec"].(map[string]any)["values"].(map[string]any)[schedulingKey].(map[string]any)
	if sched["affinityClass"] != "gpu" || sched["nodeSelector"].(map[string]any)["gpu"] != "true" || sched["nodeAffinity"] == nil {
		t.Fatalf("_scheduling %v", sched)
	}

	// A second pass changes nothing (reinvocationPolicy IfNeeded).
	raw, _ := json.Marshal(got)
	again := m.admitRelease(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "u2", Operation: admissionv1.Update, Namespace: "tenant-a", Object: runtime.RawExtension{Raw: raw}}})
	if !again.Allowed || len(again.Patches) != 0 {
		t.Fatalf("second pass patched %v", again.Patches)
	}

	// The tenant's default applies when the release names none.
	resp = m.admitRelease(ctx, releaseRequest(t, admissionv1.Create, helmRelease(nil, appLabels)))
	got = apply(t, helmRelease(nil, appLabels), resp)
	if got["metadata"].(map[string]any)["labels"].(map[string]any)[classLabel] != "dc1" {
		t.Fatalf("default class not applied: %v", got)
	}

	// Removing the class removes both fields.
	m.tenants = memTenants{}
	withClass := apply(t, helmRelease(map[string]any{"affinityClass": "gpu"}, appLabels), m.admitRelease(ctx, releaseRequest(t, admissionv1.Create, helmRelease(map[string]any{"affinityClass": "gpu"}, appLabels))))
	values := withClass["spec"].(map[string]any)["values"].(map[string]any)
	delete(values, "affinityClass")
	raw, _ = json.Marshal(withClass)
	resp = m.admitRelease(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "u3", Operation: admissionv1.Update, Namespace: "tenant-a", Object: runtime.RawExtension{Raw: raw}}})
	cleared := apply(t, withClass, resp)
	if _, ok := cleared["metadata"].(map[string]any)["labels"].(map[string]any)[classLabel]; ok {
		t.Fatal("class label left behind")
	}
	if _, ok := cleared["spec"].(map[string]any)["values"].(map[string]any)[schedulingKey]; ok {
		t.Fatal("_scheduling left behind")
	}
}

func TestReleaseDenials(t *testing.T) {
	ctx := context.Background()
	m := &Module{view: view{classes: testClasses, tenants: memTenants{"tenant-a": {Allowed: []string{"dc1"}}}}}
	labels := map[string]any{applicationKindLabel: "Postgres"}
	for _, tc := range []struct {
		name  string
		class string
		want  []string
	}{
		{"not allowed", "gpu", []string{`AffinityClass "gpu"`, "not allowed in namespace tenant-a", "allowed classes: dc1"}},
		{"missing", "dc9", []string{`AffinityClass "dc9"`, "not found", "allowed in namespace tenant-a: dc1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := m.admitRelease(ctx, releaseRequest(t, admissionv1.Create, helmRelease(map[string]any{"affinityClass": tc.class}, labels)))
			if resp.Allowed {
				t.Fatal("admitted")
			}
			for _, w := range tc.want {
				if !strings.Contains(resp.Result.Message, w) {
					t.Errorf("message %q lacks %q", resp.Result.Message, w)
				}
			}
		})
	}
}

func TestClassGuard(t *testing.T) {
	ctx := context.Background()
	m := &Module{view: view{releases: memReleases{
		{"t1", "db"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "db", Labels: map[string]string{classLabel: "dc1"}}},
	}}}
	spec := func(zone string) []byte {
		b, _ := json.Marshal(map[string]any{"apiVersion": "cozystack.io/v1alpha1", "kind": "AffinityClass", "metadata": map[string]any{"name": "dc1"},
			"spec": map[string]any{"nodeSelector": map[string]any{"zone": zone}}})
		return b
	}
	req := func(op admissionv1.Operation, old, obj []byte) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Name: "dc1",
			OldObject: runtime.RawExtension{Raw: old}, Object: runtime.RawExtension{Raw: obj}}}
	}
	if resp := m.admitClass(ctx, req(admissionv1.Delete, spec("a"), nil)); resp.Allowed || !strings.Contains(resp.Result.Message, "- t1/db") {
		t.Fatalf("delete of a class in use: %+v", resp.Result)
	}
	if resp := m.admitClass(ctx, req(admissionv1.Update, spec("a"), spec("b"))); resp.Allowed || !strings.Contains(resp.Result.Message, "cannot be changed") {
		t.Fatalf("change of a class in use: %+v", resp.Result)
	}
	if resp := m.admitClass(ctx, req(admissionv1.Update, spec("a"), spec("a"))); !resp.Allowed {
		t.Fatal("an update that leaves the spec alone was refused")
	}
	m.releases = memReleases{}
	if resp := m.admitClass(ctx, req(admissionv1.Delete, spec("a"), nil)); !resp.Allowed {
		t.Fatal("deleting an unused class was refused")
	}
}

// A cache behind the API server must not deny: the decision is made again
// from the live view, which here knows what the caches do not yet.
func TestDenialsAreConfirmedLive(t *testing.T) {
	ctx := context.Background()
	newClass := &class{Name: "dc2", NodeSelector: map[string]string{"zone": "dc2"}}
	live := &view{
		tenants:  memTenants{"tenant-a": {Allowed: []string{"dc1", "dc2"}}},
		classes:  memClasses{"dc1": testClasses["dc1"], "dc2": newClass},
		releases: memReleases{},
	}
	m := &Module{view: view{tenants: memTenants{"tenant-a": {Allowed: []string{"dc1"}}}, classes: testClasses, releases: memReleases{
		{"tenant-a", "db"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "db", Labels: map[string]string{classLabel: "dc2"}}},
	}}}
	hr := func(class string) map[string]any {
		return map[string]any{"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
			"metadata": map[string]any{"name": "db", "namespace": "tenant-a", "labels": map[string]any{applicationKindLabel: "Postgres"}},
			"spec":     map[string]any{"values": map[string]any{"affinityClass": class}}}
	}
	if resp := decideBy(t, m, ReleaseWebhookName, ctx, releaseRequest(t, admissionv1.Create, hr("dc2"))); resp.Allowed {
		t.Fatal("without a live view, the cache's denial should stand")
	}
	m.live = live
	if resp := decideBy(t, m, ReleaseWebhookName, ctx, releaseRequest(t, admissionv1.Create, hr("dc2"))); !resp.Allowed {
		t.Fatalf("a class created and allowed a moment ago was refused from the cache: %v", resp.Result.Message)
	}
	if resp := decideBy(t, m, ReleaseWebhookName, ctx, releaseRequest(t, admissionv1.Create, hr("dc9"))); resp.Allowed {
		t.Fatal("a class missing from the API server too was admitted")
	}

	// A tenant Secret the cache has not seen yet still gives its default.
	m.tenants = memTenants{}
	m.live.tenants = memTenants{"tenant-a": {Default: "dc2", Allowed: []string{"dc2"}}}
	noClass := hr("")
	delete(noClass["spec"].(map[string]any)["values"].(map[string]any), "affinityClass")
	resp := decideBy(t, m, ReleaseWebhookName, ctx, releaseRequest(t, admissionv1.Create, noClass))
	if !resp.Allowed || !strings.Contains(patchText(resp), `"dc2"`) {
		t.Fatalf("the default of a tenant Secret missing from the cache was not recorded: allowed=%v patch %s", resp.Allowed, patchText(resp))
	}

	// The class guard: the cache still sees db on dc2, the API server does not.
	del := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Delete, Name: "dc2"}}
	if resp := decideBy(t, m, ClassWebhookName, ctx, del); !resp.Allowed {
		t.Fatalf("deletion refused on a stale cache: %v", resp.Result.Message)
	}
	m.live = &view{releases: m.releases}
	if resp := decideBy(t, m, ClassWebhookName, ctx, del); resp.Allowed {
		t.Fatal("deletion of a class the API server says is in use was admitted")
	}
}

func patchText(resp admission.Response) string {
	b, _ := json.Marshal(resp.Patches)
	return string(b)
}

// A class being deleted is not newly usable, and a class in use keeps its
// guard through the removal of its last finalizer (issue 17, item 6).
func TestTerminatingClass(t *testing.T) {
	ctx := context.Background()
	terminating := &class{Name: "old", NodeSelector: map[string]string{"zone": "a"}, Terminating: true}
	m := &Module{view: view{classes: memClasses{"old": terminating}, tenants: memTenants{}, releases: memReleases{
		{"t1", "db"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "db", Labels: map[string]string{classLabel: "old"}}},
	}}}
	labels := map[string]any{applicationKindLabel: "Postgres"}
	create := releaseRequest(t, admissionv1.Create, helmRelease(map[string]any{"affinityClass": "old"}, labels))
	if resp := decideBy(t, m, ReleaseWebhookName, ctx, create); resp.Allowed || !strings.Contains(resp.Result.Message, `AffinityClass "old" (from spec.values.affinityClass) is being deleted`) {
		t.Fatalf("a release took a class being deleted: %+v", resp.Result)
	}
	update := releaseRequest(t, admissionv1.Update, helmRelease(map[string]any{"affinityClass": "old"}, labels))
	oldRaw, _ := json.Marshal(helmRelease(map[string]any{"affinityClass": "old"}, map[string]any{applicationKindLabel: "Postgres", classLabel: "old"}))
	update.OldObject = runtime.RawExtension{Raw: oldRaw}
	if resp := decideBy(t, m, ReleaseWebhookName, ctx, update); !resp.Allowed {
		t.Fatalf("a release keeping its class being deleted was refused: %+v", resp.Result)
	}

	class := func(finalizers ...string) []byte {
		meta := map[string]any{"name": "old", "deletionTimestamp": "2026-01-01T00:00:00Z"}
		if finalizers != nil {
			meta["finalizers"] = finalizers
		}
		b, _ := json.Marshal(map[string]any{"apiVersion": "cozystack.io/v1alpha1", "kind": "AffinityClass", "metadata": meta,
			"spec": map[string]any{"nodeSelector": map[string]any{"zone": "a"}}})
		return b
	}
	req := func(old, obj []byte) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Name: "old",
			OldObject: runtime.RawExtension{Raw: old}, Object: runtime.RawExtension{Raw: obj}}}
	}
	if resp := decideBy(t, m, ClassWebhookName, ctx, req(class("a/hold"), class())); resp.Allowed || !strings.Contains(resp.Result.Message, `AffinityClass "old" cannot be deleted (by removing its last finalizer): 1 HelmRelease(s) use it`) {
		t.Fatalf("removing the last finalizer of a class in use: %+v", resp.Result)
	}
	if resp := decideBy(t, m, ClassWebhookName, ctx, req(class("a/hold", "b/hold"), class("b/hold"))); !resp.Allowed {
		t.Fatal("removing a finalizer that is not the last was refused")
	}
	m.releases = memReleases{}
	if resp := decideBy(t, m, ClassWebhookName, ctx, req(class("a/hold"), class())); !resp.Allowed {
		t.Fatal("removing the last finalizer of an unused class was refused")
	}
}
