// Package fuzztest round-trips random NodeGroups between an older version
// and the v1 hub, in the manner of Cluster API's utilconversion.FuzzTestFunc.
// Each older version runs it with fuzzer functions for its own enums.
package fuzztest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// Iterations is how many random objects each round trip converts.
const Iterations = 10000

// Spoke is a pointer to the NodeGroup of an older version.
type Spoke[T any] interface {
	*T
	metav1.Object
	ConvertToHub(context.Context, *v1.NodeGroup) error
	ConvertFromHub(*v1.NodeGroup) error
}

// LookupFunc adapts a function to v1.CloudPermanentLookup.
type LookupFunc func(string) (bool, error)

// IsCloudPermanent calls f.
func (f LookupFunc) IsCloudPermanent(name string) (bool, error) { return f(name) }

// WithLookup is a context carrying lookup for ConvertToHub.
func WithLookup(lookup v1.CloudPermanentLookup) context.Context {
	return v1.WithCloudPermanentLookup(context.Background(), lookup)
}

// evenNamesPermanent gives both answers across fuzzed names.
var evenNamesPermanent = LookupFunc(func(name string) (bool, error) { return len(name)%2 == 0, nil })

// LookupNotAllowed fails the conversion if asked: a v1 object converted
// down and back must get its exact type from the conversion data alone.
var LookupNotAllowed = LookupFunc(func(name string) (bool, error) {
	return false, errors.New("the provider configuration was consulted")
})

// Pick returns one of values at random.
func Pick[T any](c randfill.Continue, values ...T) T { return values[c.Rand.Intn(len(values))] }

// hubFuncs steer the v1 enums and patterns the conversions treat specially
// towards their real values; random strings would almost never hit them.
func hubFuncs(runtimeserializer.CodecFactory) []any {
	return []any{
		func(t *v1.NodeType, c randfill.Continue) {
			*t = Pick(c, v1.NodeTypeCloudEphemeral, v1.NodeTypeCloudPermanent, v1.NodeTypeCloudStatic, v1.NodeTypeStatic)
		},
		func(t *v1.CRIType, c randfill.Continue) {
			*t = Pick(c, "", v1.CRITypeDocker, v1.CRITypeContainerd, v1.CRITypeContainerdV2, v1.CRITypeNotManaged)
		},
		func(s *v1.ChaosSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Period = Pick(c, "", "30m", "6h", "2h30m", "1h0m", c.String(0))
		},
	}
}

func newFuzzer(seed int64, spokeFuncs fuzzer.FuzzerFuncs) *randfill.Filler {
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, hubFuncs, spokeFuncs)
	return fuzzer.FuzzerFor(funcs, rand.NewSource(seed), runtimeserializer.NewCodecFactory(runtime.NewScheme())).NumElements(0, 3)
}

// exerciseHybridRules sometimes names the group master or sets the
// permanent-node-group annotation, which random metadata never does.
func exerciseHybridRules(r *rand.Rand, ng metav1.Object) {
	switch r.Intn(4) {
	case 0:
		ng.SetName(v1.MasterNodeGroup)
	case 1:
		a := ng.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[v1.PermanentNodeGroupAnnotation] = Pick(randfill.Continue{Rand: r}, "true", "false", "yes")
		ng.SetAnnotations(a)
	}
}

// HubRule is a rule of the v1 schema that every conversion to v1 must keep
// for the random objects of an older version: the API server checks a
// write through that version against that version's schema only, and
// stores what the conversion returns.
type HubRule func(spoke, hub metav1.Object) error

// DockerOnlyWithTypeDocker is v1's rule that cri.docker is set only beside
// cri.type Docker, for a version whose own schema does not already refuse
// the spoke (v1alpha1 keeps docker outside spec.cri).
func DockerOnlyWithTypeDocker(_, hub metav1.Object) error {
	if c := hub.(*v1.NodeGroup).Spec.CRI; c != nil && c.Docker != nil && c.Type != v1.CRITypeDocker {
		return fmt.Errorf("cri.docker beside cri.type %q", c.Type)
	}
	return nil
}

// SpokeHubSpoke converts random objects of an older version to v1 and back,
// and fails unless they come back equal and each v1 object keeps rules.
// spokeFuncs steer that version's enums and patterns as hubFuncs do for v1.
func SpokeHubSpoke[T any, P Spoke[T]](t *testing.T, spokeFuncs fuzzer.FuzzerFuncs, rules ...HubRule) {
	t.Helper()
	f := newFuzzer(1, spokeFuncs)
	r := rand.New(rand.NewSource(2))
	for i := range Iterations {
		before := P(new(T))
		f.Fill(before)
		exerciseHybridRules(r, before)

		hub := &v1.NodeGroup{}
		if err := before.ConvertToHub(WithLookup(evenNamesPermanent), hub); err != nil {
			t.Fatalf("iteration %d: to hub: %v", i, err)
		}
		for _, rule := range rules {
			if err := rule(before, hub); err != nil {
				t.Fatalf("iteration %d: the v1 object breaks a v1 rule: %v\nbefore: %s\nv1:     %s", i, err, AsJSON(before), AsJSON(hub))
			}
		}
		after := P(new(T))
		if err := after.ConvertFromHub(hub); err != nil {
			t.Fatalf("iteration %d: from hub: %v", i, err)
		}
		// What the hub held beyond this version rides in the annotation;
		// it is the only difference a spoke-hub-spoke trip may make.
		a := after.GetAnnotations()
		delete(a, v1.ConversionDataAnnotation)
		after.SetAnnotations(a)
		if !apiequality.Semantic.DeepEqual(before, after) {
			t.Fatalf("iteration %d: round trip changed the object\nbefore: %s\nafter:  %s", i, AsJSON(before), AsJSON(after))
		}
	}
}

// HubSpokeHub converts random v1 objects to an older version, through JSON
// as the API server hands them back, and to v1 again, and fails unless they
// come back equal.
func HubSpokeHub[T any, P Spoke[T]](t *testing.T, spokeFuncs fuzzer.FuzzerFuncs) {
	t.Helper()
	f := newFuzzer(3, spokeFuncs)
	r := rand.New(rand.NewSource(4))
	for i := range Iterations {
		before := &v1.NodeGroup{}
		f.Fill(before)
		exerciseHybridRules(r, before)

		spoke := P(new(T))
		if err := spoke.ConvertFromHub(before); err != nil {
			t.Fatalf("iteration %d: from hub: %v", i, err)
		}
		spoke = jsonRoundTrip[T, P](t, spoke)
		after := &v1.NodeGroup{}
		if err := spoke.ConvertToHub(WithLookup(LookupNotAllowed), after); err != nil {
			t.Fatalf("iteration %d: to hub: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(before, after) {
			t.Fatalf("iteration %d: round trip changed the object\nbefore: %s\nafter:  %s", i, AsJSON(before), AsJSON(after))
		}
	}
}

func jsonRoundTrip[T any, P Spoke[T]](t *testing.T, in P) P {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := P(new(T))
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// AsJSON renders v for a failure message.
func AsJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(raw)
}
