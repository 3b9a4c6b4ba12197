package v1alpha2

import (
	"context"

	apiconversion "k8s.io/apimachinery/pkg/conversion"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/conversiondata"
	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// The field copies live in zz_generated.conversion.go (conversion-gen), what
// both older versions do alike in internal/conversiondata. This file holds
// what this version alone does: nothing beyond the shared steps, which it
// wires to its own types.

// ConvertToHub converts to v1, restoring what a v1 object held that this
// version cannot. A Hybrid group that neither the conversion data nor its
// annotations place is looked up in the v1.CloudPermanentLookup ctx carries.
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
	if err := Convert_v1alpha2_NodeGroupSpec_To_v1_NodeGroupSpec(&in.Spec, &dst.Spec, nil); err != nil {
		return err
	}
	if err := Convert_v1alpha2_NodeGroupStatus_To_v1_NodeGroupStatus(&in.Status, &dst.Status, nil); err != nil {
		return err
	}
	var criType CRIType
	if src.Spec.CRI != nil {
		criType = src.Spec.CRI.Type
	}
	if err := data.FinishToHub(ctx, src, string(src.Spec.NodeType), string(criType), dst); err != nil {
		return err
	}
	return conversiondata.Write(dst, v1.ConversionDataAnnotation, sections)
}

// ConvertFromHub converts from v1, keeping in the conversion-data
// annotation what this version cannot hold. It never needs the cluster.
func (dst *NodeGroup) ConvertFromHub(src *v1.NodeGroup) error {
	sections, err := conversiondata.Read(src, v1.ConversionDataAnnotation)
	if err != nil {
		return err
	}
	// Converted from a copy: see ConvertToHub.
	in := &v1.NodeGroup{}
	src.Spec.DeepCopyInto(&in.Spec)
	src.Status.DeepCopyInto(&in.Status)
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec, dst.Status = NodeGroupSpec{}, NodeGroupStatus{}
	if err := Convert_v1_NodeGroupSpec_To_v1alpha2_NodeGroupSpec(&in.Spec, &dst.Spec, nil); err != nil {
		return err
	}
	if err := Convert_v1_NodeGroupStatus_To_v1alpha2_NodeGroupStatus(&in.Status, &dst.Status, nil); err != nil {
		return err
	}
	var period string
	if dst.Spec.Chaos != nil {
		period = dst.Spec.Chaos.Period
	}
	return conversiondata.SaveFromHub(in, period, false).Finish(dst, sections)
}

// Convert_v1alpha2_NodeGroupSpec_To_v1_NodeGroupSpec maps Cloud; ConvertToHub
// resolves Hybrid.
func Convert_v1alpha2_NodeGroupSpec_To_v1_NodeGroupSpec(in *NodeGroupSpec, out *v1.NodeGroupSpec, s apiconversion.Scope) error {
	if err := autoConvert_v1alpha2_NodeGroupSpec_To_v1_NodeGroupSpec(in, out, s); err != nil {
		return err
	}
	if in.NodeType == NodeTypeCloud {
		out.NodeType = v1.NodeTypeCloudEphemeral
	}
	return nil
}

// Convert_v1_NodeGroupSpec_To_v1alpha2_NodeGroupSpec maps the node type.
// The fields v1 alone has are saved by ConvertFromHub.
func Convert_v1_NodeGroupSpec_To_v1alpha2_NodeGroupSpec(in *v1.NodeGroupSpec, out *NodeGroupSpec, s apiconversion.Scope) error {
	if err := autoConvert_v1_NodeGroupSpec_To_v1alpha2_NodeGroupSpec(in, out, s); err != nil {
		return err
	}
	out.NodeType = conversiondata.NodeTypeFromHub[NodeType](in.NodeType)
	return nil
}

// Convert_v1_CRISpec_To_v1alpha2_CRISpec shows ContainerdV2 as Containerd;
// ConvertFromHub saves the ContainerdV2 settings.
func Convert_v1_CRISpec_To_v1alpha2_CRISpec(in *v1.CRISpec, out *CRISpec, s apiconversion.Scope) error {
	if err := autoConvert_v1_CRISpec_To_v1alpha2_CRISpec(in, out, s); err != nil {
		return err
	}
	out.Type = conversiondata.CRITypeFromHub[CRIType](in.Type)
	return nil
}

// Convert_v1_ChaosSpec_To_v1alpha2_ChaosSpec leaves out a period this
// version's pattern rejects, so that the object can be written back through
// this version; ConvertFromHub saves the period.
func Convert_v1_ChaosSpec_To_v1alpha2_ChaosSpec(in *v1.ChaosSpec, out *ChaosSpec, s apiconversion.Scope) error {
	if err := autoConvert_v1_ChaosSpec_To_v1alpha2_ChaosSpec(in, out, s); err != nil {
		return err
	}
	out.Period = conversiondata.ChaosPeriodFromHub(in.Period)
	return nil
}

// Convert_v1_CloudInstancesSpec_To_v1alpha2_CloudInstancesSpec drops
// Priority and QuickShutdown, which ConvertFromHub saves.
func Convert_v1_CloudInstancesSpec_To_v1alpha2_CloudInstancesSpec(in *v1.CloudInstancesSpec, out *CloudInstancesSpec, s apiconversion.Scope) error {
	return autoConvert_v1_CloudInstancesSpec_To_v1alpha2_CloudInstancesSpec(in, out, s)
}

// Convert_v1_StandbyHolderSpec_To_v1alpha2_StandbyHolderSpec drops
// OverprovisioningRate, which ConvertFromHub saves.
func Convert_v1_StandbyHolderSpec_To_v1alpha2_StandbyHolderSpec(in *v1.StandbyHolderSpec, out *StandbyHolderSpec, s apiconversion.Scope) error {
	return autoConvert_v1_StandbyHolderSpec_To_v1alpha2_StandbyHolderSpec(in, out, s)
}

// Convert_v1_KubeletSpec_To_v1alpha2_KubeletSpec drops ResourceReservation,
// TopologyManager and MemorySwap, which ConvertFromHub saves.
func Convert_v1_KubeletSpec_To_v1alpha2_KubeletSpec(in *v1.KubeletSpec, out *KubeletSpec, s apiconversion.Scope) error {
	return autoConvert_v1_KubeletSpec_To_v1alpha2_KubeletSpec(in, out, s)
}

// Convert_v1_NodeGroupStatus_To_v1alpha2_NodeGroupStatus drops Conditions
// and Deckhouse, which ConvertFromHub saves.
func Convert_v1_NodeGroupStatus_To_v1alpha2_NodeGroupStatus(in *v1.NodeGroupStatus, out *NodeGroupStatus, s apiconversion.Scope) error {
	return autoConvert_v1_NodeGroupStatus_To_v1alpha2_NodeGroupStatus(in, out, s)
}
