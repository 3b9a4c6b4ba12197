package v1alpha2

import (
	"context"
	"strings"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/fuzztest"
	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// listed answers like a provider configuration with nodeGroups [front-nm].
var listed = fuzztest.LookupFunc(func(name string) (bool, error) { return name == "front-nm", nil })

func spoke(name string, nodeType NodeType, annotations map[string]string) *NodeGroup {
	return &NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       NodeGroupSpec{NodeType: nodeType},
	}
}

func TestNodeTypeToHub(t *testing.T) {
	cases := []struct {
		name        string
		nodeType    NodeType
		annotations map[string]string
		want        v1.NodeType
	}{
		{"worker", NodeTypeCloud, nil, v1.NodeTypeCloudEphemeral},
		{"worker", NodeTypeStatic, nil, v1.NodeTypeStatic},
		{"master", NodeTypeHybrid, nil, v1.NodeTypeCloudPermanent},
		{"front-nm", NodeTypeHybrid, nil, v1.NodeTypeCloudPermanent},
		{"another", NodeTypeHybrid, nil, v1.NodeTypeCloudStatic},
		{"another", NodeTypeHybrid, map[string]string{v1.PermanentNodeGroupAnnotation: "true"}, v1.NodeTypeCloudPermanent},
		{"front-nm", NodeTypeHybrid, map[string]string{v1.PermanentNodeGroupAnnotation: "false"}, v1.NodeTypeCloudStatic},
		{"front-nm", NodeTypeHybrid, map[string]string{v1.PermanentNodeGroupAnnotation: "yes"}, v1.NodeTypeCloudPermanent},
		{"master", NodeTypeHybrid, map[string]string{v1.PermanentNodeGroupAnnotation: "false"}, v1.NodeTypeCloudPermanent},
	}
	for _, tc := range cases {
		t.Run(tc.name+"/"+string(tc.nodeType), func(t *testing.T) {
			hub := &v1.NodeGroup{}
			if err := spoke(tc.name, tc.nodeType, tc.annotations).ConvertToHub(fuzztest.WithLookup(listed), hub); err != nil {
				t.Fatal(err)
			}
			if hub.Spec.NodeType != tc.want {
				t.Fatalf("nodeType %s, want %s", hub.Spec.NodeType, tc.want)
			}
		})
	}
}

func TestNodeTypeFromHub(t *testing.T) {
	for hubType, want := range map[v1.NodeType]NodeType{
		v1.NodeTypeCloudEphemeral: NodeTypeCloud,
		v1.NodeTypeCloudPermanent: NodeTypeHybrid,
		v1.NodeTypeCloudStatic:    NodeTypeHybrid,
		v1.NodeTypeStatic:         NodeTypeStatic,
	} {
		out := &NodeGroup{}
		if err := out.ConvertFromHub(&v1.NodeGroup{Spec: v1.NodeGroupSpec{NodeType: hubType}}); err != nil {
			t.Fatal(err)
		}
		if out.Spec.NodeType != want {
			t.Errorf("%s became %s, want %s", hubType, out.Spec.NodeType, want)
		}
	}
}

func TestSavedHybridTypeWinsOverTheLookupUntilTheTypeIsChanged(t *testing.T) {
	stored := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "front-nm"}, Spec: v1.NodeGroupSpec{NodeType: v1.NodeTypeCloudStatic}}
	read := &NodeGroup{}
	if err := read.ConvertFromHub(stored); err != nil {
		t.Fatal(err)
	}
	if got := read.Annotations[v1.ConversionDataAnnotation]; got != `{"v1":{"spec":{"nodeType":"CloudStatic"}}}` {
		t.Fatalf("conversion data %s", got)
	}

	written := &v1.NodeGroup{}
	if err := read.ConvertToHub(fuzztest.WithLookup(listed), written); err != nil {
		t.Fatal(err)
	}
	if written.Spec.NodeType != v1.NodeTypeCloudStatic {
		t.Fatalf("a group stored as CloudStatic came back as %s because the provider configuration lists it", written.Spec.NodeType)
	}
	if _, left := written.Annotations[v1.ConversionDataAnnotation]; left {
		t.Fatal("the conversion-data annotation was left on the v1 object")
	}

	read.Spec.NodeType = NodeTypeCloud
	if err := read.ConvertToHub(fuzztest.WithLookup(listed), written); err != nil {
		t.Fatal(err)
	}
	if written.Spec.NodeType != v1.NodeTypeCloudEphemeral {
		t.Fatalf("a type changed to Cloud became %s", written.Spec.NodeType)
	}
}

