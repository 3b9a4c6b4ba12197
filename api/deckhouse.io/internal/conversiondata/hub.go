package conversiondata

import v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"

// HubSection is the section key of data a v1 object had that an older
// version cannot hold.
const HubSection = "v1"

// HubData is what a v1 NodeGroup holds that an older version cannot. Its
// shape mirrors the v1 paths so that the annotation reads like a partial
// v1 object. Both older versions share it, each filling what it lacks.
type HubData struct {
	Spec   HubSpec   `json:"spec,omitzero"`
	Status HubStatus `json:"status,omitzero"`
}

// HubSpec holds spec fields of v1 only.
type HubSpec struct {
	// NodeType is the exact type behind Hybrid.
	NodeType               v1.NodeType             `json:"nodeType,omitempty"`
	CRI                    HubCRI                  `json:"cri,omitzero"`
	GPU                    *v1.GPUSpec             `json:"gpu,omitempty"`
	StaticInstances        *v1.StaticInstancesSpec `json:"staticInstances,omitempty"`
	Update                 *v1.UpdateSpec          `json:"update,omitempty"`
	Fencing                *v1.FencingSpec         `json:"fencing,omitempty"`
	NodeDrainTimeoutSecond *int32                  `json:"nodeDrainTimeoutSecond,omitempty"`
	Chaos                  HubChaos                `json:"chaos,omitzero"`
	CloudInstances         HubCloudInstances       `json:"cloudInstances,omitzero"`
	Kubelet                HubKubelet              `json:"kubelet,omitzero"`
}

// HubCRI holds runtime settings an older version lacks.
type HubCRI struct {
	// Type is set when the older version shows a different type.
	Type         v1.CRIType         `json:"type,omitempty"`
	ContainerdV2 *v1.ContainerdSpec `json:"containerdV2,omitempty"`
	// NotManaged is lost by v1alpha1 only.
	NotManaged *v1.NotManagedSpec `json:"notManaged,omitempty"`
}

// HubChaos holds a chaos period only the v1 pattern accepts, such as 2h30m.
type HubChaos struct {
	Period string `json:"period,omitempty"`
}

// HubCloudInstances holds cloud instance settings of v1 only.
type HubCloudInstances struct {
	Priority      *int32           `json:"priority,omitempty"`
	QuickShutdown *bool            `json:"quickShutdown,omitempty"`
	StandbyHolder HubStandbyHolder `json:"standbyHolder,omitzero"`
}

// HubStandbyHolder holds standby holder settings of v1 only.
type HubStandbyHolder struct {
	OverprovisioningRate *int32 `json:"overprovisioningRate,omitempty"`
}

// HubKubelet holds kubelet settings of v1 only.
type HubKubelet struct {
	ResourceReservation *v1.ResourceReservation `json:"resourceReservation,omitempty"`
	TopologyManager     *v1.TopologyManager     `json:"topologyManager,omitempty"`
	MemorySwap          *v1.MemorySwap          `json:"memorySwap,omitempty"`
}

// HubStatus holds status fields of v1 only.
type HubStatus struct {
	Conditions []v1.NodeGroupCondition `json:"conditions,omitempty"`
	Deckhouse  *v1.DeckhouseStatus     `json:"deckhouse,omitempty"`
}
