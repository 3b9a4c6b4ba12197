package nodegroup

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	jsonv1 "github.com/go-json-experiment/json/v1"
	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// Native fuzz targets for the NodeGroup objects clients and the API server
// send: the validating webhook's decoding and checks, and the conversion
// webhook's wire format. Run one with
//
//	go test ./internal/nodegroup -run '^$' -fuzz '^FuzzAdmitNodeGroup$' -fuzztime 30s
//
// or all of them with make fuzz.

// fuzzStates are the cluster states the validator is fuzzed against: none
// known, and one that turns every check on.
var fuzzStates = []ClusterState{
	{},
	{
		ClusterType: "Cloud", ClusterPrefix: "demo", DefaultCRI: "Docker", PodSubnetNodeCIDRPrefix: 26,
		Zones: []string{"nova", "az-2"}, APIServerEndpoints: 1, CustomTolerationKeys: []string{"team"},
		NodesWithCustomContainerd: []string{"n2", "n1"},
		NodesWithoutContainerdV2:  []string{"n1"},
	},
}

var fuzzRequestVersions = []string{"v1", "v1alpha1", "v1alpha2", "", "v9"}

func nodeGroupSeeds() []string {
	return []string{
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"worker"},"spec":{"nodeType":"CloudEphemeral","cloudInstances":{"zones":["nova","other"],"minPerZone":3,"maxPerZone":1,"classReference":{"kind":"OpenStackInstanceClass","name":"w"}}}}`,
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"master"},"spec":{"nodeType":"CloudPermanent","cri":{"type":"ContainerdV2","containerd":{"maxConcurrentDownloads":1}},"disruptions":{"approvalMode":"RollingUpdate"}}}`,
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"worker","annotations":{"gatehouse.dev/nodegroup-conversion-data":"[1]"}},"spec":{"nodeType":"Static","nodeTemplate":{"taints":[{"key":"a","effect":"NoSchedule"},{"key":"a","effect":"NoSchedule"},{"key":"dedicated"}]}}}`,
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"worker"},"spec":{"nodeType":"Static","kubelet":{"maxPods":-2147483648,"topologyManager":{"enabled":true},"resourceReservation":{"mode":"Static"},"memorySwap":{"swapBehavior":"LimitedSwap"}}}}`,
		`{"spec":{"nodeType":"Static","kubelet":{"maxPods":2147483647,"topologyManager":{"enabled":true},"resourceReservation":{"mode":"Off"}}}}`,
		`{"metadata":{"name":12}}`,
		`null`,
		``,
	}
}

// FuzzAdmitNodeGroup sends random objects (and old objects) through the
// validator's Admit, which decodes them as the webhook does and runs every
// check: it never panics, an object that does not decode is a 400, and
// otherwise the answer is allowed without causes, or a 403 denial naming a
// field for each cause.
func FuzzAdmitNodeGroup(f *testing.F) {
	for i, s := range nodeGroupSeeds() {
		f.Add(uint8(i), []byte(s), []byte(nodeGroupSeeds()[(i+1)%len(nodeGroupSeeds())]))
	}
	f.Fuzz(func(t *testing.T, selector uint8, object, oldObject []byte) {
		ops := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete}
		op := ops[int(selector)%len(ops)]
		requestVersion := fuzzRequestVersions[int(selector>>2)%len(fuzzRequestVersions)]
		state := fuzzStates[int(selector>>5)%len(fuzzStates)]
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "fuzz", Operation: op,
			Kind:        metav1.GroupVersionKind{Group: "deckhouse.io", Version: "v1", Kind: "NodeGroup"},
			RequestKind: &metav1.GroupVersionKind{Group: "deckhouse.io", Version: requestVersion, Kind: "NodeGroup"},
			Object:      runtime.RawExtension{Raw: object}, OldObject: runtime.RawExtension{Raw: oldObject},
		}}
		resp := (&validator{state: fixedState(state)}).Admit(context.Background(), req)
		if resp.Allowed {
			if resp.Result != nil && resp.Result.Details != nil && len(resp.Result.Details.Causes) > 0 {
				t.Fatalf("allowed with causes: %+v", resp.Result.Details)
			}
			return
		}
		if resp.Result == nil {
			t.Fatal("refused without a result")
		}
		switch resp.Result.Code {
		case http.StatusBadRequest:
			if !strings.HasPrefix(resp.Result.Message, "decode ") {
				t.Fatalf("400 that is not a decoding error: %q", resp.Result.Message)
			}
		case http.StatusForbidden:
			d := resp.Result.Details
			if d == nil || len(d.Causes) == 0 {
				t.Fatalf("denied without causes: %q", resp.Result.Message)
			}
			for _, c := range d.Causes {
				if !strings.HasPrefix(c.Field, "spec.") && !strings.HasPrefix(c.Field, "metadata.") {
					t.Fatalf("cause without a field: %+v", c)
				}
				if !strings.Contains(resp.Result.Message, c.Message) {
					t.Fatalf("cause %q is not in the message %q", c.Message, resp.Result.Message)
				}
			}
		default:
			t.Fatalf("HTTP %d: %q", resp.Result.Code, resp.Result.Message)
		}
	})
}

