package v1alpha1

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apiconversion "k8s.io/apimachinery/pkg/conversion"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/conversiondata"
	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// The field copies live in zz_generated.conversion.go (conversion-gen), what
// both older versions do alike in internal/conversiondata. This file holds
// what this version alone does: spec.docker, cri.notManaged, which it lacks,
// and the fields v1 lacks, which ride in the conversion data.
//
// spec.docker moves into v1's spec.cri only beside cri.type Docker. Beside
// any other type, or none, it configures a runtime the group does not run,
// and v1 allows cri.docker only with type Docker, which the policy refuses:
// setting the type, as Deckhouse's Go port does, would switch the group's
// runtime and make every later write of it a denial. So the block rides in
// the conversion data, and the stored object keeps v1's rules.

// section is the conversion-data section of what a v1alpha1 object holds
// that v1 cannot.
const section = "v1alpha1"

// alpha1Data is what a v1alpha1 NodeGroup holds that v1 cannot.
type alpha1Data struct {
	KubernetesVersion string      `json:"kubernetesVersion,omitempty"`
	Static            *StaticSpec `json:"static,omitempty"`
	// Docker is a spec.docker beside a cri.type other than Docker.
	Docker *DockerSpec `json:"docker,omitempty"`
	// EmptyCRI records an empty spec.cri next to a spec.docker that v1
	// keeps in spec.cri, which would otherwise come back as no spec.cri.
	EmptyCRI bool `json:"emptyCRI,omitempty"`
}

// ConvertToHub converts to v1, restoring what a v1 object held that this
// version cannot and saving what this version holds that v1 cannot. A
// Hybrid group that neither the conversion data nor its annotations place
// is looked up in the v1.CloudPermanentLookup ctx carries.
func (src *NodeGroup) ConvertToHub(ctx context.Context, dst *v1.NodeGroup) error {
	sections, data, err := conversiondata.BeginToHub(src)
	if err != nil {
		return err
	}
	// The generated conversions share memory with their input: convert a
	// copy, so that dst shares none with src.
	in := &NodeGroup{}
	src.Spec.DeepCopyInto(&in.Spec)
	src.Status.DeepCopyInto(&in.Status)
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec, dst.Status = v1.NodeGroupSpec{}, v1.NodeGroupStatus{}
	if err := Convert_v1alpha1_NodeGroupSpec_To_v1_NodeGroupSpec(&in.Spec, &dst.Spec, nil); err != nil {
		return err
	}
	if err := Convert_v1alpha1_NodeGroupStatus_To_v1_NodeGroupStatus(&in.Status, &dst.Status, nil); err != nil {
		return err
	}
	var criType CRIType
	if src.Spec.CRI != nil {
		criType = src.Spec.CRI.Type
	}
	own := alpha1Data{
		KubernetesVersion: in.Spec.KubernetesVersion,
		Static:            in.Spec.Static,
	}
	dockerInCRI := in.Spec.Docker != nil && criType == CRITypeDocker
	if in.Spec.Docker != nil && !dockerInCRI {
		if keepsStoredDocker(data.Spec.CRI.Docker, in.Spec.Docker) {
			// Before FinishToHub, which restores the rest of a spec.cri
			// only where there is one.
			if dst.Spec.CRI == nil {
				dst.Spec.CRI = &v1.CRISpec{}
			}
			dst.Spec.CRI.Docker = data.Spec.CRI.Docker
			dockerInCRI = true
		} else {
			own.Docker = in.Spec.Docker
		}
	}
	own.EmptyCRI = dockerInCRI && in.Spec.CRI != nil && criEmpty(in.Spec.CRI)
	if err := data.FinishToHub(ctx, src, string(src.Spec.NodeType), string(criType), dst); err != nil {
		return err
	}
	if sections, err = conversiondata.Put(sections, section, &own); err != nil {
		return err
	}
	return conversiondata.Write(dst, v1.ConversionDataAnnotation, sections)
}

