package v1alpha1

import (
	"fmt"
	"regexp"

	apiconversion "k8s.io/apimachinery/pkg/conversion"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/conversiondata"
	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// The field copies live in zz_generated.conversion.go (conversion-gen). This
// file holds what differs from v1: the node type, spec.docker, the runtime
// types this version lacks, the chaos period pattern, and the conversion
// data that carries what one side cannot hold.

var (
	// chaosPeriod is the period pattern of this version's schema.
	chaosPeriod = regexp.MustCompile(`^[0-9]+[mh]{1}$`)
	// hubChaosPeriod is the wider v1 pattern, which also accepts 2h30m.
	hubChaosPeriod = regexp.MustCompile(`^([0-9]+h([0-9]+m)?|[0-9]+m)$`)
)

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

// ConvertTo converts to the hub without knowing the provider cluster
// configuration: a Hybrid group other than master becomes CloudStatic unless
// its annotations say otherwise. The conversion webhook calls ConvertToHub.
func (src *NodeGroup) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*v1.NodeGroup)
	if !ok {
		return fmt.Errorf("convert NodeGroup to hub type %T: want *v1.NodeGroup", dstRaw)
	}
	return src.ConvertToHub(dst, v1.MasterOnly{})
}

// ConvertToHub converts to v1, asking lookup whether a Hybrid group is
// CloudPermanent when neither the conversion data nor the annotations tell,
// and restoring what a v1 object held that this version cannot.
func (src *NodeGroup) ConvertToHub(dst *v1.NodeGroup, lookup v1.CloudPermanentLookup) error {
	sections, err := conversiondata.Read(src, v1.ConversionDataAnnotation)
	if err != nil {
		return err
	}
	var data conversiondata.HubData
	if _, err := sections.Take(conversiondata.HubSection, &data); err != nil {
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
	if dst.Spec.NodeType, err = nodeTypeToHub(src, data.Spec.NodeType, lookup); err != nil {
		return err
	}
	data.Restore(dst)
	if c := dst.Spec.CRI; c != nil {
		var shown CRIType
		if src.Spec.CRI != nil {
			shown = src.Spec.CRI.Type
		}
		// The saved settings belong to the saved type: they come back
		// only while this version still shows that type.
		if saved := data.Spec.CRI; saved != (conversiondata.HubCRI{}) && criTypeFromHub(saved.Type) == shown {
			c.Type, c.ContainerdV2, c.NotManaged = saved.Type, saved.ContainerdV2, saved.NotManaged
		}
	}
	if c := dst.Spec.Chaos; c != nil && c.Period == "" && data.Spec.Chaos.Period != "" {
		c.Period = data.Spec.Chaos.Period
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

// ConvertFrom converts from v1, keeping in the conversion-data annotation
// what this version cannot hold.
func (dst *NodeGroup) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*v1.NodeGroup)
	if !ok {
		return fmt.Errorf("convert NodeGroup from hub type %T: want *v1.NodeGroup", srcRaw)
	}
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

	var data conversiondata.HubData
	data.Save(in)
	if t := in.Spec.NodeType; t == v1.NodeTypeCloudPermanent || t == v1.NodeTypeCloudStatic {
		data.Spec.NodeType = t // the exact type behind Hybrid
	}
	if c := in.Spec.CRI; c != nil {
		saved := &data.Spec.CRI
		saved.ContainerdV2, saved.NotManaged = c.ContainerdV2, c.NotManaged
		if saved.ContainerdV2 != nil || saved.NotManaged != nil || string(criTypeFromHub(c.Type)) != string(c.Type) {
			saved.Type = c.Type
		}
	}
	if c := in.Spec.Chaos; c != nil && dst.Spec.Chaos.Period != c.Period {
		data.Spec.Chaos.Period = c.Period
	}
	if sections, err = conversiondata.Put(sections, conversiondata.HubSection, &data); err != nil {
		return err
	}
	return conversiondata.Write(dst, v1.ConversionDataAnnotation, sections)
}

func nodeTypeToHub(src *NodeGroup, saved v1.NodeType, lookup v1.CloudPermanentLookup) (v1.NodeType, error) {
	// The saved type is what is stored; it wins while this version still
	// shows the type it was converted to, so a read-modify-write through
	// this version cannot flip CloudStatic to CloudPermanent or back.
	if saved != "" && nodeTypeFromHub(saved) == src.Spec.NodeType {
		return saved, nil
	}
	switch src.Spec.NodeType {
	case NodeTypeCloud:
		return v1.NodeTypeCloudEphemeral, nil
	case NodeTypeHybrid:
		return v1.HybridNodeType(src, lookup)
	}
	return v1.NodeType(src.Spec.NodeType), nil
}

func nodeTypeFromHub(t v1.NodeType) NodeType {
	switch t {
	case v1.NodeTypeCloudEphemeral:
		return NodeTypeCloud
	case v1.NodeTypeCloudPermanent, v1.NodeTypeCloudStatic:
		return NodeTypeHybrid
	}
	return NodeType(t)
}

// criTypeFromHub shows ContainerdV2, which this version's enum lacks, as
// the nearest type it has.
func criTypeFromHub(t v1.CRIType) CRIType {
	if t == v1.CRITypeContainerdV2 {
		return CRITypeContainerd
	}
	return CRIType(t)
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
// has are saved by ConvertFrom.
func Convert_v1_NodeGroupSpec_To_v1alpha1_NodeGroupSpec(in *v1.NodeGroupSpec, out *NodeGroupSpec, s apiconversion.Scope) error {
	if err := autoConvert_v1_NodeGroupSpec_To_v1alpha1_NodeGroupSpec(in, out, s); err != nil {
		return err
	}
	out.NodeType = nodeTypeFromHub(in.NodeType)
	if in.CRI != nil && in.CRI.Docker != nil {
		out.Docker = &DockerSpec{}
		return Convert_v1_DockerSpec_To_v1alpha1_DockerSpec(in.CRI.Docker, out.Docker, s)
	}
	return nil
}

// Convert_v1_CRISpec_To_v1alpha1_CRISpec shows ContainerdV2 as Containerd.
// Docker moves up to spec.docker; ContainerdV2 and NotManaged are saved by
// ConvertFrom.
func Convert_v1_CRISpec_To_v1alpha1_CRISpec(in *v1.CRISpec, out *CRISpec, s apiconversion.Scope) error {
	if err := autoConvert_v1_CRISpec_To_v1alpha1_CRISpec(in, out, s); err != nil {
		return err
	}
	out.Type = criTypeFromHub(in.Type)
	return nil
}

// Convert_v1_ChaosSpec_To_v1alpha1_ChaosSpec leaves out a period this
// version's pattern rejects, so that the object can be written back through
// this version; ConvertFrom saves the period.
func Convert_v1_ChaosSpec_To_v1alpha1_ChaosSpec(in *v1.ChaosSpec, out *ChaosSpec, s apiconversion.Scope) error {
	if err := autoConvert_v1_ChaosSpec_To_v1alpha1_ChaosSpec(in, out, s); err != nil {
		return err
	}
	if hubChaosPeriod.MatchString(in.Period) && !chaosPeriod.MatchString(in.Period) {
		out.Period = ""
	}
	return nil
}

// Convert_v1_CloudInstancesSpec_To_v1alpha1_CloudInstancesSpec drops
// Priority and QuickShutdown, which ConvertFrom saves.
func Convert_v1_CloudInstancesSpec_To_v1alpha1_CloudInstancesSpec(in *v1.CloudInstancesSpec, out *CloudInstancesSpec, s apiconversion.Scope) error {
	return autoConvert_v1_CloudInstancesSpec_To_v1alpha1_CloudInstancesSpec(in, out, s)
}

// Convert_v1_StandbyHolderSpec_To_v1alpha1_StandbyHolderSpec drops
// OverprovisioningRate, which ConvertFrom saves.
func Convert_v1_StandbyHolderSpec_To_v1alpha1_StandbyHolderSpec(in *v1.StandbyHolderSpec, out *StandbyHolderSpec, s apiconversion.Scope) error {
	return autoConvert_v1_StandbyHolderSpec_To_v1alpha1_StandbyHolderSpec(in, out, s)
}

// Convert_v1_KubeletSpec_To_v1alpha1_KubeletSpec drops ResourceReservation,
// TopologyManager and MemorySwap, which ConvertFrom saves.
func Convert_v1_KubeletSpec_To_v1alpha1_KubeletSpec(in *v1.KubeletSpec, out *KubeletSpec, s apiconversion.Scope) error {
	return autoConvert_v1_KubeletSpec_To_v1alpha1_KubeletSpec(in, out, s)
}

// Convert_v1_NodeGroupStatus_To_v1alpha1_NodeGroupStatus drops Conditions
// and Deckhouse, which ConvertFrom saves.
func Convert_v1_NodeGroupStatus_To_v1alpha1_NodeGroupStatus(in *v1.NodeGroupStatus, out *NodeGroupStatus, s apiconversion.Scope) error {
	return autoConvert_v1_NodeGroupStatus_To_v1alpha1_NodeGroupStatus(in, out, s)
}
