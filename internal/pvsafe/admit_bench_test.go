package pvsafe

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// BenchmarkAdmitClaimDelete measures one claim DELETE on the allow path
// (volume with reclaimPolicy Retain), from the request's oldObject, as the API
// server sends it (managedFields included), to the response.
func BenchmarkAdmitClaimDelete(b *testing.B) {
	claim := pvc("app", "data", "pv1", bound)
	claim.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: fieldsV1(`{"f:spec":{"f:accessModes":{},"f:resources":{"f:requests":{".":{},"f:storage":{}}},"f:storageClassName":{},"f:volumeMode":{},"f:volumeName":{}}}`)},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status",
			FieldsType: "FieldsV1", FieldsV1: fieldsV1(`{"f:status":{"f:accessModes":{},"f:capacity":{".":{},"f:storage":{}},"f:phase":{}}}`)},
	}
	raw, _ := json.Marshal(claim)
	l := memLookup{volumes: map[string]*corev1.PersistentVolume{"pv1": pv("pv1", retain, corev1.VolumeBound, "app/data")}}
	m := &Module{cached: l, live: l}
	m.opts.setDefaults()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "u", Operation: admissionv1.Delete,
		Namespace: "app", Name: "data", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"},
		OldObject: runtime.RawExtension{Raw: raw}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := m.Admit(ctx, req); !resp.Allowed {
			b.Fatal(resp.Result.Message)
		}
	}
}

// fieldsV1 is a managed fields entry's field set, as the API server writes it.
func fieldsV1(raw string) *metav1.FieldsV1 {
	f := &metav1.FieldsV1{}
	f.SetRawBytes([]byte(raw))
	return f
}
