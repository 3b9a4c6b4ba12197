package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Optional fields are pointers or omitempty so that a field absent from the
// stored object stays absent after a conversion: the API server applies the
// schema defaults only to absent fields.

// NodeType says how the nodes of a group are provisioned.
// +kubebuilder:validation:Enum=CloudEphemeral;CloudPermanent;CloudStatic;Static
type NodeType string

const (
	// NodeTypeCloudEphemeral nodes are ordered from the cloud provider on demand.
	NodeTypeCloudEphemeral NodeType = "CloudEphemeral"
	// NodeTypeCloudPermanent nodes are cloud machines listed in the provider
	// cluster configuration.
	NodeTypeCloudPermanent NodeType = "CloudPermanent"
	// NodeTypeCloudStatic nodes are cloud machines added by hand.
	NodeTypeCloudStatic NodeType = "CloudStatic"
	// NodeTypeStatic nodes are bare-metal or virtual machines outside a cloud.
	NodeTypeStatic NodeType = "Static"
)

// CRIType names the container runtime of a group.
// +kubebuilder:validation:Enum=Docker;Containerd;ContainerdV2;NotManaged
type CRIType string

const (
	CRITypeDocker       CRIType = "Docker"
	CRITypeContainerd   CRIType = "Containerd"
	CRITypeContainerdV2 CRIType = "ContainerdV2"
	CRITypeNotManaged   CRIType = "NotManaged"
)

// ApprovalMode says how node updates that disrupt workloads are approved.
// +kubebuilder:validation:Enum=Manual;Automatic;RollingUpdate
type ApprovalMode string

const (
	ApprovalModeManual        ApprovalMode = "Manual"
	ApprovalModeAutomatic     ApprovalMode = "Automatic"
	ApprovalModeRollingUpdate ApprovalMode = "RollingUpdate"
)

// ResourceReservationMode says how kubelet reserves resources for system daemons.
// +kubebuilder:validation:Enum=Off;Auto;Static
type ResourceReservationMode string

const (
	ResourceReservationModeOff    ResourceReservationMode = "Off"
	ResourceReservationModeAuto   ResourceReservationMode = "Auto"
	ResourceReservationModeStatic ResourceReservationMode = "Static"
)

// SwapBehavior is kubelet's memory swap behaviour.
// +kubebuilder:validation:Enum=NoSwap;LimitedSwap
type SwapBehavior string

const (
	SwapBehaviorNoSwap      SwapBehavior = "NoSwap"
	SwapBehaviorLimitedSwap SwapBehavior = "LimitedSwap"
)

// NodeGroup describes a group of nodes sharing provisioning and configuration.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ng
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.nodeType`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="UpToDate",type=integer,JSONPath=`.status.upToDate`
// +kubebuilder:printcolumn:name="Instances",type=integer,JSONPath=`.status.instances`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desired`
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.status.min`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.status.max`
// +kubebuilder:printcolumn:name="Standby",type=integer,JSONPath=`.status.standby`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditionSummary.statusMessage`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.deckhouse.synced`
// +kubebuilder:printcolumn:name="Observed",type=date,JSONPath=`.status.deckhouse.observed.lastTimestamp`,priority=1
// +kubebuilder:printcolumn:name="Processed",type=date,JSONPath=`.status.deckhouse.processed.lastTimestamp`,priority=1
// The node name label holds at most 63 characters and Deckhouse appends 21
// characters of hashes to the group name, which leaves 42.
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 42",message="metadata.name must be at most 42 characters long"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
type NodeGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeGroupSpec `json:"spec"`
	// +optional
	Status NodeGroupStatus `json:"status,omitzero"`
}

// NodeGroupList is a list of NodeGroups.
//
// +kubebuilder:object:root=true
type NodeGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeGroup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NodeGroup{}, &NodeGroupList{})
}

