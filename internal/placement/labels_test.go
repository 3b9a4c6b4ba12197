package placement

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func appRelease(name, app string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Labels: map[string]string{
		applicationKindLabel: "Postgres", applicationGroupLabel: "apps.cozystack.io", applicationNameLabel: app,
	}}}
}

// labelled runs labelPod on pod and returns the Pod's labels after its patch.
func labelled(t *testing.T, m *Module, pod map[string]any) (map[string]any, admission.Response) {
	t.Helper()
	raw, _ := json.Marshal(pod)
	resp := m.labelPod(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "app", Object: runtime.RawExtension{Raw: raw}}})
	if !resp.Allowed {
		t.Fatalf("labelling refused a Pod: %+v", resp.Result)
	}
	patched := raw
	if len(resp.Patches) > 0 {
		ops, _ := json.Marshal(resp.Patches)
		p, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if patched, err = p.Apply(raw); err != nil {
			t.Fatalf("patch %s: %v", ops, err)
		}
	}
	var out map[string]any
	if err := json.Unmarshal(patched, &out); err != nil {
		t.Fatal(err)
	}
	labels, _ := out["metadata"].(map[string]any)["labels"].(map[string]any)
	return labels, resp
}

func TestLineageLabels(t *testing.T) {
	m := podModule()
	m.releases = memReleases{
		{"app", "web-app"}: appRelease("web-app", "web"),
		{"app", "gpu-app"}: appRelease("gpu-app", "ml"),
		{"app", "free"}:    {ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "free", Labels: map[string]string{applicationKindLabel: "Postgres"}}},
	}
	want := map[string]any{
		applicationGroupLabel: "apps.cozystack.io", applicationKindLabel: "Postgres", applicationNameLabel: "web",
		managedByLabel: "true", tenantResourceLabel: "false",
	}
	owner := []any{map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "r1"}}
	pod := func(labels map[string]any) map[string]any {
		meta := map[string]any{"generateName": "web-1-", "ownerReferences": owner}
		if labels != nil {
			meta["labels"] = labels
		}
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": map[string]any{"containers": []any{}}}
	}

	// No labels yet; labels already there (a spoofed name among them).
	for _, before := range []map[string]any{nil, {"app": "web", applicationNameLabel: "someone-else", "a/b~c": "x"}} {
		got, resp := labelled(t, m, pod(before))
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("from labels %v: label %s = %v, want %v (patch %+v)", before, k, got[k], v, resp.Patches)
			}
		}
		for k, v := range before {
			if _, ours := want[k]; !ours && got[k] != v {
				t.Fatalf("label %s of the Pod changed to %v", k, got[k])
			}
		}
		// A second pass (reinvocation) changes nothing.
		again, _ := labelled(t, m, pod(got))
		if len(again) != len(got) {
			t.Fatalf("a second pass changed the labels: %v → %v", got, again)
		}
		if _, resp := labelled(t, m, pod(got)); len(resp.Patches) != 0 {
			t.Fatalf("a second pass patched: %+v", resp.Patches)
		}
	}

	// A release without the application's group or name is no application:
	// the Pod is left as it was, pre-labelled or not.
	m.owners = ownerGraph{objects: map[string]*metav1.ObjectMeta{"ReplicaSet/app/web-1": owned("web-1", "r1", flux("free"))}}
	if got, resp := labelled(t, m, pod(map[string]any{applicationNameLabel: "kept"})); len(resp.Patches) != 0 || got[applicationNameLabel] != "kept" {
		t.Fatalf("a Pod of no application was relabelled: %v", got)
	}

	// Two applications: the first, with Cozystack's warning.
	m.owners = ownerGraph{objects: map[string]*metav1.ObjectMeta{
		"ReplicaSet/app/web-1": owned("web-1", "r1", nil, ref("Deployment", "web", "d1"), ref("Deployment", "ml", "d2")),
		"Deployment/app/web":   owned("web", "d1", flux("web-app")),
		"Deployment/app/ml":    owned("ml", "d2", flux("gpu-app")),
	}}
	got, resp := labelled(t, m, pod(nil))
	if got[applicationNameLabel] != "ml" || len(resp.Warnings) != 1 || resp.Warnings[0] != ambiguousWarning {
		t.Fatalf("two applications: labels %v warnings %v", got, resp.Warnings)
	}

	// A lineage that cannot be walked: admitted unchanged.
	m.owners = exhaustedOwners{}
	if _, resp := labelled(t, m, pod(nil)); len(resp.Patches) != 0 {
		t.Fatalf("an undecided Pod was patched: %+v", resp.Patches)
	}
}
