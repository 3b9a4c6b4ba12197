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
	// Docker, saved by v1alpha1 only, is a cri.docker stored beside a
	// type other than Docker by an older conversion; v1alpha1 shows it as
	// spec.docker, and it goes back into spec.cri while unchanged.
	Docker *v1.DockerSpec `json:"docker,omitempty"`
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

// Save records the fields of hub that neither older version has. The node
// type, the runtime settings and the chaos period depend on what each
// version can show, so the versions save those themselves. The saved
// values share memory with hub: Put encodes them at once.
func (d *HubData) Save(hub *v1.NodeGroup) {
	in, out := &hub.Spec, &d.Spec
	out.GPU = in.GPU
	out.StaticInstances = in.StaticInstances
	out.Update = in.Update
	out.Fencing = in.Fencing
	out.NodeDrainTimeoutSecond = in.NodeDrainTimeoutSecond
	if ci := in.CloudInstances; ci != nil {
		out.CloudInstances.Priority = ci.Priority
		out.CloudInstances.QuickShutdown = ci.QuickShutdown
		if h := ci.StandbyHolder; h != nil {
			out.CloudInstances.StandbyHolder.OverprovisioningRate = h.OverprovisioningRate
		}
	}
	if k := in.Kubelet; k != nil {
		out.Kubelet.ResourceReservation = k.ResourceReservation
		out.Kubelet.TopologyManager = k.TopologyManager
		out.Kubelet.MemorySwap = k.MemorySwap
	}
	d.Status.Conditions = hub.Status.Conditions
	d.Status.Deckhouse = hub.Status.Deckhouse
}

// Restore puts back into hub, just converted from an older version, what
// Save recorded: the fields only v1 has, where their parent exists.
func (d *HubData) Restore(hub *v1.NodeGroup) {
	in, out := &d.Spec, &hub.Spec
	out.GPU = in.GPU
	out.StaticInstances = in.StaticInstances
	out.Update = in.Update
	out.Fencing = in.Fencing
	out.NodeDrainTimeoutSecond = in.NodeDrainTimeoutSecond
	if ci := out.CloudInstances; ci != nil {
		ci.Priority = in.CloudInstances.Priority
		ci.QuickShutdown = in.CloudInstances.QuickShutdown
		if h := ci.StandbyHolder; h != nil {
			h.OverprovisioningRate = in.CloudInstances.StandbyHolder.OverprovisioningRate
		}
	}
	if k := out.Kubelet; k != nil {
		k.ResourceReservation = in.Kubelet.ResourceReservation
		k.TopologyManager = in.Kubelet.TopologyManager
		k.MemorySwap = in.Kubelet.MemorySwap
	}
	hub.Status.Conditions = d.Status.Conditions
	hub.Status.Deckhouse = d.Status.Deckhouse
}
