package v1alpha2

import (
	"fmt"
	"maps"
	"regexp"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/conversiondata"
	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

var (
	// chaosPeriod is the period pattern of this version's schema.
	chaosPeriod = regexp.MustCompile(`^[0-9]+[mh]{1}$`)
	// hubChaosPeriod is the wider v1 pattern, which also accepts 2h30m.
	hubChaosPeriod = regexp.MustCompile(`^([0-9]+h([0-9]+m)?|[0-9]+m)$`)
)

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

	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	nodeType, err := nodeTypeToHub(src, data.Spec.NodeType, lookup)
	if err != nil {
		return err
	}
	in := &src.Spec
	dst.Spec = v1.NodeGroupSpec{
		NodeType:               nodeType,
		CRI:                    criToHub(in.CRI, data.Spec.CRI),
		GPU:                    data.Spec.GPU,
		CloudInstances:         cloudInstancesToHub(in.CloudInstances, data.Spec.CloudInstances),
		StaticInstances:        data.Spec.StaticInstances,
		NodeTemplate:           nodeTemplateToHub(in.NodeTemplate),
		Chaos:                  chaosToHub(in.Chaos, data.Spec.Chaos),
		OperatingSystem:        operatingSystemToHub(in.OperatingSystem),
		Disruptions:            disruptionsToHub(in.Disruptions),
		Kubelet:                kubeletToHub(in.Kubelet, data.Spec.Kubelet),
		Update:                 data.Spec.Update,
		Fencing:                data.Spec.Fencing,
		NodeDrainTimeoutSecond: data.Spec.NodeDrainTimeoutSecond,
	}
	dst.Status = statusToHub(&src.Status, data.Status)
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
	var data conversiondata.HubData

	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	in := &src.Spec
	dst.Spec = NodeGroupSpec{
		NodeType:        nodeTypeFromHub(in.NodeType, &data.Spec),
		CRI:             criFromHub(in.CRI, &data.Spec.CRI),
		CloudInstances:  cloudInstancesFromHub(in.CloudInstances, &data.Spec.CloudInstances),
		NodeTemplate:    nodeTemplateFromHub(in.NodeTemplate),
		Chaos:           chaosFromHub(in.Chaos, &data.Spec.Chaos),
		OperatingSystem: operatingSystemFromHub(in.OperatingSystem),
		Disruptions:     disruptionsFromHub(in.Disruptions),
		Kubelet:         kubeletFromHub(in.Kubelet, &data.Spec.Kubelet),
	}
	data.Spec.GPU = in.GPU.DeepCopy()
	data.Spec.StaticInstances = in.StaticInstances.DeepCopy()
	data.Spec.Update = in.Update.DeepCopy()
	data.Spec.Fencing = in.Fencing.DeepCopy()
	data.Spec.NodeDrainTimeoutSecond = clone(in.NodeDrainTimeoutSecond)
	dst.Status = statusFromHub(&src.Status, &data.Status)

	if sections, err = conversiondata.Put(sections, conversiondata.HubSection, &data); err != nil {
		return err
	}
	return conversiondata.Write(dst, v1.ConversionDataAnnotation, sections)
}