func TestContainerdV2IsShownAsContainerdAndRestored(t *testing.T) {
	stored := &v1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "worker"},
		Spec: v1.NodeGroupSpec{NodeType: v1.NodeTypeStatic, CRI: &v1.CRISpec{
			Type: v1.CRITypeContainerdV2, ContainerdV2: &v1.ContainerdSpec{MaxConcurrentDownloads: ptr.To[int32](7)},
		}},
	}
	read := &NodeGroup{}
	if err := read.ConvertFromHub(stored); err != nil {
		t.Fatal(err)
	}
	if read.Spec.CRI.Type != CRITypeContainerd || read.Spec.CRI.Containerd != nil {
		t.Fatalf("cri %+v, want type Containerd and no containerd block", read.Spec.CRI)
	}
	back := &v1.NodeGroup{}
	if err := read.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), back); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(back.Spec.CRI, stored.Spec.CRI) {
		t.Fatalf("cri came back as %+v", back.Spec.CRI)
	}

	// A client that picks another runtime through this version gets it,
	// without the ContainerdV2 settings of the type it left.
	read.Spec.CRI.Type = CRITypeNotManaged
	if err := read.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.CRI.Type != v1.CRITypeNotManaged || back.Spec.CRI.ContainerdV2 != nil {
		t.Fatalf("cri %+v, want NotManaged without containerdV2", back.Spec.CRI)
	}
}

func TestChaosPeriodOnlyV1AcceptsIsKeptAside(t *testing.T) {
	stored := &v1.NodeGroup{Spec: v1.NodeGroupSpec{NodeType: v1.NodeTypeStatic, Chaos: &v1.ChaosSpec{Mode: "DrainAndDelete", Period: "2h30m"}}}
	read := &NodeGroup{}
	if err := read.ConvertFromHub(stored); err != nil {
		t.Fatal(err)
	}
	if read.Spec.Chaos.Period != "" {
		t.Fatalf("period %q would fail this version's pattern on write-back", read.Spec.Chaos.Period)
	}
	back := &v1.NodeGroup{}
	if err := read.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.Chaos.Period != "2h30m" {
		t.Fatalf("period %q, want 2h30m", back.Spec.Chaos.Period)
	}
	read.Spec.Chaos.Period = "3h"
	if err := read.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.Chaos.Period != "3h" {
		t.Fatalf("a period set through this version was replaced by the saved one: %q", back.Spec.Chaos.Period)
	}
}