// ConvertFromHub converts from v1, keeping in the conversion-data
// annotation what this version cannot hold and restoring what a v1alpha1
// object held that v1 cannot. It never needs the cluster.
func (dst *NodeGroup) ConvertFromHub(src *v1.NodeGroup) error {
	sections, err := conversiondata.Read(src, v1.ConversionDataAnnotation)
	if err != nil {
		return err
	}
	var own alpha1Data
	if _, err := sections.Take(section, &own); err != nil {
		return err
	}

	// Converted from a copy: see ConvertToHub.
	in := &v1.NodeGroup{}
	src.Spec.DeepCopyInto(&in.Spec)
	src.Status.DeepCopyInto(&in.Status)
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec, dst.Status = NodeGroupSpec{}, NodeGroupStatus{}
	if err := Convert_v1_NodeGroupSpec_To_v1alpha1_NodeGroupSpec(&in.Spec, &dst.Spec, nil); err != nil {
		return err
	}
	if err := Convert_v1_NodeGroupStatus_To_v1alpha1_NodeGroupStatus(&in.Status, &dst.Status, nil); err != nil {
		return err
	}
	dst.Spec.KubernetesVersion, dst.Spec.Static = own.KubernetesVersion, own.Static
	// A spec.cri left empty by moving docker out is dropped unless the
	// object had one, as v1alpha1 objects usually carry docker alone.
	if dst.Spec.Docker != nil && dst.Spec.CRI != nil && criEmpty(dst.Spec.CRI) && !own.EmptyCRI {
		dst.Spec.CRI = nil
	}
	if dst.Spec.Docker == nil {
		dst.Spec.Docker = own.Docker
	}
	var period string
	if dst.Spec.Chaos != nil {
		period = dst.Spec.Chaos.Period
	}
	saved := conversiondata.SaveFromHub(in, period, true)
	if c := in.Spec.CRI; c != nil && c.Docker != nil && c.Type != v1.CRITypeDocker {
		// Stored by an older conversion (Gatehouse's or Deckhouse's). It
		// goes back where it was while the block is unchanged, so that a
		// read-modify-write through this version changes nothing else.
		saved.Spec.CRI.Docker = c.Docker
	}
	return saved.Finish(dst, sections)
}

// keepsStoredDocker reports whether docker, a spec.docker beside a type
// other than Docker, is the block stored, the same, in v1's spec.cri by an
// older conversion: then it stays there. A changed block rides in the
// conversion data like any new one.
func keepsStoredDocker(stored *v1.DockerSpec, docker *DockerSpec) bool {
	if stored == nil {
		return false
	}
	shown := &v1.DockerSpec{}
	if err := Convert_v1alpha1_DockerSpec_To_v1_DockerSpec(docker, shown, nil); err != nil {
		return false
	}
	return apiequality.Semantic.DeepEqual(stored, shown)
}

func criEmpty(c *CRISpec) bool {
	return c.Type == "" && c.Containerd == nil
}

// Convert_v1alpha1_NodeGroupSpec_To_v1_NodeGroupSpec moves the top-level
// spec.docker into spec.cri beside cri.type Docker. ConvertToHub keeps a
// docker block beside another type, and KubernetesVersion and Static, which
// v1 lacks, in the conversion data, and resolves Hybrid.
func Convert_v1alpha1_NodeGroupSpec_To_v1_NodeGroupSpec(in *NodeGroupSpec, out *v1.NodeGroupSpec, s apiconversion.Scope) error {
	if err := autoConvert_v1alpha1_NodeGroupSpec_To_v1_NodeGroupSpec(in, out, s); err != nil {
		return err
	}
	if in.NodeType == NodeTypeCloud {
		out.NodeType = v1.NodeTypeCloudEphemeral
	}
	if in.Docker != nil && in.CRI != nil && in.CRI.Type == CRITypeDocker {
		out.CRI.Docker = &v1.DockerSpec{}
		return Convert_v1alpha1_DockerSpec_To_v1_DockerSpec(in.Docker, out.CRI.Docker, s)
	}
	return nil
}