// NodeGroupSpec is the desired state of a NodeGroup.
//
// +kubebuilder:validation:XValidation:rule="self.nodeType != 'CloudEphemeral' || has(self.cloudInstances)",message="cloudInstances is required when nodeType is CloudEphemeral"
// +kubebuilder:validation:XValidation:rule="!(self.nodeType == 'CloudEphemeral' || self.nodeType == 'CloudPermanent') || !has(self.staticInstances)",message="staticInstances is forbidden when nodeType is CloudEphemeral or CloudPermanent"
// +kubebuilder:validation:XValidation:rule="!(self.nodeType == 'Static' || self.nodeType == 'CloudStatic') || !has(self.cloudInstances)",message="cloudInstances is forbidden when nodeType is Static or CloudStatic"
type NodeGroupSpec struct {
	// NodeType is how the group's nodes are provisioned.
	// +required
	NodeType NodeType `json:"nodeType"`
	// CRI configures the container runtime.
	// +optional
	CRI *CRISpec `json:"cri,omitempty"`
	// GPU configures GPU sharing on the group's nodes.
	// +optional
	GPU *GPUSpec `json:"gpu,omitempty"`
	// CloudInstances configures machines ordered from the cloud provider.
	// +optional
	CloudInstances *CloudInstancesSpec `json:"cloudInstances,omitempty"`
	// StaticInstances selects StaticInstance resources for the group.
	// +optional
	StaticInstances *StaticInstancesSpec `json:"staticInstances,omitempty"`
	// NodeTemplate is applied to every node of the group.
	// +optional
	NodeTemplate *NodeTemplate `json:"nodeTemplate,omitempty"`
	// Chaos periodically disrupts a node of the group.
	// +optional
	Chaos *ChaosSpec `json:"chaos,omitempty"`
	// OperatingSystem settings.
	// +optional
	OperatingSystem *OperatingSystemSpec `json:"operatingSystem,omitempty"`
	// Disruptions configures how disruptive updates are approved.
	// +optional
	Disruptions *DisruptionsSpec `json:"disruptions,omitempty"`
	// Kubelet configures the kubelet of the group's nodes.
	// +optional
	// +kubebuilder:default={}
	Kubelet *KubeletSpec `json:"kubelet,omitempty"`
	// Update limits how many nodes are updated at once.
	// +optional
	Update *UpdateSpec `json:"update,omitempty"`
	// Fencing restarts nodes that lost the API server.
	// +optional
	Fencing *FencingSpec `json:"fencing,omitempty"`
	// NodeDrainTimeoutSecond bounds the drain of a node, in seconds.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeDrainTimeoutSecond *int32 `json:"nodeDrainTimeoutSecond,omitempty"`
}

// CRISpec configures the container runtime. Each runtime block may be set
// only with its type; a docker block an older conversion stored beside
// another type, or none, may stay while it is unchanged.
//
// +kubebuilder:validation:XValidation:rule="!has(self.containerd) || (has(self.type) && self.type == 'Containerd')",message="containerd may be set only when type is Containerd"
// +kubebuilder:validation:XValidation:rule="!has(self.containerdV2) || (has(self.type) && self.type == 'ContainerdV2')",message="containerdV2 may be set only when type is ContainerdV2"
// +kubebuilder:validation:XValidation:rule="!has(self.docker) || (has(self.type) && self.type == 'Docker') || (oldSelf.hasValue() && has(oldSelf.value().docker) && oldSelf.value().docker == self.docker)",message="docker may be set only when type is Docker; a docker block stored without it by an older conversion may stay unchanged or be removed",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="!has(self.notManaged) || (has(self.type) && self.type == 'NotManaged')",message="notManaged may be set only when type is NotManaged"
type CRISpec struct {
	// +optional
	Type CRIType `json:"type,omitempty"`
	// +optional
	Containerd *ContainerdSpec `json:"containerd,omitempty"`
	// +optional
	ContainerdV2 *ContainerdSpec `json:"containerdV2,omitempty"`
	// Docker is deprecated.
	// +optional
	Docker *DockerSpec `json:"docker,omitempty"`
	// +optional
	NotManaged *NotManagedSpec `json:"notManaged,omitempty"`
}

// ContainerdSpec configures containerd.
type ContainerdSpec struct {
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxConcurrentDownloads *int32 `json:"maxConcurrentDownloads,omitempty"`
}