func TestV1OnlyFieldsSurviveAReadModifyWrite(t *testing.T) {
	stored := &v1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu", Labels: map[string]string{"team": "ml"}},
		Spec: v1.NodeGroupSpec{
			NodeType:               v1.NodeTypeCloudEphemeral,
			GPU:                    &v1.GPUSpec{Sharing: "MIG", MIG: &v1.GPUMIG{PartedConfig: "all-1g.5gb"}},
			Fencing:                &v1.FencingSpec{Mode: "Watchdog"},
			NodeDrainTimeoutSecond: ptr.To[int32](600),
			CloudInstances: &v1.CloudInstancesSpec{
				MinPerZone: 1, MaxPerZone: 3, Priority: ptr.To[int32](10),
				ClassReference: v1.ClassReference{Kind: "OpenStackInstanceClass", Name: "gpu"},
				StandbyHolder:  &v1.StandbyHolderSpec{OverprovisioningRate: ptr.To[int32](30)},
			},
			Kubelet: &v1.KubeletSpec{
				MaxPods:         ptr.To[int32](64),
				TopologyManager: &v1.TopologyManager{Enabled: ptr.To(true), Policy: "SingleNumaNode"},
			},
		},
		Status: v1.NodeGroupStatus{
			Ready:      ptr.To[int32](2),
			Conditions: []v1.NodeGroupCondition{{Type: "Ready", Status: "True", LastTransitionTime: "2025-01-02T03:04:05.678Z"}},
		},
	}
	read := &NodeGroup{}
	if err := read.ConvertFromHub(stored); err != nil {
		t.Fatal(err)
	}
	read.Spec.CloudInstances.MaxPerZone = 5
	read.Labels["team"] = "research"

	back := &v1.NodeGroup{}
	if err := read.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), back); err != nil {
		t.Fatal(err)
	}
	want := stored.DeepCopy()
	want.Spec.CloudInstances.MaxPerZone = 5
	want.Labels["team"] = "research"
	if !apiequality.Semantic.DeepEqual(back, want) {
		t.Fatalf("after a write through v1alpha2\n got %s\nwant %s", fuzztest.AsJSON(back), fuzztest.AsJSON(want))
	}
}

func TestUnreadableConversionDataFailsTheConversion(t *testing.T) {
	in := spoke("worker", NodeTypeStatic, map[string]string{v1.ConversionDataAnnotation: "{not json"})
	err := in.ConvertToHub(fuzztest.WithLookup(listed), &v1.NodeGroup{})
	if err == nil || !strings.Contains(err.Error(), v1.ConversionDataAnnotation) {
		t.Fatalf("error %v, want one naming the annotation", err)
	}
	in.Annotations[v1.ConversionDataAnnotation] = `{"v1":{"spec":{"futureField":1}}}`
	if err := in.ConvertToHub(fuzztest.WithLookup(listed), &v1.NodeGroup{}); err == nil || !strings.Contains(err.Error(), "futureField") {
		t.Fatalf("error %v, want an unknown field refused rather than dropped", err)
	}
}

func TestLookupErrorsNameTheGroup(t *testing.T) {
	failing := fuzztest.LookupFunc(func(string) (bool, error) { return false, errUnknown })
	err := spoke("another", NodeTypeHybrid, nil).ConvertToHub(fuzztest.WithLookup(failing), &v1.NodeGroup{})
	if err == nil || !strings.Contains(err.Error(), `Hybrid NodeGroup "another"`) || !strings.Contains(err.Error(), errUnknown.Error()) {
		t.Fatalf("error %v", err)
	}
	// Groups that need no lookup convert regardless.
	if err := spoke("master", NodeTypeHybrid, nil).ConvertToHub(fuzztest.WithLookup(failing), &v1.NodeGroup{}); err != nil {
		t.Fatal(err)
	}
}

var errUnknown = errorString("provider configuration not loaded yet")

type errorString string

func (e errorString) Error() string { return string(e) }

// Without a lookup in the context a group only the provider configuration
// can place is refused, not guessed; master needs no lookup.
func TestHybridWithoutALookupInTheContextFails(t *testing.T) {
	err := spoke("another", NodeTypeHybrid, nil).ConvertToHub(context.Background(), &v1.NodeGroup{})
	if err == nil || !strings.Contains(err.Error(), "no CloudPermanentLookup in the context") {
		t.Fatalf("conversion: %v", err)
	}
	hub := &v1.NodeGroup{}
	if err := spoke("master", NodeTypeHybrid, nil).ConvertToHub(context.Background(), hub); err != nil || hub.Spec.NodeType != v1.NodeTypeCloudPermanent {
		t.Fatalf("master: %v %s", err, hub.Spec.NodeType)
	}
}