// FuzzValidateDecodedNodeGroup runs Validate over random objects decoded
// into v1 NodeGroups as Admit decodes them (no panic), and checks that the
// same request validates the same way twice and that a denial never comes
// back empty-handed (every error has a field and a detail).
func FuzzValidateDecodedNodeGroup(f *testing.F) {
	for i, s := range nodeGroupSeeds() {
		f.Add(uint8(i), []byte(s), []byte(nodeGroupSeeds()[(i+2)%len(nodeGroupSeeds())]))
	}
	f.Fuzz(func(t *testing.T, selector uint8, object, oldObject []byte) {
		ng, old := &v1.NodeGroup{}, &v1.NodeGroup{}
		if admitDecode(object, ng) != nil || admitDecode(oldObject, old) != nil {
			return
		}
		ops := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect}
		req := Request{
			Operation:     ops[int(selector)%len(ops)],
			ClientVersion: "deckhouse.io/" + fuzzRequestVersions[int(selector>>2)%len(fuzzRequestVersions)],
			Old:           old, New: ng,
		}
		state := fuzzStates[int(selector>>5)%len(fuzzStates)]
		errs, warnings := Validate(req, state)
		for _, e := range errs {
			if e.Field == "" || e.Detail == "" {
				t.Fatalf("an error without a field or a detail: %+v", e)
			}
		}
		errs2, warnings2 := Validate(req, state)
		if !reflect.DeepEqual(errs, errs2) || strings.Join(warnings, "\n") != strings.Join(warnings2, "\n") {
			t.Fatalf("the same request validated differently:\n%v\n%v", errs, errs2)
		}
	})
}

// admitDecode decodes as Admit does: go-json-experiment's v1 Unmarshal
// into a v1 NodeGroup.
func admitDecode(raw []byte, into *v1.NodeGroup) error {
	return jsonv1.Unmarshal(raw, into)
}

// fuzzLookup answers like a provider configuration listing the groups with
// names of even length.
var fuzzLookup = lookupFunc(func(name string) (bool, error) { return len(name)%2 == 0, nil })

var fuzzDesiredVersions = []string{hubVersion, alpha2Version, alpha1Version, "deckhouse.io/v2", ""}

