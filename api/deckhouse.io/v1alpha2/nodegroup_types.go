package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Optional fields are pointers or omitempty so that a field absent from the
// stored object stays absent after a conversion.

// NodeType says how the nodes of a group are provisioned. Hybrid covers both
// CloudPermanent and CloudStatic of v1.
// +kubebuilder:validation:Enum=Cloud;Static;Hybrid
type NodeType string

const (
	NodeTypeCloud  NodeType = "Cloud"
	NodeTypeStatic NodeType = "Static"
	NodeTypeHybrid NodeType = "Hybrid"
)

// CRIType names the container runtime of a group.
// +kubebuilder:validation:Enum=Docker;Containerd;NotManaged
type CRIType string

const (
	CRITypeDocker     CRIType = "Docker"
	CRITypeContainerd CRIType = "Containerd"
	CRITypeNotManaged CRIType = "NotManaged"
)

// ApprovalMode says how node updates that disrupt workloads are approved.
// +kubebuilder:validation:Enum=Manual;Automatic;RollingUpdate
type ApprovalMode string

// NodeGroup describes a group of nodes sharing provisioning and configuration.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ng
// +kubebuilder:subresource:status
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
type NodeGroupSpec struct {
	// +required
	NodeType NodeType `json:"nodeType"`
	// +optional
	CRI *CRISpec `json:"cri,omitempty"`
	// +optional
	CloudInstances *CloudInstancesSpec `json:"cloudInstances,omitempty"`
	// +optional
	NodeTemplate *NodeTemplate `json:"nodeTemplate,omitempty"`
	// +optional
	Chaos *ChaosSpec `json:"chaos,omitempty"`
	// +optional
	OperatingSystem *OperatingSystemSpec `json:"operatingSystem,omitempty"`
	// +optional
	Disruptions *DisruptionsSpec `json:"disruptions,omitempty"`
	// +optional
	Kubelet *KubeletSpec `json:"kubelet,omitempty"`
}

// CRISpec configures the container runtime. Each runtime block may be set
// only with its type; a docker block an older conversion stored beside
// another type, or none, may stay while it is unchanged.
//
// +kubebuilder:validation:XValidation:rule="!has(self.containerd) || (has(self.type) && self.type == 'Containerd')",message="containerd may be set only when type is Containerd"
// +kubebuilder:validation:XValidation:rule="!has(self.docker) || (has(self.type) && self.type == 'Docker') || (oldSelf.hasValue() && has(oldSelf.value().docker) && oldSelf.value().docker == self.docker)",message="docker may be set only when type is Docker; a docker block stored without it by an older conversion may stay unchanged or be removed",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="!has(self.notManaged) || (has(self.type) && self.type == 'NotManaged')",message="notManaged may be set only when type is NotManaged"
type CRISpec struct {
	// +optional
	Type CRIType `json:"type,omitempty"`
	// +optional
	Containerd *ContainerdSpec `json:"containerd,omitempty"`
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

// CloudInstancesSpec configures machines ordered from the cloud provider.
type CloudInstancesSpec struct {
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
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+%?$`
	Standby *intstr.IntOrString `json:"standby,omitempty"`
	// +optional
	StandbyHolder *StandbyHolderSpec `json:"standbyHolder,omitempty"`
	// +required
	ClassReference ClassReference `json:"classReference"`
}

// StandbyHolderSpec configures the pods that keep standby nodes reserved.
type StandbyHolderSpec struct {
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
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]+[mh]{1}$`
	Period string `json:"period,omitempty"`
}

// OperatingSystemSpec holds operating system settings.
type OperatingSystemSpec struct {
	// +optional
	ManageKernel *bool `json:"manageKernel,omitempty"`
}

// DisruptionsSpec configures how disruptive updates are approved.
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
