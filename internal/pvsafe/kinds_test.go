package pvsafe

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// TestAddingAProtectedKindIsOneEntry is the worked example of
// docs/pvsafe.md: a platform whose ConfigMaps labelled keys=true hold the
// only copy of an encryption key protects them with one table entry and one
// decision. The webhook's rules, the decoding, the denial's reason and its
// kubectl commands follow from the entry.
func TestAddingAProtectedKindIsOneEntry(t *testing.T) {
	decideConfigMap := func(_ context.Context, cm *corev1.ConfigMap, _ Lookup) (Verdict, error) {
		if cm.Labels["keys"] != "true" {
			return allow("ConfigMap %s/%s holds no keys", cm.Namespace, cm.Name), nil
		}
		return Verdict{Reason: fmt.Sprintf("ConfigMap '%s/%s'", cm.Namespace, cm.Name),
			Risks: []Risk{{Namespace: cm.Namespace, Reason: "it holds the only copy of the keys"}}}, nil
	}
	configMaps := &protectedKind{
		group: "", version: "v1", kind: "ConfigMap", plural: "configmaps", short: "configmap",
		reason: "configmap-would-lose-keys",
		decode: func(raw []byte) (client.Object, error) {
			cm := &corev1.ConfigMap{}
			return cm, json.Unmarshal(raw, cm)
		},
		decide: decideAs(decideConfigMap),
	}
	saved := protectedKinds
	protectedKinds = append(slices.Clone(saved), configMaps)
	t.Cleanup(func() { protectedKinds = saved })

	m := &Module{cached: memLookup{}}
	m.opts.setDefaults()
	hook := m.Webhooks()[0]
	if core := hook.Rules[0]; !slices.Equal(core.Resources, []string{"configmaps", "namespaces", "persistentvolumeclaims", "persistentvolumes"}) {
		t.Errorf("the core rule's resources %v do not add configmaps", core.Resources)
	}
	if !slices.Contains(hook.DenialReasons, "configmap-would-lose-keys") {
		t.Errorf("denial reasons %v lack the new kind's", hook.DenialReasons)
	}

	request := func(labels map[string]string) admission.Request {
		raw, err := json.Marshal(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "vault", Name: "unseal", Labels: labels}})
		if err != nil {
			t.Fatal(err)
		}
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "u", Operation: admissionv1.Delete, Namespace: "vault", Name: "unseal",
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, OldObject: runtime.RawExtension{Raw: raw},
		}}
	}
	d := hook.Decide(context.Background(), request(map[string]string{"keys": "true"}))
	resp := d.Response
	if resp.Allowed || resp.AuditAnnotations[module.ReasonAnnotation] != "configmap-would-lose-keys" {
		t.Fatalf("deleting the keys: %+v %v; want a denial with the kind's reason", resp.Result, resp.AuditAnnotations)
	}
	for _, want := range []string{"it holds the only copy of the keys", "kubectl -n vault label configmap unseal " + BypassLabel + "=true", "kubectl -n vault delete configmap unseal"} {
		if !strings.Contains(resp.Result.Message, want) {
			t.Errorf("the denial does not say %q:\n%s", want, resp.Result.Message)
		}
	}
	if d := hook.Decide(context.Background(), request(nil)); !d.Response.Allowed {
		t.Errorf("a ConfigMap without keys: %+v", d.Response.Result)
	}
}