func nodeTypeToHub(src *NodeGroup, saved v1.NodeType, lookup v1.CloudPermanentLookup) (v1.NodeType, error) {
	// The saved type is what is stored; it wins while this version still
	// shows the type it was converted to, so a read-modify-write through
	// this version cannot flip CloudStatic to CloudPermanent or back.
	if saved != "" && nodeTypeFromHub(saved, nil) == src.Spec.NodeType {
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

// nodeTypeFromHub maps a v1 type; saved, when given, records the exact type
// behind Hybrid.
func nodeTypeFromHub(t v1.NodeType, saved *conversiondata.HubSpec) NodeType {
	switch t {
	case v1.NodeTypeCloudEphemeral:
		return NodeTypeCloud
	case v1.NodeTypeCloudPermanent, v1.NodeTypeCloudStatic:
		if saved != nil {
			saved.NodeType = t
		}
		return NodeTypeHybrid
	}
	return NodeType(t)
}

func criToHub(in *CRISpec, saved conversiondata.HubCRI) *v1.CRISpec {
	if in == nil {
		return nil
	}
	out := &v1.CRISpec{
		Type:       v1.CRIType(in.Type),
		Containerd: containerdToHub(in.Containerd),
		Docker:     dockerToHub(in.Docker),
		NotManaged: notManagedToHub(in.NotManaged),
	}
	// The saved settings belong to the saved type: they come back only
	// while this version still shows that type.
	if saved != (conversiondata.HubCRI{}) && criTypeFromHub(saved.Type) == in.Type {
		out.Type = saved.Type
		out.ContainerdV2 = saved.ContainerdV2
	}
	return out
}

func criFromHub(in *v1.CRISpec, saved *conversiondata.HubCRI) *CRISpec {
	if in == nil {
		return nil
	}
	out := &CRISpec{
		Type:       criTypeFromHub(in.Type),
		Containerd: containerdFromHub(in.Containerd),
		Docker:     dockerFromHub(in.Docker),
		NotManaged: notManagedFromHub(in.NotManaged),
	}
	saved.ContainerdV2 = in.ContainerdV2.DeepCopy()
	if saved.ContainerdV2 != nil || string(out.Type) != string(in.Type) {
		saved.Type = in.Type
	}
	return out
}

// criTypeFromHub shows ContainerdV2, which this version's enum lacks, as
// the nearest type it has.
func criTypeFromHub(t v1.CRIType) CRIType {
	if t == v1.CRITypeContainerdV2 {
		return CRITypeContainerd
	}
	return CRIType(t)
}

func containerdToHub(in *ContainerdSpec) *v1.ContainerdSpec {
	if in == nil {
		return nil
	}
	return &v1.ContainerdSpec{MaxConcurrentDownloads: clone(in.MaxConcurrentDownloads)}
}

func containerdFromHub(in *v1.ContainerdSpec) *ContainerdSpec {
	if in == nil {
		return nil
	}
	return &ContainerdSpec{MaxConcurrentDownloads: clone(in.MaxConcurrentDownloads)}
}

func dockerToHub(in *DockerSpec) *v1.DockerSpec {
	if in == nil {
		return nil
	}
	return &v1.DockerSpec{MaxConcurrentDownloads: clone(in.MaxConcurrentDownloads), Manage: clone(in.Manage)}
}

func dockerFromHub(in *v1.DockerSpec) *DockerSpec {
	if in == nil {
		return nil
	}
	return &DockerSpec{MaxConcurrentDownloads: clone(in.MaxConcurrentDownloads), Manage: clone(in.Manage)}
}

func notManagedToHub(in *NotManagedSpec) *v1.NotManagedSpec {
	if in == nil {
		return nil
	}
	return &v1.NotManagedSpec{CRISocketPath: in.CRISocketPath}
}

func notManagedFromHub(in *v1.NotManagedSpec) *NotManagedSpec {
	if in == nil {
		return nil
	}
	return &NotManagedSpec{CRISocketPath: in.CRISocketPath}
}

func cloudInstancesToHub(in *CloudInstancesSpec, saved conversiondata.HubCloudInstances) *v1.CloudInstancesSpec {
	if in == nil {
		return nil
	}
	out := &v1.CloudInstancesSpec{
		Zones:                 slices.Clone(in.Zones),
		MinPerZone:            in.MinPerZone,
		MaxPerZone:            in.MaxPerZone,
		MaxUnavailablePerZone: clone(in.MaxUnavailablePerZone),
		MaxSurgePerZone:       clone(in.MaxSurgePerZone),
		Standby:               clone(in.Standby),
		ClassReference:        v1.ClassReference{Kind: in.ClassReference.Kind, Name: in.ClassReference.Name},
		Priority:              saved.Priority,
		QuickShutdown:         saved.QuickShutdown,
	}
	if h := in.StandbyHolder; h != nil {
		out.StandbyHolder = &v1.StandbyHolderSpec{
			OverprovisioningRate: saved.StandbyHolder.OverprovisioningRate,
			NotHeldResources:     notHeldResourcesToHub(h.NotHeldResources),
		}
	}
	return out
}

func cloudInstancesFromHub(in *v1.CloudInstancesSpec, saved *conversiondata.HubCloudInstances) *CloudInstancesSpec {
	if in == nil {
		return nil
	}
	out := &CloudInstancesSpec{
		Zones:                 slices.Clone(in.Zones),
		MinPerZone:            in.MinPerZone,
		MaxPerZone:            in.MaxPerZone,
		MaxUnavailablePerZone: clone(in.MaxUnavailablePerZone),
		MaxSurgePerZone:       clone(in.MaxSurgePerZone),
		Standby:               clone(in.Standby),
		ClassReference:        ClassReference{Kind: in.ClassReference.Kind, Name: in.ClassReference.Name},
	}
	saved.Priority = clone(in.Priority)
	saved.QuickShutdown = clone(in.QuickShutdown)
	if h := in.StandbyHolder; h != nil {
		out.StandbyHolder = &StandbyHolderSpec{NotHeldResources: notHeldResourcesFromHub(h.NotHeldResources)}
		saved.StandbyHolder.OverprovisioningRate = clone(h.OverprovisioningRate)
	}
	return out
}

func notHeldResourcesToHub(in *NotHeldResources) *v1.NotHeldResources {
	if in == nil {
		return nil
	}
	return &v1.NotHeldResources{CPU: clone(in.CPU), Memory: clone(in.Memory)}
}

func notHeldResourcesFromHub(in *v1.NotHeldResources) *NotHeldResources {
	if in == nil {
		return nil
	}
	return &NotHeldResources{CPU: clone(in.CPU), Memory: clone(in.Memory)}
}

func nodeTemplateToHub(in *NodeTemplate) *v1.NodeTemplate {
	if in == nil {
		return nil
	}
	out := &v1.NodeTemplate{Labels: maps.Clone(in.Labels), Annotations: maps.Clone(in.Annotations)}
	if in.Taints != nil {
		out.Taints = make([]v1.Taint, len(in.Taints))
		for i, t := range in.Taints {
			out.Taints[i] = v1.Taint{Effect: v1.TaintEffect(t.Effect), Key: t.Key, Value: t.Value}
		}
	}
	return out
}

func nodeTemplateFromHub(in *v1.NodeTemplate) *NodeTemplate {
	if in == nil {
		return nil
	}
	out := &NodeTemplate{Labels: maps.Clone(in.Labels), Annotations: maps.Clone(in.Annotations)}
	if in.Taints != nil {
		out.Taints = make([]Taint, len(in.Taints))
		for i, t := range in.Taints {
			out.Taints[i] = Taint{Effect: TaintEffect(t.Effect), Key: t.Key, Value: t.Value}
		}
	}
	return out
}

func chaosToHub(in *ChaosSpec, saved conversiondata.HubChaos) *v1.ChaosSpec {
	if in == nil {
		return nil
	}
	out := &v1.ChaosSpec{Mode: v1.ChaosMode(in.Mode), Period: in.Period}
	if saved.Period != "" && in.Period == "" {
		out.Period = saved.Period
	}
	return out
}

// chaosFromHub leaves out a period this version's pattern rejects, so that
// the object can be written back through this version; the period is saved.
func chaosFromHub(in *v1.ChaosSpec, saved *conversiondata.HubChaos) *ChaosSpec {
	if in == nil {
		return nil
	}
	out := &ChaosSpec{Mode: ChaosMode(in.Mode), Period: in.Period}
	if hubChaosPeriod.MatchString(in.Period) && !chaosPeriod.MatchString(in.Period) {
		out.Period = ""
		saved.Period = in.Period
	}
	return out
}

func operatingSystemToHub(in *OperatingSystemSpec) *v1.OperatingSystemSpec {
	if in == nil {
		return nil
	}
	return &v1.OperatingSystemSpec{ManageKernel: clone(in.ManageKernel)}
}

func operatingSystemFromHub(in *v1.OperatingSystemSpec) *OperatingSystemSpec {
	if in == nil {
		return nil
	}
	return &OperatingSystemSpec{ManageKernel: clone(in.ManageKernel)}
}

func disruptionsToHub(in *DisruptionsSpec) *v1.DisruptionsSpec {
	if in == nil {
		return nil
	}
	out := &v1.DisruptionsSpec{ApprovalMode: v1.ApprovalMode(in.ApprovalMode)}
	if a := in.Automatic; a != nil {
		out.Automatic = &v1.AutomaticDisruptions{DrainBeforeApproval: clone(a.DrainBeforeApproval), Windows: windowsToHub(a.Windows)}
	}
	if r := in.RollingUpdate; r != nil {
		out.RollingUpdate = &v1.RollingUpdateDisruptions{Windows: windowsToHub(r.Windows)}
	}
	return out
}

func disruptionsFromHub(in *v1.DisruptionsSpec) *DisruptionsSpec {
	if in == nil {
		return nil
	}
	out := &DisruptionsSpec{ApprovalMode: ApprovalMode(in.ApprovalMode)}
	if a := in.Automatic; a != nil {
		out.Automatic = &AutomaticDisruptions{DrainBeforeApproval: clone(a.DrainBeforeApproval), Windows: windowsFromHub(a.Windows)}
	}
	if r := in.RollingUpdate; r != nil {
		out.RollingUpdate = &RollingUpdateDisruptions{Windows: windowsFromHub(r.Windows)}
	}
	return out
}

func windowsToHub(in []DisruptionWindow) []v1.DisruptionWindow {
	if in == nil {
		return nil
	}
	out := make([]v1.DisruptionWindow, len(in))
	for i, w := range in {
		out[i] = v1.DisruptionWindow{From: w.From, To: w.To}
		if w.Days != nil {
			out[i].Days = make([]v1.Weekday, len(w.Days))
			for j, d := range w.Days {
				out[i].Days[j] = v1.Weekday(d)
			}
		}
	}
	return out
}

func windowsFromHub(in []v1.DisruptionWindow) []DisruptionWindow {
	if in == nil {
		return nil
	}
	out := make([]DisruptionWindow, len(in))
	for i, w := range in {
		out[i] = DisruptionWindow{From: w.From, To: w.To}
		if w.Days != nil {
			out[i].Days = make([]Weekday, len(w.Days))
			for j, d := range w.Days {
				out[i].Days[j] = Weekday(d)
			}
		}
	}
	return out
}

func kubeletToHub(in *KubeletSpec, saved conversiondata.HubKubelet) *v1.KubeletSpec {
	if in == nil {
		return nil
	}
	return &v1.KubeletSpec{
		MaxPods:              clone(in.MaxPods),
		RootDir:              in.RootDir,
		ContainerLogMaxSize:  in.ContainerLogMaxSize,
		ContainerLogMaxFiles: clone(in.ContainerLogMaxFiles),
		SeccompDefault:       clone(in.SeccompDefault),
		ResourceReservation:  saved.ResourceReservation,
		TopologyManager:      saved.TopologyManager,
		MemorySwap:           saved.MemorySwap,
	}
}

func kubeletFromHub(in *v1.KubeletSpec, saved *conversiondata.HubKubelet) *KubeletSpec {
	if in == nil {
		return nil
	}
	saved.ResourceReservation = in.ResourceReservation.DeepCopy()
	saved.TopologyManager = in.TopologyManager.DeepCopy()
	saved.MemorySwap = in.MemorySwap.DeepCopy()
	return &KubeletSpec{
		MaxPods:              clone(in.MaxPods),
		RootDir:              in.RootDir,
		ContainerLogMaxSize:  in.ContainerLogMaxSize,
		ContainerLogMaxFiles: clone(in.ContainerLogMaxFiles),
		SeccompDefault:       clone(in.SeccompDefault),
	}
}

func statusToHub(in *NodeGroupStatus, saved conversiondata.HubStatus) v1.NodeGroupStatus {
	out := v1.NodeGroupStatus{
		Ready:             clone(in.Ready),
		Nodes:             clone(in.Nodes),
		Instances:         clone(in.Instances),
		Desired:           clone(in.Desired),
		Min:               clone(in.Min),
		Max:               clone(in.Max),
		UpToDate:          clone(in.UpToDate),
		Standby:           clone(in.Standby),
		Error:             in.Error,
		KubernetesVersion: in.KubernetesVersion,
		Engine:            in.Engine,
		Conditions:        saved.Conditions,
		Deckhouse:         saved.Deckhouse,
	}
	if in.LastMachineFailures != nil {
		out.LastMachineFailures = make([]v1.MachineFailure, len(in.LastMachineFailures))
		for i, f := range in.LastMachineFailures {
			out.LastMachineFailures[i] = v1.MachineFailure{Name: f.Name, ProviderID: f.ProviderID, OwnerRef: f.OwnerRef}
			if op := f.LastOperation; op != nil {
				out.LastMachineFailures[i].LastOperation = &v1.MachineOperation{
					Description: op.Description, LastUpdateTime: op.LastUpdateTime, State: op.State, Type: op.Type,
				}
			}
		}
	}
	if s := in.ConditionSummary; s != nil {
		out.ConditionSummary = &v1.ConditionSummary{StatusMessage: s.StatusMessage, Ready: s.Ready}
	}
	return out
}

func statusFromHub(in *v1.NodeGroupStatus, saved *conversiondata.HubStatus) NodeGroupStatus {
	out := NodeGroupStatus{
		Ready:             clone(in.Ready),
		Nodes:             clone(in.Nodes),
		Instances:         clone(in.Instances),
		Desired:           clone(in.Desired),
		Min:               clone(in.Min),
		Max:               clone(in.Max),
		UpToDate:          clone(in.UpToDate),
		Standby:           clone(in.Standby),
		Error:             in.Error,
		KubernetesVersion: in.KubernetesVersion,
		Engine:            in.Engine,
	}
	if in.LastMachineFailures != nil {
		out.LastMachineFailures = make([]MachineFailure, len(in.LastMachineFailures))
		for i, f := range in.LastMachineFailures {
			out.LastMachineFailures[i] = MachineFailure{Name: f.Name, ProviderID: f.ProviderID, OwnerRef: f.OwnerRef}
			if op := f.LastOperation; op != nil {
				out.LastMachineFailures[i].LastOperation = &MachineOperation{
					Description: op.Description, LastUpdateTime: op.LastUpdateTime, State: op.State, Type: op.Type,
				}
			}
		}
	}
	if s := in.ConditionSummary; s != nil {
		out.ConditionSummary = &ConditionSummary{StatusMessage: s.StatusMessage, Ready: s.Ready}
	}
	saved.Conditions = slices.Clone(in.Conditions)
	saved.Deckhouse = in.Deckhouse.DeepCopy()
	return out
}

// clone copies the value behind a pointer so that the converted object
// shares no memory with its source.
func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
