package v1alpha1

import (
	"encoding/json"
	"errors"
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

const fuzzIterations = 10000

// lookupFunc adapts a function to v1.CloudPermanentLookup.
type lookupFunc func(string) (bool, error)

func (f lookupFunc) IsCloudPermanent(name string) (bool, error) { return f(name) }

// evenNamesPermanent gives both answers across fuzzed names.
var evenNamesPermanent = lookupFunc(func(name string) (bool, error) { return len(name)%2 == 0, nil })

// lookupNotAllowed fails the conversion if asked: a v1 object converted
// down and back must get its exact type from the conversion data alone.
var lookupNotAllowed = lookupFunc(func(name string) (bool, error) {
	return false, errors.New("the provider configuration was consulted")
})

func pick[T any](c randfill.Continue, values ...T) T { return values[c.Rand.Intn(len(values))] }

// fuzzFuncs steer the enums and patterns the conversion treats specially
// towards their real values; random strings would almost never hit them.
func fuzzFuncs(runtimeserializer.CodecFactory) []any {
	return []any{
		func(t *NodeType, c randfill.Continue) {
			*t = pick(c, NodeTypeCloud, NodeTypeStatic, NodeTypeHybrid)
		},
		func(t *v1.NodeType, c randfill.Continue) {
			*t = pick(c, v1.NodeTypeCloudEphemeral, v1.NodeTypeCloudPermanent, v1.NodeTypeCloudStatic, v1.NodeTypeStatic)
		},
		func(t *CRIType, c randfill.Continue) {
			*t = pick(c, "", CRITypeDocker, CRITypeContainerd, CRITypeNotManaged)
		},
		func(t *v1.CRIType, c randfill.Continue) {
			*t = pick(c, "", v1.CRITypeDocker, v1.CRITypeContainerd, v1.CRITypeContainerdV2, v1.CRITypeNotManaged)
		},
		func(s *ChaosSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Period = pick(c, "", "30m", "6h", c.String(0))
		},
		func(s *v1.ChaosSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Period = pick(c, "", "30m", "6h", "2h30m", "1h0m", c.String(0))
		},
	}
}

func newFuzzer(seed int64) *randfill.Filler {
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, fuzzFuncs)
	return fuzzer.FuzzerFor(funcs, rand.NewSource(seed), runtimeserializer.NewCodecFactory(runtime.NewScheme())).NumElements(0, 3)
}

// exerciseHybridRules sometimes names the group master or sets the
// permanent-node-group annotation, which random metadata never does.
func exerciseHybridRules(r *rand.Rand, ng interface {
	SetName(string)
	GetAnnotations() map[string]string
	SetAnnotations(map[string]string)
}) {
	switch r.Intn(4) {
	case 0:
		ng.SetName(v1.MasterNodeGroup)
	case 1:
		a := ng.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[v1.PermanentNodeGroupAnnotation] = pick(randfill.Continue{Rand: r}, "true", "false", "yes")
		ng.SetAnnotations(a)
	}
}

func TestFuzzSpokeHubSpoke(t *testing.T) {
	f := newFuzzer(1)
	r := rand.New(rand.NewSource(2))
	for i := range fuzzIterations {
		before := &NodeGroup{}
		f.Fill(before)
		exerciseHybridRules(r, before)

		hub := &v1.NodeGroup{}
		if err := before.ConvertToHub(hub, evenNamesPermanent); err != nil {
			t.Fatalf("iteration %d: to hub: %v", i, err)
		}
		after := &NodeGroup{}
		if err := after.ConvertFrom(hub); err != nil {
			t.Fatalf("iteration %d: from hub: %v", i, err)
		}
		// What the hub held beyond this version rides in the annotation;
		// it is the only difference a spoke-hub-spoke trip may make.
		delete(after.Annotations, v1.ConversionDataAnnotation)
		if !apiequality.Semantic.DeepEqual(before, after) {
			t.Fatalf("iteration %d: round trip changed the object\nbefore: %s\nafter:  %s", i, asJSON(before), asJSON(after))
		}
	}
}

func TestFuzzHubSpokeHub(t *testing.T) {
	f := newFuzzer(3)
	r := rand.New(rand.NewSource(4))
	for i := range fuzzIterations {
		before := &v1.NodeGroup{}
		f.Fill(before)
		exerciseHybridRules(r, before)

		spoke := &NodeGroup{}
		if err := spoke.ConvertFrom(before); err != nil {
			t.Fatalf("iteration %d: from hub: %v", i, err)
		}
		// Through JSON, as the API server hands the object back.
		spoke = jsonRoundTrip(t, spoke)
		after := &v1.NodeGroup{}
		if err := spoke.ConvertToHub(after, lookupNotAllowed); err != nil {
			t.Fatalf("iteration %d: to hub: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(before, after) {
			t.Fatalf("iteration %d: round trip changed the object\nbefore: %s\nafter:  %s", i, asJSON(before), asJSON(after))
		}
	}
}

func jsonRoundTrip(t *testing.T, in *NodeGroup) *NodeGroup {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := &NodeGroup{}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func asJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(raw)
}