// FuzzConvertNodeGroupWire sends random objects through the conversion
// webhook's Convert, which reads each object in one jsontext pass and
// writes its metadata back as it came, but for the annotations. It never panics,
// answers one object per object, and for an input that is valid JSON:
// what it converted is valid JSON, a NodeGroup of the desired version whose
// spec and status decode strictly, with the input's metadata kept except
// the annotations.
func FuzzConvertNodeGroupWire(f *testing.F) {
	seeds := []string{
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"w","uid":"u","managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}],"annotations":{"a":"b"}},"spec":{"nodeType":"CloudStatic","chaos":{"period":"2h30m"}},"status":{"ready":1,"conditions":[{"type":"Ready","status":"True"}]}}`,
		`{"apiVersion":"deckhouse.io/v1alpha2","kind":"NodeGroup","metadata":{"name":"edge"},"spec":{"nodeType":"Hybrid","cri":{"type":"Docker","docker":{"manage":true}}}}`,
		`{"kind":"NodeGroup","apiVersion":"deckhouse.io/v1alpha1","metadata":{"name":"old","annotations":{"gatehouse.dev/nodegroup-conversion-data":"{\"v1\":{\"spec\":{\"nodeType\":\"CloudPermanent\"}}}"}},"spec":{"nodeType":"Hybrid","kubernetesVersion":"1.33"}}`,
		` { "metadata" : { "name" : "a\"}" } , "apiVersion" : "deckhouse.io/v1" , "kind" : "NodeGroup" , "spec" : { "nodeType" : "Static" } } `,
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","spec":{"nodeType":"Static"},"status":{}}`,
		`{"apiVers\u0069on":"deckhouse.io/v1alpha2","kind":"NodeGroup","metadata":{"n\u0061me":"x"},"spec":{"nodeType":"Cloud"}}`,
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":[],"spec":{"nodeType":"Static"}}`,
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"x","annotations":null},"spec":{"nodeType":"Static","unknown":1}}`,
		`{"apiVersion":"deckhouse.io/v1","kind":"ModuleConfig"}`,
		`[]`,
		``,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	c := &converter{lookup: fuzzLookup}
	f.Fuzz(func(t *testing.T, selector uint8, raw []byte) {
		desired := fuzzDesiredVersions[int(selector)%len(fuzzDesiredVersions)]
		req := &apiextensionsv1.ConversionRequest{UID: "fuzz", DesiredAPIVersion: desired, Objects: []runtime.RawExtension{{Raw: raw}}}
		out, err := c.Convert(context.Background(), req)
		if err != nil {
			return
		}
		if len(out) != 1 {
			t.Fatalf("%d objects for 1", len(out))
		}
		if !json.Valid(raw) {
			return // passed through or converted, what is not JSON is the API server's to never send
		}
		got := out[0].Raw
		if !json.Valid(got) {
			t.Fatalf("valid JSON in, invalid JSON out:\n in %s\nout %s", raw, got)
		}
		var in, conv struct {
			APIVersion string         `json:"apiVersion"`
			Kind       string         `json:"kind"`
			Metadata   map[string]any `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return // not an object of the expected shape; the converter did not look further
		}
		if err := json.Unmarshal(got, &conv); err != nil {
			t.Fatalf("the output is not an object: %v\n%s", err, got)
		}
		if conv.Kind != kind || conv.APIVersion != desired {
			t.Fatalf("converted to %q %q, want %q NodeGroup:\n in %s\nout %s", conv.APIVersion, conv.Kind, desired, raw, got)
		}
		if bytes.Equal(raw, got) {
			return
		}
		// What the converter wrote, spec and status, decodes strictly;
		// metadata is passed through as the API server sent it.
		obj, err := newNodeGroup(desired)
		if err != nil {
			t.Fatal(err)
		}
		var written struct{ Spec, Status json.RawMessage }
		if err := json.Unmarshal(got, &written); err != nil {
			t.Fatal(err)
		}
		_, spec, status := parts(obj)
		for _, p := range []struct {
			raw  json.RawMessage
			into any
		}{{written.Spec, spec}, {written.Status, status}} {
			if p.raw == nil {
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(p.raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(p.into); err != nil {
				t.Fatalf("the output's spec or status does not decode strictly as %s: %v\n%s", desired, err, got)
			}
		}
		// No metadata and metadata holding only the annotations the
		// conversion added are the same metadata.
		for _, m := range []*map[string]any{&in.Metadata, &conv.Metadata} {
			if *m == nil {
				*m = map[string]any{}
			}
			delete(*m, "annotations")
		}
		a, _ := json.Marshal(in.Metadata)
		b, _ := json.Marshal(conv.Metadata)
		if !bytes.Equal(a, b) {
			t.Fatalf("metadata other than annotations changed:\n in %s\nout %s", a, b)
		}
	})
}