// DockerSpec configures Docker.
type DockerSpec struct {
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxConcurrentDownloads *int32 `json:"maxConcurrentDownloads,omitempty"`
	// +optional
	Manage *bool `json:"manage,omitempty"`
}

// NotManagedSpec points at a runtime Deckhouse does not manage.
type NotManagedSpec struct {
	// +optional
	CRISocketPath string `json:"criSocketPath,omitempty"`
}

// GPUSharing says how a GPU is shared between pods.
// +kubebuilder:validation:Enum=TimeSlicing;MIG;Exclusive
type GPUSharing string

// GPUSpec configures GPU sharing. Only the block of the chosen sharing may be set.
//
// +kubebuilder:validation:XValidation:rule="!has(self.timeSlicing) || self.sharing == 'TimeSlicing'",message="timeSlicing may be set only when sharing is TimeSlicing"
// +kubebuilder:validation:XValidation:rule="!has(self.mig) || self.sharing == 'MIG'",message="mig may be set only when sharing is MIG"
// +kubebuilder:validation:XValidation:rule="!has(self.exclusive) || self.sharing == 'Exclusive'",message="exclusive may be set only when sharing is Exclusive"
type GPUSpec struct {
	// +required
	Sharing GPUSharing `json:"sharing"`
	// +optional
	TimeSlicing *GPUTimeSlicing `json:"timeSlicing,omitempty"`
	// +optional
	MIG *GPUMIG `json:"mig,omitempty"`
	// +optional
	Exclusive *GPUExclusive `json:"exclusive,omitempty"`
}

// GPUTimeSlicing shares a GPU by time.
type GPUTimeSlicing struct {
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	PartitionCount *int32 `json:"partitionCount,omitempty"`
}

// GPUMIG partitions a GPU with Multi-Instance GPU.
type GPUMIG struct {
	// +optional
	// +kubebuilder:validation:Pattern=`^all-(balanced|disabled|[0-9]g[.][0-9]{1,2}gb([.]me)?)$`
	PartedConfig string `json:"partedConfig,omitempty"`
}

// GPUExclusive gives a whole GPU to one pod.
type GPUExclusive struct{}

// CloudInstancesSpec configures machines ordered from the cloud provider.
type CloudInstancesSpec struct {
	// Zones default to every zone of the region.
	// +optional
	Zones []string `json:"zones,omitempty"`
	// +required
	// +kubebuilder:validation:Minimum=0
	MinPerZone int32 `json:"minPerZone"`
	// +required
	// +kubebuilder:validation:Minimum=0
	MaxPerZone int32 `json:"maxPerZone"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxUnavailablePerZone *int32 `json:"maxUnavailablePerZone,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxSurgePerZone *int32 `json:"maxSurgePerZone,omitempty"`
	// Standby is a number of nodes or a percentage of the group size.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+%?$`
	Standby *intstr.IntOrString `json:"standby,omitempty"`
	// +optional
	StandbyHolder *StandbyHolderSpec `json:"standbyHolder,omitempty"`
	// +required
	ClassReference ClassReference `json:"classReference"`
	// Priority makes the autoscaler prefer groups with a higher value.
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// QuickShutdown is deprecated.
	// +optional
	QuickShutdown *bool `json:"quickShutdown,omitempty"`
}

// StandbyHolderSpec configures the pods that keep standby nodes reserved.
type StandbyHolderSpec struct {
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=80
	OverprovisioningRate *int32 `json:"overprovisioningRate,omitempty"`
	// NotHeldResources is deprecated.
	// +optional
	NotHeldResources *NotHeldResources `json:"notHeldResources,omitempty"`
}

// NotHeldResources are left free on a standby node.
type NotHeldResources struct {
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+m?$`
	CPU *intstr.IntOrString `json:"cpu,omitempty"`
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)?$`
	Memory *intstr.IntOrString `json:"memory,omitempty"`
}

