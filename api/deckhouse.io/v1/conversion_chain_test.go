package v1_test

import (
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/fuzztest"
	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha2"
)

// An object written through v1alpha1, rewritten through v1alpha2 and read
// through v1alpha1 again keeps what only v1alpha1 holds, and what only v1
// holds survives the v1alpha1 leg.
func TestDataSurvivesAChainThroughEveryVersion(t *testing.T) {
	original := &v1alpha1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "edge"},
		Spec: v1alpha1.NodeGroupSpec{
			NodeType:          v1alpha1.NodeTypeHybrid,
			KubernetesVersion: "1.34",
			Static:            &v1alpha1.StaticSpec{InternalNetworkCIDRs: []string{"192.168.0.0/16"}},
		},
	}
	stored := &v1.NodeGroup{}
	if err := original.ConvertToHub(fuzztest.WithLookup(v1.MasterOnly{}), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.NodeType != v1.NodeTypeCloudStatic {
		t.Fatalf("nodeType %s", stored.Spec.NodeType)
	}
	// A v1 client adds a v1-only field.
	stored.Spec.NodeDrainTimeoutSecond = ptr.To[int32](300)

	viaAlpha2 := &v1alpha2.NodeGroup{}
	if err := viaAlpha2.ConvertFromHub(stored); err != nil {
		t.Fatal(err)
	}
	viaAlpha2.Spec.Kubelet = &v1alpha2.KubeletSpec{MaxPods: ptr.To[int32](100)}
	if err := viaAlpha2.ConvertToHub(fuzztest.WithLookup(v1.MasterOnly{}), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.NodeDrainTimeoutSecond == nil || *stored.Spec.NodeDrainTimeoutSecond != 300 {
		t.Fatalf("nodeDrainTimeoutSecond lost through v1alpha2: %v", stored.Spec.NodeDrainTimeoutSecond)
	}

	viaAlpha1 := &v1alpha1.NodeGroup{}
	if err := viaAlpha1.ConvertFromHub(stored); err != nil {
		t.Fatal(err)
	}
	want := original.DeepCopy()
	want.Spec.Kubelet = &v1alpha1.KubeletSpec{MaxPods: ptr.To[int32](100)}
	got := viaAlpha1.DeepCopy()
	delete(got.Annotations, v1.ConversionDataAnnotation)
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Fatalf("read back through v1alpha1\n got %+v\nwant %+v", got.Spec, want.Spec)
	}

	again := &v1.NodeGroup{}
	if err := viaAlpha1.ConvertToHub(fuzztest.WithLookup(v1.MasterOnly{}), again); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(again, stored) {
		t.Fatalf("v1 object changed by a v1alpha1 read-write\n got %+v\nwant %+v", again, stored)
	}
}
