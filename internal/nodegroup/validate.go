package nodegroup

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// Messages clients match on keep Deckhouse's wording, "longer then"
// included. Only texts that were broken upstream are changed: check 12 was
// not valid JSON and not a sentence, check 13 listed nodes on separate
// lines (invalid JSON), and the check 14 hint named a label nobody sets.
const (
	msgNameTooLong          = "it is forbidden for this cluster to set (cluster prefix + node group name) longer then 42 symbols"
	msgMaxLowerThanMin      = "it is forbidden to set maxPerZone lower than minPerZone for NodeGroup"
	msgUnknownZone          = "unknown zone %q"
	msgDockerForbidden      = "it is forbidden to set cri type to Docker"
	msgMasterCRIDisruptive  = "it is disruptive to change cri.type in master node group for cluster with apiserver endpoints < 3"
	msgTaintsNotTolerated   = "it is forbidden to create a NodeGroup resource with taints not specified in global.modules.placement.customTolerationKeys in Deckhouse ConfigMap, add:%s to customTolerationKeys."
	msgContainerdWithoutCRI = `it is forbidden to create NodeGroup resource with set .spec.cri.containerd and without .spec.cri.type="Containerd"`
	msgRollingUpdate        = `it is forbidden to change NodeGroup resource with set .spec.disruptions.approvalMode to "RollingUpdate" when spec.nodeType is not "CloudEphemeral"`
	msgNodeTypeImmutable    = ".spec.nodeType field is immutable"
	msgDuplicateTaints      = ".spec.nodeTemplate.taints must contains only one taint with the same key and effect"
	msgTopologyWithoutRR    = ".spec.kubelet.resourceReservation must be enabled for .spec.kubelet.topologyManager.enabled to work"
	msgTopologyStaticCPU    = `.spec.kubelet.resourceReservation.static.cpu must be specified when .spec.kubelet.topologyManager.enabled is true and .spec.kubelet.resourceReservation.mode is "Static"`
	msgCustomContainerd     = "CRI cannot be changed because some nodes are using custom configuration: %s"
	msgContainerdV2         = `It is forbidden for NodeGroup %q to use CRI ContainerdV2 because it contains nodes that do not support ContainerdV2. You can list them with: kubectl get node -l node.deckhouse.io/containerd-v2-unsupported,node.deckhouse.io/group=%s`
	msgMaxPods              = ".spec.kubelet.maxPods (%d) is too high: each pod may need 2 IPs (one terminating + one starting), but only %d IPs available in podSubnetNodeCIDRPrefix /%d"
	msgMemorySwapCgroupV1   = "memorySwap requires cgroup v2, but NodeGroup %q contains nodes where cgroup v2 is not supported"
	msgConversionData       = "the annotation is written by Gatehouse's conversion and must be a JSON object: %v"
)

// alwaysToleratedTaintKeys need no entry in customTolerationKeys: Deckhouse
// tolerates them itself.
var alwaysToleratedTaintKeys = []string{
	"dedicated",
	"dedicated.deckhouse.io",
	"node-role.kubernetes.io/control-plane",
	"node-role.kubernetes.io/master",
	"node.deckhouse.io/etcd-arbiter",
}

// ClusterState is what the checks need to know about the cluster. The
// module fills it from its caches; tests write it out.
type ClusterState struct {
	// ClusterType is "Cloud" or "Static", from cluster-configuration.yaml.
	ClusterType string
	// ClusterPrefix is cloud.prefix of a Cloud cluster.
	ClusterPrefix string
	// DefaultCRI is the runtime of groups without cri.type; empty means Containerd.
	DefaultCRI string
	// PodSubnetNodeCIDRPrefix is the size of a node's pod subnet; 0 means 24.
	PodSubnetNodeCIDRPrefix int
	// Zones are the provider's zones; empty turns the zone check off.
	Zones []string
	// APIServerEndpoints counts the addresses of Endpoints default/kubernetes.
	APIServerEndpoints int
	// CustomTolerationKeys are the taint keys ModuleConfig global tolerates.
	CustomTolerationKeys []string
	// NodesWithCustomContainerd maps a group name to its nodes labelled with
	// a custom containerd configuration.
	NodesWithCustomContainerd map[string][]string
	// NodesWithoutContainerdV2 maps a group name to its nodes labelled
	// node.deckhouse.io/containerd-v2-unsupported.
	NodesWithoutContainerdV2 map[string][]string
}