// ClassReference names the instance class of the cloud provider.
type ClassReference struct {
	// +optional
	// +kubebuilder:validation:Enum=OpenStackInstanceClass;GCPInstanceClass;VsphereInstanceClass;AWSInstanceClass;YandexInstanceClass;AzureInstanceClass;VCDInstanceClass;ZvirtInstanceClass;DynamixInstanceClass;HuaweiCloudInstanceClass;DVPInstanceClass
	Kind string `json:"kind,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
}

// StaticInstancesSpec selects StaticInstance resources.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.labelSelector) || (has(self.labelSelector) && self.labelSelector == oldSelf.labelSelector)",message="spec.staticInstances.labelSelector can be added but cannot be modified once set. To change it, create a new NodeGroup."
type StaticInstancesSpec struct {
	// +optional
	LabelSelector *StaticInstancesLabelSelector `json:"labelSelector,omitempty"`
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	Count *int32 `json:"count,omitempty"`
}

// StaticInstancesLabelSelector is a label selector with the operators'
// value rules written into the schema.
//
// +structType=atomic
type StaticInstancesLabelSelector struct {
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorOperator is the operator of a label selector requirement.
// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
type LabelSelectorOperator string

// LabelSelectorRequirement is one requirement of a label selector.
//
// +kubebuilder:validation:XValidation:rule="(self.operator == 'Exists' || self.operator == 'DoesNotExist') ? !has(self.values) : (has(self.values) && size(self.values) > 0)",message="values must be empty for Exists and DoesNotExist and non-empty for In and NotIn"
type LabelSelectorRequirement struct {
	// +required
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// +required
	Operator LabelSelectorOperator `json:"operator"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`[a-z0-9]([-a-z0-9]*[a-z0-9])?`
	Values []string `json:"values,omitempty"`
}

// NodeTemplate is applied to every node of the group.
type NodeTemplate struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// +optional
	Taints []Taint `json:"taints,omitempty"`
}

// TaintEffect is the effect of a taint.
// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
type TaintEffect string

// Taint is put on every node of the group.
type Taint struct {
	// +optional
	Effect TaintEffect `json:"effect,omitempty"`
	// +optional
	Key string `json:"key,omitempty"`
	// +optional
	Value string `json:"value,omitempty"`
}

// ChaosMode turns chaos on or off.
// +kubebuilder:validation:Enum=Disabled;DrainAndDelete
type ChaosMode string

// ChaosSpec periodically drains and deletes a node of the group.
type ChaosSpec struct {
	// +optional
	Mode ChaosMode `json:"mode,omitempty"`
	// Period is how often a node is disrupted, e.g. 30m or 2h30m.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9]+h([0-9]+m)?|[0-9]+m)$`
	Period string `json:"period,omitempty"`
}

// OperatingSystemSpec holds operating system settings.
type OperatingSystemSpec struct {
	// ManageKernel is deprecated and has no effect.
	// +optional
	ManageKernel *bool `json:"manageKernel,omitempty"`
}

// DisruptionsSpec configures how disruptive updates are approved. Only the
// block of the chosen approval mode may be set.
//
// +kubebuilder:validation:XValidation:rule="!has(self.automatic) || self.approvalMode == 'Automatic'",message="automatic may be set only when approvalMode is Automatic"
// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate) || self.approvalMode == 'RollingUpdate'",message="rollingUpdate may be set only when approvalMode is RollingUpdate"
type DisruptionsSpec struct {
	// +required
	ApprovalMode ApprovalMode `json:"approvalMode"`
	// +optional
	Automatic *AutomaticDisruptions `json:"automatic,omitempty"`
	// +optional
	RollingUpdate *RollingUpdateDisruptions `json:"rollingUpdate,omitempty"`
}

// AutomaticDisruptions configures automatic approval.
type AutomaticDisruptions struct {
	// +optional
	DrainBeforeApproval *bool `json:"drainBeforeApproval,omitempty"`
	// +optional
	Windows []DisruptionWindow `json:"windows,omitempty"`
}

// RollingUpdateDisruptions configures rolling replacement of nodes.
type RollingUpdateDisruptions struct {
	// +optional
	Windows []DisruptionWindow `json:"windows,omitempty"`
}

