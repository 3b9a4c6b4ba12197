package pvsafe

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func deleteRequest(t *testing.T, obj *corev1.PersistentVolumeClaim) admission.Request {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "u", Operation: admissionv1.Delete, Namespace: obj.Namespace, Name: obj.Name,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}, OldObject: runtime.RawExtension{Raw: raw},
	}}
}

func TestAStaleCacheNeverDenies(t *testing.T) {
	claim := pvc("app", "data", "pv1", bound)
	stale := memLookup{volumes: map[string]*corev1.PersistentVolume{"pv1": pv("pv1", del, corev1.VolumeBound, "app/data")}}
	fresh := memLookup{volumes: stale.volumes, snapshots: map[string]map[string][]Snapshot{"app": {"data": {readyRetained}}}}
	m := &Module{cached: stale, live: fresh}
	m.opts.setDefaults()

	before := testutil.ToFloat64(overturned)
	resp := m.Admit(logf.IntoContext(context.Background(), testr.New(t)), deleteRequest(t, claim))
	if !resp.Allowed {
		t.Fatalf("denied from a stale cache: %s", resp.Result.Message)
	}
	if got := testutil.ToFloat64(overturned); got != before+1 {
		t.Fatalf("overturned counter %v, want %v", got, before+1)
	}

	// When the API server agrees with the cache, the denial stands and
	// carries the API server's reasons.
	m.live = stale
	resp = m.Admit(context.Background(), deleteRequest(t, claim))
	if resp.Allowed || !strings.HasPrefix(resp.Result.Message, "DELETION BLOCKED:") || resp.Result.Code != 403 {
		t.Fatalf("confirmed denial: %+v", resp.Result)
	}
}

func TestOnlyDeletionsOfProtectedKindsAreJudged(t *testing.T) {
	m := New(Options{})
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}}}
	if resp := m.Admit(context.Background(), req); !resp.Allowed {
		t.Fatalf("CREATE judged: %+v", resp)
	}
	req.Operation = admissionv1.Delete
	req.Kind.Kind = "ConfigMap"
	if resp := m.Admit(context.Background(), req); !resp.Allowed {
		t.Fatalf("ConfigMap DELETE judged: %+v", resp)
	}
	req.Kind.Kind = "PersistentVolumeClaim"
	if resp := m.Admit(context.Background(), req); resp.Allowed || resp.Result.Code != 400 {
		t.Fatalf("DELETE without oldObject: %+v", resp)
	}
}
