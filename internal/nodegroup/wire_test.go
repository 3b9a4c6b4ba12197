package nodegroup

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha2"
)

func TestPeekTypeMeta(t *testing.T) {
	cases := []struct {
		in                string
		apiVersion, kind  string
		needsFullDecoding bool
	}{
		{in: `{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{}}`, apiVersion: "deckhouse.io/v1", kind: "NodeGroup"},
		{in: " {\n \"metadata\" : {\"name\":\"a\\\"}{[\",\"x\":[1,{\"y\":\"]\"}]} ,\t\"kind\":\"NodeGroup\", \"apiVersion\":\"v\"}", apiVersion: "v", kind: "NodeGroup"},
		{in: `{"spec":{"n":-1.5e3,"b":true,"z":null},"kind":"K","apiVersion":"g/v"}`, apiVersion: "g/v", kind: "K"},
		{in: `{"apiVers\u0069on":"deckhouse.io/v1","kind":"NodeGroup"}`, needsFullDecoding: true},
		{in: `{"apiVersion":"deckhouse.io/v\u0031","kind":"NodeGroup"}`, needsFullDecoding: true},
		{in: `{"apiVersion":"deckhouse.io/v1"}`, needsFullDecoding: true},
		{in: `{"apiVersion":1,"kind":"NodeGroup"}`, needsFullDecoding: true},
		{in: `{"metadata":{"name":"unterminated}`, needsFullDecoding: true},
		{in: `[]`, needsFullDecoding: true},
		{in: ``, needsFullDecoding: true},
	}
	for _, tc := range cases {
		apiVersion, kind, err := peekTypeMeta([]byte(tc.in))
		if tc.needsFullDecoding {
			if !errors.Is(err, errNoFastPeek) {
				t.Errorf("%s: got %q %q %v, want the full decoding", tc.in, apiVersion, kind, err)
			}
			continue
		}
		if err != nil || apiVersion != tc.apiVersion || kind != tc.kind {
			t.Errorf("%s: got %q %q %v, want %q %q", tc.in, apiVersion, kind, err, tc.apiVersion, tc.kind)
		}
	}
}

func TestSetMember(t *testing.T) {
	cases := []struct {
		name, in, value, want string
		remove                bool
	}{
		{name: "replace", in: `{"name":"a","annotations":{"x":"1"},"uid":"u"}`, value: `{"y":"2"}`, want: `{"name":"a","annotations":{"y":"2"},"uid":"u"}`},
		{name: "add to an empty object", in: `{ }`, value: `{"y":"2"}`, want: `{"annotations":{"y":"2"}}`},
		{name: "add after the last member", in: `{"name":"a"}`, value: `{}`, want: `{"name":"a","annotations":{}}`},
		{name: "remove the first member", in: `{"annotations":{"x":"}"}, "name":"a"}`, remove: true, want: `{"name":"a"}`},
		{name: "remove a middle member", in: `{"name":"a","annotations":{"x":"1"},"uid":"u"}`, remove: true, want: `{"name":"a","uid":"u"}`},
		{name: "remove the last member", in: `{"name":"a" , "annotations":{"x":"1"} }`, remove: true, want: `{"name":"a" }`},
		{name: "remove the only member", in: `{"annotations":{"x":"1"}}`, remove: true, want: `{}`},
		{name: "remove what is absent", in: `{"name":"a"}`, remove: true, want: `{"name":"a"}`},
		{name: "escaped key", in: `{"annot\u0061tions":{"x":"1"},"name":"a"}`, value: `{"z":"3"}`, want: `{"annot\u0061tions":{"z":"3"},"name":"a"}`},
		{name: "nested lookalike", in: `{"labels":{"annotations":"no"},"name":"[\"annotations\""}`, value: `{}`, want: `{"labels":{"annotations":"no"},"name":"[\"annotations\"","annotations":{}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var value []byte
			if !tc.remove {
				value = []byte(tc.value)
			}
			got, err := setMember([]byte(tc.in), "annotations", value)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON %s", got)
			}
		})
	}
	for _, broken := range []string{`"x"`, `{"a" 1}`, `{"a":1,}`, `{"a":"1}`, `{"a":1 "b":2}`, `{a:1}`} {
		if _, err := setMember([]byte(broken), "annotations", []byte(`{}`)); err == nil {
			t.Errorf("%s: no error", broken)
		}
	}
}

// The webhook path decodes only part of metadata and writes it back as it
// came, so it is fuzzed on its own: full random v1 objects, managed fields
// included, go down to v1alpha2 and back through ConversionReviews and must
// come back as the same JSON.
func TestFuzzConversionReviewRoundTrip(t *testing.T) {
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, reviewFuzzFuncs), rand.NewSource(7),
		runtimeserializer.NewCodecFactory(runtime.NewScheme())).NumElements(0, 2)
	c := &converter{lookup: lookupNotConsulted}
	for i := range 10000 {
		ng := &v1.NodeGroup{}
		f.Fill(ng)
		ng.APIVersion, ng.Kind = hubVersion, kind
		stored, err := json.Marshal(ng)
		if err != nil {
			t.Fatal(err)
		}
		down, err := c.Convert(context.Background(), &apiextensionsv1.ConversionRequest{DesiredAPIVersion: alpha2Version, Objects: []runtime.RawExtension{{Raw: stored}}})
		if err != nil {
			t.Fatalf("iteration %d: down: %v\n%s", i, err, stored)
		}
		if err := json.Unmarshal(down[0].Raw, &v1alpha2.NodeGroup{}); err != nil {
			t.Fatalf("iteration %d: the v1alpha2 object does not decode: %v\n%s", i, err, down[0].Raw)
		}
		up, err := c.Convert(context.Background(), &apiextensionsv1.ConversionRequest{DesiredAPIVersion: hubVersion, Objects: down})
		if err != nil {
			t.Fatalf("iteration %d: up: %v\n%s", i, err, down[0].Raw)
		}
		if !jsonEqual(t, up[0].Raw, stored) {
			t.Fatalf("iteration %d:\nstored %s\n  back %s\n   via %s", i, stored, up[0].Raw, down[0].Raw)
		}
	}
}

// reviewFuzzFuncs keep the objects to what the API server can hold: JSON
// has no place for an IntOrString that is both, and managed fields carry
// JSON, not random bytes.
func reviewFuzzFuncs(runtimeserializer.CodecFactory) []any {
	return []any{
		func(t *v1.NodeType, c randfill.Continue) {
			*t = []v1.NodeType{v1.NodeTypeCloudEphemeral, v1.NodeTypeCloudPermanent, v1.NodeTypeCloudStatic, v1.NodeTypeStatic}[c.Rand.Intn(4)]
		},
		func(t *v1.CRIType, c randfill.Continue) {
			*t = []v1.CRIType{"", v1.CRITypeContainerd, v1.CRITypeContainerdV2, v1.CRITypeNotManaged}[c.Rand.Intn(4)]
		},
		func(s *v1.ChaosSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Period = []string{"", "30m", "2h30m", c.String(0)}[c.Rand.Intn(4)]
		},
	}
}