// Weekday is a day of the week.
// +kubebuilder:validation:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// DisruptionWindow is a time of day (UTC) when disruptions are allowed.
type DisruptionWindow struct {
	// +required
	// +kubebuilder:validation:Pattern=`^(?:\d|[01]\d|2[0-3]):[0-5]\d$`
	From string `json:"from"`
	// +required
	// +kubebuilder:validation:Pattern=`^(?:\d|[01]\d|2[0-3]):[0-5]\d$`
	To string `json:"to"`
	// +optional
	Days []Weekday `json:"days,omitempty"`
}

// KubeletSpec configures kubelet.
type KubeletSpec struct {
	// MaxPods defaults to a value derived from the pod subnet of a node.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxPods *int32 `json:"maxPods,omitempty"`
	// +optional
	RootDir string `json:"rootDir,omitempty"`
	// +optional
	// +kubebuilder:default="50Mi"
	// +kubebuilder:validation:Pattern=`\d+[Ei|Pi|Ti|Gi|Mi|Ki|E|P|T|G|M|k|m]`
	ContainerLogMaxSize string `json:"containerLogMaxSize,omitempty"`
	// +optional
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	ContainerLogMaxFiles *int32 `json:"containerLogMaxFiles,omitempty"`
	// +optional
	SeccompDefault *bool `json:"seccompDefault,omitempty"`
	// +optional
	// +kubebuilder:default={}
	ResourceReservation *ResourceReservation `json:"resourceReservation,omitempty"`
	// +optional
	TopologyManager *TopologyManager `json:"topologyManager,omitempty"`
	// +optional
	MemorySwap *MemorySwap `json:"memorySwap,omitempty"`
}

// ResourceReservation reserves resources for system daemons.
//
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'Static' || has(self.static)",message="static is required when mode is Static"
type ResourceReservation struct {
	// +optional
	// +kubebuilder:default=Auto
	Mode ResourceReservationMode `json:"mode,omitempty"`
	// +optional
	Static *StaticResourceReservation `json:"static,omitempty"`
}

// StaticResourceReservation is a fixed reservation.
//
// +kubebuilder:validation:XValidation:rule="has(self.cpu) || has(self.memory) || has(self.ephemeralStorage)",message="at least one of cpu, memory and ephemeralStorage is required"
type StaticResourceReservation struct {
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`\d+[m]`
	CPU *intstr.IntOrString `json:"cpu,omitempty"`
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)?$`
	Memory *intstr.IntOrString `json:"memory,omitempty"`
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)?$`
	EphemeralStorage *intstr.IntOrString `json:"ephemeralStorage,omitempty"`
}

// TopologyManager configures kubelet's topology manager.
type TopologyManager struct {
	// +optional
	// +kubebuilder:default=false
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	// +kubebuilder:default=Container
	// +kubebuilder:validation:Enum=Container;Pod
	Scope string `json:"scope,omitempty"`
	// +optional
	// +kubebuilder:default=None
	// +kubebuilder:validation:Enum=None;BestEffort;Restricted;SingleNumaNode
	Policy string `json:"policy,omitempty"`
}

// MemorySwap configures swap for the group's nodes.
//
// +kubebuilder:validation:XValidation:rule="!has(self.swapBehavior) || self.swapBehavior != 'LimitedSwap' || has(self.limitedSwap)",message="limitedSwap is required when swapBehavior is LimitedSwap"
// +kubebuilder:validation:XValidation:rule="!has(self.swapBehavior) || self.swapBehavior != 'NoSwap' || !has(self.limitedSwap)",message="limitedSwap is forbidden when swapBehavior is NoSwap"
type MemorySwap struct {
	// +optional
	SwapBehavior SwapBehavior `json:"swapBehavior,omitempty"`
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Swappiness *int32 `json:"swappiness,omitempty"`
	// +optional
	LimitedSwap *LimitedSwap `json:"limitedSwap,omitempty"`
}

