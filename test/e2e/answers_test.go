package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	ngv1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/nodegroup"
	"github.com/gatehouse-dev/gatehouse/internal/placement"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// directReview is an AdmissionReview posted straight to a module's path.
type directReview struct {
	kind      metav1.GroupVersionKind
	resource  string
	namespace string
	name      string
	operation admissionv1.Operation
	object    any // Object, or OldObject for a DELETE
}

// postAllowed posts r to path as the API server would (the harness client
// presents its certificate) and returns the answer's fields, failing unless
// it is allowed.
func postAllowed(t *testing.T, g *testenv.Gatehouse, path string, r directReview) (map[string]any, string) {
	t.Helper()
	raw, err := json.Marshal(r.object)
	if err != nil {
		t.Fatal(err)
	}
	req := &admissionv1.AdmissionRequest{
		UID: types.UID("direct-" + randSuffix()), Kind: r.kind,
		Resource:  metav1.GroupVersionResource{Group: r.kind.Group, Version: r.kind.Version, Resource: r.resource},
		Namespace: r.namespace, Name: r.name, Operation: r.operation,
		UserInfo: authenticationv1.UserInfo{Username: "someone"},
	}
	if r.operation == admissionv1.Delete {
		req.OldObject = runtime.RawExtension{Raw: raw}
	} else {
		req.Object = runtime.RawExtension{Raw: raw}
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := g.HTTPClient.Post(g.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out struct {
		Response map[string]any `json:"response"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &out) != nil || out.Response == nil || out.Response["allowed"] != true {
		t.Fatalf("%s %s %s: want an allowed answer, got %d %s", path, r.operation, r.kind.Kind, resp.StatusCode, data)
	}
	return out.Response, string(data)
}

// onlyEcho fails unless the answer holds nothing but the fields named
// (uid and allowed always) and none of the cluster's names.
func onlyEcho(t *testing.T, what string, answer map[string]any, raw string, extra []string, clusterNames ...string) {
	t.Helper()
	for field := range answer {
		if field != "uid" && field != "allowed" && !slices.Contains(extra, field) {
			t.Errorf("%s: the allowed answer carries %q: %s", what, field, raw)
		}
	}
	for _, name := range clusterNames {
		if strings.Contains(raw, name) {
			t.Errorf("%s: the allowed answer names %q, which the review did not carry: %s", what, name, raw)
		}
	}
}

// TestAllowedAnswersCarryNothingFromTheCluster: an allowed answer is what
// a caller posting straight to the port gets for any review it makes up,
// and kube-apiserver shows nobody its status. It must hold the UID and
// "allowed" only (a mutating webhook's patch aside), never what Gatehouse
// read from its caches: before, pvsafe answered "Namespace x holds no claim
// whose data would be lost (1 claims)" and named the retained volume.
func TestAllowedAnswersCarryNothingFromTheCluster(t *testing.T) {
	t.Run("pvsafe", func(t *testing.T) {
		g := startPVSafe(t, module.Enforce)
		ns := namespace(t, "answers")
		pvc, pv := volumeFixture(t, ns, "retained-ledger", corev1.PersistentVolumeReclaimRetain)
		nsObj := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}}
		answer, raw := postAllowed(t, g, pvsafe.WebhookPath, directReview{
			kind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, resource: "namespaces", name: ns,
			operation: admissionv1.Delete, object: nsObj,
		})
		onlyEcho(t, "Namespace DELETE", answer, raw, nil, pvc.Name, pv.Name, "claim")

		// The claim as stored names its volume; the volume's reclaim
		// policy is the cluster's.
		claim := pvc.DeepCopy()
		claim.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}
		answer, raw = postAllowed(t, g, pvsafe.WebhookPath, directReview{
			kind: metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}, resource: "persistentvolumeclaims",
			namespace: ns, name: pvc.Name, operation: admissionv1.Delete, object: claim,
		})
		onlyEcho(t, "PersistentVolumeClaim DELETE", answer, raw, nil, "Retain", "reclaim")
	})

	t.Run("placement", func(t *testing.T) {
		e := startPlacement(t, module.Enforce)
		g := e.g
		if _, err := e.release("db", ""); err != nil {
			t.Fatal(err)
		}
		dc1, gpu := e.classes["dc1"], e.classes["gpu"]
		pod := e.fluxPod("p", "db", map[string]string{zoneKey: "zone-a"}, nil)
		pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		answer, raw := postAllowed(t, g, placement.PodWebhookPath, directReview{
			kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, resource: "pods", namespace: e.ns, name: "p",
			operation: admissionv1.Create, object: pod,
		})
		onlyEcho(t, "Pod CREATE", answer, raw, nil, dc1)

		class := map[string]any{"apiVersion": "cozystack.io/v1alpha1", "kind": "AffinityClass", "metadata": map[string]any{"name": gpu}}
		answer, raw = postAllowed(t, g, placement.ClassWebhookPath, directReview{
			kind: metav1.GroupVersionKind{Group: "cozystack.io", Version: "v1alpha1", Kind: "AffinityClass"}, resource: "affinityclasses",
			name: gpu, operation: admissionv1.Delete, object: class,
		})
		onlyEcho(t, "AffinityClass DELETE", answer, raw, nil, "HelmRelease")
	})

	t.Run("nodegroup", func(t *testing.T) {
		env := startNodeGroup(t)
		name := ngName("answers")
		ng := &ngv1.NodeGroup{TypeMeta: metav1.TypeMeta{APIVersion: ngv1.GroupVersion.String(), Kind: "NodeGroup"},
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic}}
		answer, raw := postAllowed(t, env.g, nodegroup.ValidationPath, directReview{
			kind: metav1.GroupVersionKind{Group: ngv1.GroupVersion.Group, Version: ngv1.GroupVersion.Version, Kind: "NodeGroup"}, resource: "nodegroups",
			name: name, operation: admissionv1.Create, object: ng,
		})
		onlyEcho(t, "NodeGroup CREATE", answer, raw, nil)
	})
}