// Request is one admission request in hub terms.
type Request struct {
	Operation admissionv1.Operation
	// ClientVersion is the API version the client wrote, such as
	// deckhouse.io/v1alpha1; Old and New are always v1.
	ClientVersion string
	Old, New      *v1.NodeGroup
}

// Validate runs every check on req and returns all denials and warnings.
// Warnings never stop later checks.
func Validate(req Request, state ClusterState) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	ng := req.New
	spec := &ng.Spec
	specPath := field.NewPath("spec")
	update := req.Operation == admissionv1.Update && req.Old != nil

	// 1. Deckhouse names cloud machines <prefix>-<group>-<21 characters of
	// hashes>, and a node name label holds 63.
	if req.Operation == admissionv1.Create && state.ClusterType == "Cloud" && len(state.ClusterPrefix)+len(ng.Name) > 41 {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"), msgNameTooLong))
	}

	if ci := spec.CloudInstances; ci != nil {
		path := specPath.Child("cloudInstances")
		// 2.
		if ci.MaxPerZone < ci.MinPerZone {
			errs = append(errs, field.Invalid(path.Child("maxPerZone"), ci.MaxPerZone, msgMaxLowerThanMin))
		}
		// 3.
		if len(state.Zones) > 0 {
			for i, zone := range ci.Zones {
				if !slices.Contains(state.Zones, zone) {
					errs = append(errs, field.Invalid(path.Child("zones").Index(i), zone, fmt.Sprintf(msgUnknownZone, zone)))
				}
			}
		}
	}

	criPath := specPath.Child("cri")
	// 4.
	if spec.CRI != nil && spec.CRI.Type == v1.CRITypeDocker {
		errs = append(errs, field.Forbidden(criPath.Child("type"), msgDockerForbidden))
	}

	// 5.
	if ng.Name == v1.MasterNodeGroup && state.APIServerEndpoints < 3 &&
		effectiveCRI(req.Old, state.DefaultCRI) != effectiveCRI(ng, state.DefaultCRI) {
		warnings = append(warnings, msgMasterCRIDisruptive)
	}

	var taints []v1.Taint
	if spec.NodeTemplate != nil {
		taints = spec.NodeTemplate.Taints
	}
	taintsPath := specPath.Child("nodeTemplate", "taints")
	// 6.
	if missing := untoleratedTaintKeys(taints, state.CustomTolerationKeys); len(missing) > 0 {
		errs = append(errs, field.Forbidden(taintsPath, fmt.Sprintf(msgTaintsNotTolerated, " "+strings.Join(missing, " "))))
	}

	// 7. Only v1alpha1 lacks the schema rule that ties cri.containerd to
	// its type, so only a v1alpha1 client can get this far with it.
	if req.ClientVersion == "deckhouse.io/v1alpha1" && spec.CRI != nil && spec.CRI.Containerd != nil && spec.CRI.Type != v1.CRITypeContainerd {
		errs = append(errs, field.Forbidden(criPath.Child("containerd"), msgContainerdWithoutCRI))
	}

	// 8. Compared in v1 terms, so Cloud of the older versions counts as
	// CloudEphemeral; the shell hook compared the literal text and refused it.
	if d := spec.Disruptions; d != nil && d.ApprovalMode == v1.ApprovalModeRollingUpdate && spec.NodeType != v1.NodeTypeCloudEphemeral {
		errs = append(errs, field.Forbidden(specPath.Child("disruptions", "approvalMode"), msgRollingUpdate))
	}

	// 9.
	if update && req.Old.Spec.NodeType != spec.NodeType {
		errs = append(errs, field.Forbidden(specPath.Child("nodeType"), msgNodeTypeImmutable))
	}

	// 10.
	if i, dup := duplicateTaint(taints); dup {
		errs = append(errs, field.Invalid(taintsPath.Index(i), taints[i].Key, msgDuplicateTaints))
	}

	if k := spec.Kubelet; k != nil && k.TopologyManager != nil && k.TopologyManager.Enabled != nil && *k.TopologyManager.Enabled {
		kubeletPath := specPath.Child("kubelet")
		mode := v1.ResourceReservationModeAuto
		var static *v1.StaticResourceReservation
		if rr := k.ResourceReservation; rr != nil {
			if rr.Mode != "" {
				mode = rr.Mode
			}
			static = rr.Static
		}
		switch {
		// 11.
		case mode == v1.ResourceReservationModeOff:
			errs = append(errs, field.Forbidden(kubeletPath.Child("resourceReservation", "mode"), msgTopologyWithoutRR))
		// 12.
		case mode == v1.ResourceReservationModeStatic && (static == nil || static.CPU == nil):
			errs = append(errs, field.Required(kubeletPath.Child("resourceReservation", "static", "cpu"), msgTopologyStaticCPU))
		}
	}

	if update {
		// 13. Compared as the runtime the nodes run, so spelling out the
		// default type is not a change.
		if nodes := state.NodesWithCustomContainerd[ng.Name]; len(nodes) > 0 &&
			effectiveCRI(req.Old, state.DefaultCRI) != effectiveCRI(ng, state.DefaultCRI) {
			errs = append(errs, field.Forbidden(criPath.Child("type"), fmt.Sprintf(msgCustomContainerd, strings.Join(sorted(nodes), ", "))))
		}
		unsupported := state.NodesWithoutContainerdV2[ng.Name]
		// 14.
		if len(unsupported) > 0 && spec.CRI != nil && spec.CRI.Type == v1.CRITypeContainerdV2 {
			errs = append(errs, field.Forbidden(criPath.Child("type"), fmt.Sprintf(msgContainerdV2, ng.Name, ng.Name)))
		}
		// 16.
		if k := spec.Kubelet; len(unsupported) > 0 && k != nil && k.MemorySwap != nil && k.MemorySwap.SwapBehavior == v1.SwapBehaviorLimitedSwap {
			errs = append(errs, field.Forbidden(specPath.Child("kubelet", "memorySwap", "swapBehavior"), fmt.Sprintf(msgMemorySwapCgroupV1, ng.Name)))
		}
	}

	// 15.
	if k := spec.Kubelet; k != nil && k.MaxPods != nil {
		prefix := state.PodSubnetNodeCIDRPrefix
		if prefix == 0 {
			prefix = defaultPodSubnetNodeCIDRPrefix
		}
		available := int64(1)<<(32-prefix) - 3
		if 2*int64(*k.MaxPods) > available {
			warnings = append(warnings, fmt.Sprintf(msgMaxPods, *k.MaxPods, available, prefix))
		}
	}

	// Not a Deckhouse check: a v1 client could store an annotation that no
	// later conversion to an older version could read, breaking every LIST
	// through that version.
	if raw, ok := ng.Annotations[v1.ConversionDataAnnotation]; ok {
		var sections map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &sections); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(v1.ConversionDataAnnotation), raw, fmt.Sprintf(msgConversionData, err)))
		}
	}
	return errs, warnings
}