// Convert_v1_NodeGroupSpec_To_v1alpha1_NodeGroupSpec maps the node type and
// moves spec.cri.docker to the top-level spec.docker. The fields v1 alone
// has are saved by ConvertFromHub.
func Convert_v1_NodeGroupSpec_To_v1alpha1_NodeGroupSpec(in *v1.NodeGroupSpec, out *NodeGroupSpec, s apiconversion.Scope) error {
	if err := autoConvert_v1_NodeGroupSpec_To_v1alpha1_NodeGroupSpec(in, out, s); err != nil {
		return err
	}
	out.NodeType = conversiondata.NodeTypeFromHub[NodeType](in.NodeType)
	if in.CRI != nil && in.CRI.Docker != nil {
		out.Docker = &DockerSpec{}
		return Convert_v1_DockerSpec_To_v1alpha1_DockerSpec(in.CRI.Docker, out.Docker, s)
	}
	return nil
}

// Convert_v1_CRISpec_To_v1alpha1_CRISpec shows ContainerdV2 as Containerd.
// Docker moves up to spec.docker; ContainerdV2 and NotManaged are saved by
// ConvertFromHub.
func Convert_v1_CRISpec_To_v1alpha1_CRISpec(in *v1.CRISpec, out *CRISpec, s apiconversion.Scope) error {
	if err := autoConvert_v1_CRISpec_To_v1alpha1_CRISpec(in, out, s); err != nil {
		return err
	}
	out.Type = conversiondata.CRITypeFromHub[CRIType](in.Type)
	return nil
}

// Convert_v1_ChaosSpec_To_v1alpha1_ChaosSpec leaves out a period this
// version's pattern rejects, so that the object can be written back through
// this version; ConvertFromHub saves the period.
func Convert_v1_ChaosSpec_To_v1alpha1_ChaosSpec(in *v1.ChaosSpec, out *ChaosSpec, s apiconversion.Scope) error {
	if err := autoConvert_v1_ChaosSpec_To_v1alpha1_ChaosSpec(in, out, s); err != nil {
		return err
	}
	out.Period = conversiondata.ChaosPeriodFromHub(in.Period)
	return nil
}

// Convert_v1_CloudInstancesSpec_To_v1alpha1_CloudInstancesSpec drops
// Priority and QuickShutdown, which ConvertFromHub saves.
func Convert_v1_CloudInstancesSpec_To_v1alpha1_CloudInstancesSpec(in *v1.CloudInstancesSpec, out *CloudInstancesSpec, s apiconversion.Scope) error {
	return autoConvert_v1_CloudInstancesSpec_To_v1alpha1_CloudInstancesSpec(in, out, s)
}

// Convert_v1_StandbyHolderSpec_To_v1alpha1_StandbyHolderSpec drops
// OverprovisioningRate, which ConvertFromHub saves.
func Convert_v1_StandbyHolderSpec_To_v1alpha1_StandbyHolderSpec(in *v1.StandbyHolderSpec, out *StandbyHolderSpec, s apiconversion.Scope) error {
	return autoConvert_v1_StandbyHolderSpec_To_v1alpha1_StandbyHolderSpec(in, out, s)
}

// Convert_v1_KubeletSpec_To_v1alpha1_KubeletSpec drops ResourceReservation,
// TopologyManager and MemorySwap, which ConvertFromHub saves.
func Convert_v1_KubeletSpec_To_v1alpha1_KubeletSpec(in *v1.KubeletSpec, out *KubeletSpec, s apiconversion.Scope) error {
	return autoConvert_v1_KubeletSpec_To_v1alpha1_KubeletSpec(in, out, s)
}

// Convert_v1_NodeGroupStatus_To_v1alpha1_NodeGroupStatus drops Conditions
// and Deckhouse, which ConvertFromHub saves.
func Convert_v1_NodeGroupStatus_To_v1alpha1_NodeGroupStatus(in *v1.NodeGroupStatus, out *NodeGroupStatus, s apiconversion.Scope) error {
	return autoConvert_v1_NodeGroupStatus_To_v1alpha1_NodeGroupStatus(in, out, s)
}
