package nodegroup

import (
	"context"
	"encoding/json"
	"math/rand"
	"strings"
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

// The type meta is found wherever it is and however it is escaped; an
// object already in the desired version passes through unread.
func TestTypeMetaInAnyOrder(t *testing.T) {
	cases := []struct {
		in, wantErr string
	}{
		{in: `{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{}}`},
		{in: " {\n \"metadata\" : {\"name\":\"a\\\"}{[\",\"x\":[1,{\"y\":\"]\"}]} ,\t\"kind\":\"NodeGroup\", \"apiVersion\":\"deckhouse.io/v1\"}"},
		{in: `{"apiVers\u0069on":"deckhouse.io/v1","kind":"NodeGroup"}`},
		{in: `{"apiVersion":"deckhouse.io/v\u0031","kind":"NodeGroup"}`},
		{in: `{"apiVersion":"deckhouse.io/v1alpha2","kind":"NodeGroup","spec":{"nodeType":"Static"}} trailing`, wantErr: "decode: data after the object"},
		{in: `{"spec":{"n":-1.5e3,"b":true,"z":null},"kind":"K","apiVersion":"g/v","metadata":{"name":"k"}}`, wantErr: `(K "k") is not a NodeGroup`},
		{in: `{"apiVersion":"deckhouse.io/v1"}`, wantErr: `( "") is not a NodeGroup`},
		{in: `{"kind":"NodeGroup","metadata":{"name":"x"}}`, wantErr: `(NodeGroup "x", ): apiVersion "" is not a served NodeGroup version`},
		{in: `{"apiVersion":1,"kind":"NodeGroup"}`, wantErr: "is not a JSON object"},
		{in: `{"metadata":{"name":"unterminated}`, wantErr: "is not a JSON object"},
		{in: `[]`, wantErr: "is not a JSON object"},
		{in: ``, wantErr: "is not a JSON object"},
	}
	for _, tc := range cases {
		out, err := convertObject(context.Background(), []byte(tc.in), hubVersion)
		switch {
		case tc.wantErr == "" && (err != nil || string(out) != tc.in):
			t.Errorf("%s: got %s %v, want it passed through", tc.in, out, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: got %s %v, want an error with %q", tc.in, out, err, tc.wantErr)
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
