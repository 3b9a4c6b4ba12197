package v1alpha1

import (
	"context"

	apiconversion "k8s.io/apimachinery/pkg/conversion"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/conversiondata"
	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// The field copies live in zz_generated.conversion.go (conversion-gen), what
// both older versions do alike in internal/conversiondata. This file holds
// what this version alone does: spec.docker, cri.notManaged, which it lacks,
// and the fields v1 lacks, which ride in the conversion data.

// section is the conversion-data section of what a v1alpha1 object holds
// that v1 cannot.
const section = "v1alpha1"

// alpha1Data is what a v1alpha1 NodeGroup holds that v1 cannot.
type alpha1Data struct {
	KubernetesVersion string      `json:"kubernetesVersion,omitempty"`
	Static            *StaticSpec `json:"static,omitempty"`
	// EmptyCRI records an empty spec.cri next to spec.docker: v1 keeps
	// both in spec.cri, which would otherwise come back as no spec.cri.
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
	if err := data.FinishToHub(ctx, src, string(src.Spec.NodeType), string(criType), dst); err != nil {
		return err
	}

	own := alpha1Data{
		KubernetesVersion: in.Spec.KubernetesVersion,
		Static:            in.Spec.Static,
		EmptyCRI:          in.Spec.CRI != nil && in.Spec.Docker != nil && criEmpty(in.Spec.CRI),
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
	var period string
	if dst.Spec.Chaos != nil {
		period = dst.Spec.Chaos.Period
	}
	return conversiondata.SaveFromHub(in, period, true).Finish(dst, sections)
}

func criEmpty(c *CRISpec) bool {
	return c.Type == "" && c.Containerd == nil
}

// Convert_v1alpha1_NodeGroupSpec_To_v1_NodeGroupSpec moves the top-level
// spec.docker into spec.cri. KubernetesVersion and Static, which v1 lacks,
// go to the conversion data, and ConvertToHub resolves Hybrid.
func Convert_v1alpha1_NodeGroupSpec_To_v1_NodeGroupSpec(in *NodeGroupSpec, out *v1.NodeGroupSpec, s apiconversion.Scope) error {
	if err := autoConvert_v1alpha1_NodeGroupSpec_To_v1_NodeGroupSpec(in, out, s); err != nil {
		return err
	}
	if in.NodeType == NodeTypeCloud {
		out.NodeType = v1.NodeTypeCloudEphemeral
	}
	if in.Docker != nil {
		if out.CRI == nil {
			out.CRI = &v1.CRISpec{}
		}
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
