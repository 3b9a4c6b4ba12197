package v1alpha1

import (
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/fuzztest"
	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

func TestDockerMovesIntoCRIWithoutSettingTheType(t *testing.T) {
	in := &NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "worker"},
		Spec: NodeGroupSpec{
			NodeType:          NodeTypeCloud,
			KubernetesVersion: "1.33",
			Docker:            &DockerSpec{MaxConcurrentDownloads: ptr.To[int32](5), Manage: ptr.To(false)},
			Kubelet:           &KubeletSpec{MaxPods: ptr.To[int32](80)},
		},
	}
	hub := &v1.NodeGroup{}
	if err := in.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), hub); err != nil {
		t.Fatal(err)
	}
	want := &v1.CRISpec{Docker: &v1.DockerSpec{MaxConcurrentDownloads: ptr.To[int32](5), Manage: ptr.To(false)}}
	if !apiequality.Semantic.DeepEqual(hub.Spec.CRI, want) {
		t.Fatalf("cri %s, want %s", fuzztest.AsJSON(hub.Spec.CRI), fuzztest.AsJSON(want))
	}
	if hub.Spec.NodeType != v1.NodeTypeCloudEphemeral || *hub.Spec.Kubelet.MaxPods != 80 {
		t.Fatalf("spec %s", fuzztest.AsJSON(hub.Spec))
	}
	if got := hub.Annotations[v1.ConversionDataAnnotation]; got != `{"v1alpha1":{"kubernetesVersion":"1.33"}}` {
		t.Fatalf("conversion data %q, want the kubernetesVersion kept", got)
	}

	back := &NodeGroup{}
	if err := back.ConvertFromHub(hub); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(back, in) {
		t.Fatalf("round trip\n got %s\nwant %s", fuzztest.AsJSON(back), fuzztest.AsJSON(in))
	}
}

func TestCRIDockerMovesToTheTopLevelAndTypeIsKept(t *testing.T) {
	hub := &v1.NodeGroup{Spec: v1.NodeGroupSpec{NodeType: v1.NodeTypeStatic, CRI: &v1.CRISpec{
		Type: v1.CRITypeDocker, Docker: &v1.DockerSpec{Manage: ptr.To(true)},
	}}}
	out := &NodeGroup{}
	if err := out.ConvertFromHub(hub); err != nil {
		t.Fatal(err)
	}
	if out.Spec.Docker == nil || !*out.Spec.Docker.Manage || out.Spec.CRI == nil || out.Spec.CRI.Type != CRITypeDocker {
		t.Fatalf("spec %s, want docker at the top level and cri.type Docker", fuzztest.AsJSON(out.Spec))
	}
}

func TestStaticNetworksSurviveTheHub(t *testing.T) {
	in := &NodeGroup{Spec: NodeGroupSpec{NodeType: NodeTypeStatic, Static: &StaticSpec{InternalNetworkCIDRs: []string{"10.0.0.0/24"}}}}
	hub := &v1.NodeGroup{}
	if err := in.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), hub); err != nil {
		t.Fatal(err)
	}
	back := &NodeGroup{}
	if err := back.ConvertFromHub(hub); err != nil {
		t.Fatal(err)
	}
	if back.Spec.Static == nil || back.Spec.Static.InternalNetworkCIDRs[0] != "10.0.0.0/24" {
		t.Fatalf("static %s", fuzztest.AsJSON(back.Spec.Static))
	}
	if _, left := back.Annotations[v1.ConversionDataAnnotation]; left {
		t.Fatal("the annotation stayed after everything was restored")
	}
}

func TestNotManagedSettingsComeBackWithTheirType(t *testing.T) {
	hub := &v1.NodeGroup{Spec: v1.NodeGroupSpec{NodeType: v1.NodeTypeStatic, CRI: &v1.CRISpec{
		Type: v1.CRITypeNotManaged, NotManaged: &v1.NotManagedSpec{CRISocketPath: "/run/crio.sock"},
	}}}
	read := &NodeGroup{}
	if err := read.ConvertFromHub(hub); err != nil {
		t.Fatal(err)
	}
	back := &v1.NodeGroup{}
	if err := read.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.CRI.NotManaged == nil || back.Spec.CRI.NotManaged.CRISocketPath != "/run/crio.sock" {
		t.Fatalf("cri %s", fuzztest.AsJSON(back.Spec.CRI))
	}
	read.Spec.CRI.Type = CRITypeContainerd
	if err := read.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.CRI.NotManaged != nil {
		t.Fatalf("notManaged settings outlived a switch to Containerd: %s", fuzztest.AsJSON(back.Spec.CRI))
	}
}