// effectiveCRI is the runtime a group runs: its cri.type, else the
// cluster's defaultCRI, else Containerd. A nil group (no old object on
// CREATE) runs the default.
func effectiveCRI(ng *v1.NodeGroup, defaultCRI string) string {
	if ng != nil && ng.Spec.CRI != nil && ng.Spec.CRI.Type != "" {
		return string(ng.Spec.CRI.Type)
	}
	if defaultCRI != "" {
		return defaultCRI
	}
	return string(v1.CRITypeContainerd)
}

// untoleratedTaintKeys lists, once each and in order, the taint keys
// Deckhouse components would not tolerate.
func untoleratedTaintKeys(taints []v1.Taint, custom []string) []string {
	var missing []string
	for _, t := range taints {
		if slices.Contains(alwaysToleratedTaintKeys, t.Key) || slices.Contains(custom, t.Key) || slices.Contains(missing, t.Key) {
			continue
		}
		missing = append(missing, t.Key)
	}
	return missing
}

// duplicateTaint returns the index of the first taint repeating the key and
// effect of an earlier one.
func duplicateTaint(taints []v1.Taint) (int, bool) {
	type keyEffect struct {
		key    string
		effect v1.TaintEffect
	}
	seen := make(map[keyEffect]bool, len(taints))
	for i, t := range taints {
		k := keyEffect{t.Key, t.Effect}
		if seen[k] {
			return i, true
		}
		seen[k] = true
	}
	return 0, false
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// denialMessage joins the denials' texts, one per line, so that each keeps
// the exact wording a client may match on.
func denialMessage(errs field.ErrorList) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Detail
	}
	return strings.Join(lines, "\n")
}
