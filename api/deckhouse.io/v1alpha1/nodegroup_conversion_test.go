package v1alpha1

import (
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/fuzztest"
	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// spec.docker without cri.type Docker configures a runtime the group does
// not run. v1 allows cri.docker only with type Docker, which the policy
// refuses, so the block rides in the conversion data and v1 keeps its rules.
func TestDockerWithoutTypeDockerRidesInTheConversionData(t *testing.T) {
	for _, cri := range []*CRISpec{nil, {}, {Type: CRITypeContainerd}, {Type: CRITypeNotManaged}} {
		in := &NodeGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "worker"},
			Spec: NodeGroupSpec{
				NodeType:          NodeTypeCloud,
				KubernetesVersion: "1.33",
				CRI:               cri,
				Docker:            &DockerSpec{MaxConcurrentDownloads: ptr.To[int32](5), Manage: ptr.To(false)},
				Kubelet:           &KubeletSpec{MaxPods: ptr.To[int32](80)},
			},
		}
		hub := &v1.NodeGroup{}
		if err := in.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), hub); err != nil {
			t.Fatal(err)
		}
		if c := hub.Spec.CRI; c != nil && c.Docker != nil {
			t.Fatalf("cri %s: docker beside type %q breaks v1's rule", fuzztest.AsJSON(c), c.Type)
		}
		if hub.Spec.NodeType != v1.NodeTypeCloudEphemeral || *hub.Spec.Kubelet.MaxPods != 80 {
			t.Fatalf("spec %s", fuzztest.AsJSON(hub.Spec))
		}
		if got, want := hub.Annotations[v1.ConversionDataAnnotation], `{"v1alpha1":{"kubernetesVersion":"1.33","docker":{"maxConcurrentDownloads":5,"manage":false}}}`; got != want {
			t.Fatalf("conversion data %q, want %q", got, want)
		}

		back := &NodeGroup{}
		if err := back.ConvertFromHub(hub); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(back, in) {
			t.Fatalf("round trip\n got %s\nwant %s", fuzztest.AsJSON(back), fuzztest.AsJSON(in))
		}
	}
}

func TestDockerBesideTypeDockerMovesIntoCRI(t *testing.T) {
	in := &NodeGroup{Spec: NodeGroupSpec{NodeType: NodeTypeStatic, CRI: &CRISpec{Type: CRITypeDocker}, Docker: &DockerSpec{Manage: ptr.To(true)}}}
	hub := &v1.NodeGroup{}
	if err := in.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), hub); err != nil {
		t.Fatal(err)
	}
	want := &v1.CRISpec{Type: v1.CRITypeDocker, Docker: &v1.DockerSpec{Manage: ptr.To(true)}}
	if !apiequality.Semantic.DeepEqual(hub.Spec.CRI, want) || hub.Annotations[v1.ConversionDataAnnotation] != "" {
		t.Fatalf("cri %s, annotations %v, want %s", fuzztest.AsJSON(hub.Spec.CRI), hub.Annotations, fuzztest.AsJSON(want))
	}
}

// An older conversion (Gatehouse's before, Deckhouse's Python hook) stored
// spec.docker as cri.docker without a type. Read and written back through
// v1alpha1 unchanged, the stored object stays as it is; a changed block
// rides in the conversion data like a new one.
func TestStoredCRIDockerWithoutTypeStaysUntilChanged(t *testing.T) {
	stored := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "legacy"}, Spec: v1.NodeGroupSpec{NodeType: v1.NodeTypeStatic,
		CRI: &v1.CRISpec{Docker: &v1.DockerSpec{MaxConcurrentDownloads: ptr.To[int32](4)}}}}
	read := &NodeGroup{}
	if err := read.ConvertFromHub(stored); err != nil {
		t.Fatal(err)
	}
	if read.Spec.CRI != nil || read.Spec.Docker == nil || *read.Spec.Docker.MaxConcurrentDownloads != 4 {
		t.Fatalf("v1alpha1 view %s", fuzztest.AsJSON(read.Spec))
	}
	unchanged := &v1.NodeGroup{}
	if err := read.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), unchanged); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(unchanged, stored) {
		t.Fatalf("unchanged write\n got %s\nwant %s", fuzztest.AsJSON(unchanged), fuzztest.AsJSON(stored))
	}

	read.Spec.Docker.MaxConcurrentDownloads = ptr.To[int32](6)
	changed := &v1.NodeGroup{}
	if err := read.ConvertToHub(fuzztest.WithLookup(fuzztest.LookupNotAllowed), changed); err != nil {
		t.Fatal(err)
	}
	if changed.Spec.CRI != nil {
		t.Fatalf("a changed block stayed in cri: %s", fuzztest.AsJSON(changed.Spec.CRI))
	}
	if got, want := changed.Annotations[v1.ConversionDataAnnotation], `{"v1alpha1":{"docker":{"maxConcurrentDownloads":6}}}`; got != want {
		t.Fatalf("conversion data %q, want %q", got, want)
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
