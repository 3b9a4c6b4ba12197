package pvsafe

import (
	"context"
	"maps"
	"net/http"
	"reflect"
	"testing"

	json "github.com/go-json-experiment/json/v1"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Native fuzz targets for the oldObject of a DELETE, which the API server
// copies from what a client stored. Run one with
//
//	go test ./internal/pvsafe -run '^$' -fuzz '^FuzzDecodeOldObject$' -fuzztime 30s
//
// or all of them with make fuzz.

// fuzzKinds are the kinds pvsafe judges, with the group of each.
var fuzzKinds = []metav1.GroupVersionKind{
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Version: "v1", Kind: "PersistentVolume"},
	{Version: "v1", Kind: "Namespace"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
}

func oldObjectSeeds() []string {
	return []string{
		`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data","namespace":"app","labels":{"a":"b"},"managedFields":[{"manager":"m"}]},"spec":{"volumeName":"pv1","resources":{"requests":{"storage":"1Gi"}}},"status":{"phase":"Bound"}}`,
		`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv1"},"spec":{"persistentVolumeReclaimPolicy":"Delete","claimRef":{"namespace":"app","name":"data"}},"status":{"phase":"Bound"}}`,
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"app","deletionTimestamp":"2025-01-02T03:04:05Z","labels":{"pv-safe.io/force-delete":"true"}}}`,
		`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"db","namespace":"app"},"spec":{"volumeClaimTemplates":[{"metadata":{"name":"data"}},{}],"persistentVolumeClaimRetentionPolicy":{"whenDeleted":"Delete","whenScaled":"Retain"}}}`,
		`{"metadata":{"name":"data","namespace":"app","labels":{"pv-safe.io/force-delete":"true"}}}`,
		`{"metadata":{"deletionTimestamp":"not a time"}}`,
		`{"metadata":{"labels":{"a":1}}}`,
		`{"spec":{"volumeClaimTemplates":null,"claimRef":{}}}`,
		`{"Metadata":{"NAME":"x"},"metadata":{"name":"y"}}`,
		`null`,
		`[]`,
		`{`,
	}
}

// FuzzDecodeOldObject decodes random oldObjects as each kind: it never
// panics, a decoded object is non-nil and of the kind's type (Admit uses
// it without a check), and what the light decoding reads agrees with the
// full type's decoding whenever that one succeeds.
func FuzzDecodeOldObject(f *testing.F) {
	for _, s := range oldObjectSeeds() {
		for k := range fuzzKinds {
			f.Add(uint8(k), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, selector uint8, raw []byte) {
		kind := fuzzKinds[int(selector)%len(fuzzKinds)].Kind
		obj, err := decodeObject(kind, raw)
		if err == nil && obj == nil {
			t.Fatalf("%s: no object and no error", kind)
		}
		full, want := fullDecode(kind, raw)
		if want != nil {
			return // the full type refuses it: the light one may read less
		}
		if err != nil {
			t.Fatalf("%s: the full type decodes, the light one fails: %v\n%s", kind, err, raw)
		}
		if reflect.TypeOf(obj) != reflect.TypeOf(full) {
			t.Fatalf("%s: decoded as %T", kind, obj)
		}
		if obj.GetName() != full.GetName() || obj.GetNamespace() != full.GetNamespace() ||
			!maps.Equal(obj.GetLabels(), full.GetLabels()) || !obj.GetDeletionTimestamp().Equal(full.GetDeletionTimestamp()) {
			t.Fatalf("%s: metadata differs: light %+v, full %+v", kind, objectMeta(obj), objectMeta(full))
		}
		switch o := obj.(type) {
		case *corev1.PersistentVolumeClaim:
			f := full.(*corev1.PersistentVolumeClaim)
			if o.Spec.VolumeName != f.Spec.VolumeName || o.Status.Phase != f.Status.Phase {
				t.Fatalf("claim: light %+v %+v, full %+v %+v", o.Spec.VolumeName, o.Status.Phase, f.Spec.VolumeName, f.Status.Phase)
			}
		case *corev1.PersistentVolume:
			f := full.(*corev1.PersistentVolume)
			if o.Spec.PersistentVolumeReclaimPolicy != f.Spec.PersistentVolumeReclaimPolicy || o.Status.Phase != f.Status.Phase ||
				!reflect.DeepEqual(o.Spec.ClaimRef, f.Spec.ClaimRef) {
				t.Fatalf("volume: light %+v %+v, full %+v %+v", o.Spec, o.Status, f.Spec, f.Status)
			}
		case *appsv1.StatefulSet:
			f := full.(*appsv1.StatefulSet)
			if !reflect.DeepEqual(o.Spec.PersistentVolumeClaimRetentionPolicy, f.Spec.PersistentVolumeClaimRetentionPolicy) ||
				len(o.Spec.VolumeClaimTemplates) != len(f.Spec.VolumeClaimTemplates) {
				t.Fatalf("statefulset: light %+v, full %+v", o.Spec, f.Spec)
			}
			for i := range o.Spec.VolumeClaimTemplates {
				if o.Spec.VolumeClaimTemplates[i].Name != f.Spec.VolumeClaimTemplates[i].Name {
					t.Fatalf("statefulset: template %d named %q, full %q", i, o.Spec.VolumeClaimTemplates[i].Name, f.Spec.VolumeClaimTemplates[i].Name)
				}
			}
		}
	})
}

// fullDecode decodes raw into kind's full API type, with the decoder
// decode.go uses.
func fullDecode(kind string, raw []byte) (client.Object, error) {
	var obj client.Object
	switch kind {
	case "PersistentVolumeClaim":
		obj = &corev1.PersistentVolumeClaim{}
	case "PersistentVolume":
		obj = &corev1.PersistentVolume{}
	case "Namespace":
		obj = &corev1.Namespace{}
	case "StatefulSet":
		obj = &appsv1.StatefulSet{}
	}
	return obj, json.Unmarshal(raw, obj)
}

func objectMeta(o client.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: o.GetName(), Namespace: o.GetNamespace(), Labels: o.GetLabels(), DeletionTimestamp: o.GetDeletionTimestamp()}
}

// fuzzLookup is a cluster where the seeds' names matter: app/data is bound
// to pv1, which is deleted with its claim, and a retained snapshot exists
// for app/kept.
var fuzzLookup = memLookup{
	volumes: map[string]*corev1.PersistentVolume{"pv1": pv("pv1", del, corev1.VolumeBound, "app/data"), "pv2": pv("pv2", retain, corev1.VolumeBound, "app/kept")},
	claims: map[string][]*corev1.PersistentVolumeClaim{"app": {
		pvc("app", "data", "pv1", bound), pvc("app", "kept", "pv2", bound), pvc("app", "data-db-0", "pv1", bound),
	}},
	snapshots:  map[string]map[string][]Snapshot{"app": {"kept": {readyRetained}, "data": {pendingRetains, readyDeleted}}},
	namespaces: map[string]*corev1.Namespace{"app": {ObjectMeta: metav1.ObjectMeta{Name: "app"}}},
}

// FuzzAdmitDelete sends random oldObjects through the webhook as DELETEs of each
// kind against a small cluster: it never panics, and answers allowed, a
// 403 denial or, for an oldObject that does not decode, a 400 (never a
// 500); in the label bypass mode, an object labelled with the bypass label
// is always allowed.
func FuzzAdmitDelete(f *testing.F) {
	for _, s := range oldObjectSeeds() {
		for k := range fuzzKinds {
			f.Add(uint8(k), []byte(s))
		}
	}
	// In the label bypass mode the label alone allows; the authorized mode
	// is tested in module_test.go.
	m := &Module{cached: fuzzLookup, live: fuzzLookup, opts: Options{Bypass: BypassLabelOnly}}
	m.opts.setDefaults()
	// Decided as the server does: Admit, and the confirmation of a denial.
	hook := m.Webhooks()[0]
	f.Fuzz(func(t *testing.T, selector uint8, raw []byte) {
		gvk := fuzzKinds[int(selector)%len(fuzzKinds)]
		resp := hook.Decide(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "fuzz", Operation: admissionv1.Delete, Kind: gvk, Namespace: "app", Name: "x",
			OldObject: runtime.RawExtension{Raw: raw},
		}}).Response
		if resp.Allowed {
			return
		}
		if resp.Result == nil {
			t.Fatal("refused without a result")
		}
		switch resp.Result.Code {
		case http.StatusForbidden:
			obj, err := decodeObject(gvk.Kind, raw)
			if err != nil {
				t.Fatalf("denied an oldObject that does not decode (%v): %s", err, raw)
			}
			if obj.GetLabels()[BypassLabel] == "true" {
				t.Fatalf("denied an object labelled %s=true: %s", BypassLabel, raw)
			}
		case http.StatusBadRequest:
			if _, err := decodeObject(gvk.Kind, raw); err == nil && len(raw) > 0 {
				t.Fatalf("400 for an oldObject that decodes: %q", resp.Result.Message)
			}
		default:
			t.Fatalf("HTTP %d: %q", resp.Result.Code, resp.Result.Message)
		}
	})
}