// LimitedSwap bounds the swap of a node.
type LimitedSwap struct {
	// +required
	// +kubebuilder:validation:Pattern=`^\d+G$`
	Size string `json:"size"`
}

// UpdateSpec limits concurrent node updates.
type UpdateSpec struct {
	// MaxConcurrent is a number of nodes or a percentage of the group.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[1-9][0-9]*%?$`
	MaxConcurrent *intstr.IntOrString `json:"maxConcurrent,omitempty"`
}

// FencingMode is how a node is fenced.
// +kubebuilder:validation:Enum=Watchdog
type FencingMode string

// FencingSpec restarts nodes that lost contact with the API server.
type FencingSpec struct {
	// +required
	Mode FencingMode `json:"mode"`
	// +optional
	Watchdog *WatchdogSpec `json:"watchdog,omitempty"`
}

// WatchdogSpec configures the watchdog.
type WatchdogSpec struct {
	// +optional
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:Pattern=`^[0-9]+[smh]{1}$`
	Timeout string `json:"timeout,omitempty"`
}

// NodeGroupStatus is the observed state of a NodeGroup.
type NodeGroupStatus struct {
	// +optional
	Ready *int32 `json:"ready,omitempty"`
	// +optional
	Nodes *int32 `json:"nodes,omitempty"`
	// +optional
	Instances *int32 `json:"instances,omitempty"`
	// +optional
	Desired *int32 `json:"desired,omitempty"`
	// +optional
	Min *int32 `json:"min,omitempty"`
	// +optional
	Max *int32 `json:"max,omitempty"`
	// +optional
	UpToDate *int32 `json:"upToDate,omitempty"`
	// +optional
	Standby *int32 `json:"standby,omitempty"`
	// +optional
	Error string `json:"error,omitempty"`
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// +optional
	LastMachineFailures []MachineFailure `json:"lastMachineFailures,omitempty"`
	// +optional
	ConditionSummary *ConditionSummary `json:"conditionSummary,omitempty"`
	// +optional
	// +kubebuilder:validation:Enum=None;MCM;CAPI
	Engine string `json:"engine,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []NodeGroupCondition `json:"conditions,omitempty"`
	// +optional
	Deckhouse *DeckhouseStatus `json:"deckhouse,omitempty"`
}

// MachineFailure is a recent failure of a machine of the group.
type MachineFailure struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// +optional
	OwnerRef string `json:"ownerRef,omitempty"`
	// +optional
	LastOperation *MachineOperation `json:"lastOperation,omitempty"`
}

// MachineOperation is the last operation on a machine.
type MachineOperation struct {
	// +optional
	Description string `json:"description,omitempty"`
	// +optional
	LastUpdateTime string `json:"lastUpdateTime,omitempty"`
	// +optional
	State string `json:"state,omitempty"`
	// +optional
	Type string `json:"type,omitempty"`
}

// ConditionSummary sums up the group's conditions.
type ConditionSummary struct {
	// +optional
	StatusMessage string `json:"statusMessage,omitempty"`
	// +optional
	// +kubebuilder:validation:Enum="True";"False"
	Ready string `json:"ready,omitempty"`
}

// NodeGroupCondition is one condition of the group. Timestamps are kept as
// written: a conversion must not reformat them.
type NodeGroupCondition struct {
	// +required
	Type string `json:"type"`
	// +required
	Status string `json:"status"`
	// +optional
	// +kubebuilder:validation:Format=date-time
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// DeckhouseStatus is Deckhouse's bookkeeping for the group.
type DeckhouseStatus struct {
	// +optional
	Synced string `json:"synced,omitempty"`
	// +optional
	Observed *DeckhouseCheckpoint `json:"observed,omitempty"`
	// +optional
	Processed *DeckhouseCheckpoint `json:"processed,omitempty"`
}

// DeckhouseCheckpoint records when Deckhouse saw a version of the group.
type DeckhouseCheckpoint struct {
	// +optional
	// +kubebuilder:validation:Format=date-time
	LastTimestamp string `json:"lastTimestamp,omitempty"`
	// +optional
	CheckSum string `json:"checkSum,omitempty"`
}
