package nodegroup

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha2"
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
	msgConversionDataSpoke  = "the annotation is written by Gatehouse's conversion: with it, the group cannot be read as %s: %v; remove the annotation or restore its %s section"
	// Deckhouse's Go port's wording, "or removed" included.
	msgStaticSelector = ".spec.staticInstances.labelSelector can be added but cannot be modified or removed once set. To change it, create a new NodeGroup"
	// The v1 schema rule's wording, which this check carries to the older
	// versions.
	msgDockerWithoutType = "docker may be set only when type is Docker; a docker block stored without it by an older conversion may stay unchanged or be removed"
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
	// NodesWithCustomContainerd are the group's nodes labelled with a
	// custom containerd configuration. A state is the state of the one
	// group a request names.
	NodesWithCustomContainerd []string
	// NodesWithoutContainerdV2 are the group's nodes labelled
	// node.deckhouse.io/containerd-v2-unsupported.
	NodesWithoutContainerdV2 []string
}

// Request is one admission request in hub terms.
type Request struct {
	Operation admissionv1.Operation
	// ClientVersion is the API version the client wrote, such as
	// deckhouse.io/v1alpha1; Old and New are always v1.
	ClientVersion string
	Old, New      *v1.NodeGroup
}

// Validate runs every check on req and returns all denials and warnings,
// in Deckhouse's order of checks (checks). Warnings never stop later checks.
func Validate(req Request, state ClusterState) (field.ErrorList, []string) {
	in := checkInput{req: req, state: state, ng: req.New}
	if req.Operation == admissionv1.Update {
		in.old = req.Old
	}
	if in.ng.Spec.NodeTemplate != nil {
		in.taints = in.ng.Spec.NodeTemplate.Taints
	}
	var errs field.ErrorList
	var warnings []string
	for _, c := range checks {
		e, w := c.run(in)
		errs = append(errs, e...)
		warnings = append(warnings, w...)
	}
	return errs, warnings
}

// checkInput is what every check reads: the request, the cluster's state,
// the group as written, its previous version (UPDATE only, else nil) and
// its taints.
type checkInput struct {
	req     Request
	state   ClusterState
	old, ng *v1.NodeGroup
	taints  []v1.Taint
}

// check is one rule of the NodeGroup webhook.
type check struct {
	// name is the rule's name in code and tests.
	name string
	// deckhouse is its number in Deckhouse's node-manager webhook
	// (docs/nodegroup.md lists them); 0 for a rule of Gatehouse's own.
	deckhouse int
	run       func(in checkInput) (field.ErrorList, []string)
}

// denies adapts a check that only denies.
func denies(f func(in checkInput) field.ErrorList) func(checkInput) (field.ErrorList, []string) {
	return func(in checkInput) (field.ErrorList, []string) { return f(in), nil }
}

// warns adapts a check that only warns.
func warns(f func(in checkInput) []string) func(checkInput) (field.ErrorList, []string) {
	return func(in checkInput) (field.ErrorList, []string) { return nil, f(in) }
}

// checks are the rules in Deckhouse's order, which is also the order of the
// reasons in a denial; Gatehouse's own rules sit where they read the same
// fields. TestChecksFollowDeckhousesOrder keeps the numbers ascending.
var checks = []check{
	{"nameLength", 1, denies(func(in checkInput) field.ErrorList {
		if in.req.Operation != admissionv1.Create {
			return nil
		}
		return validateNameLength(in.ng.Name, in.state.ClusterType, in.state.ClusterPrefix)
	})},
	{"maxPerZone", 2, denies(func(in checkInput) field.ErrorList { return validateMaxPerZone(in.ng.Spec.CloudInstances) })},
	{"knownZones", 3, denies(func(in checkInput) field.ErrorList {
		return validateZones(in.ng.Spec.CloudInstances, in.state.Zones)
	})},
	{"noDocker", 4, denies(func(in checkInput) field.ErrorList { return validateCRIType(in.ng.Spec.CRI) })},
	{"masterCRIChange", 5, warns(func(in checkInput) []string {
		return warnMasterCRIChange(in.old, in.ng, in.state.DefaultCRI, in.state.APIServerEndpoints)
	})},
	{"toleratedTaintKeys", 6, denies(func(in checkInput) field.ErrorList {
		return validateTaintKeys(in.taints, in.state.CustomTolerationKeys)
	})},
	{"containerdBlock", 7, denies(func(in checkInput) field.ErrorList {
		return validateContainerdBlock(in.req.ClientVersion, in.ng.Spec.CRI)
	})},
	{"rollingUpdateApproval", 8, denies(func(in checkInput) field.ErrorList {
		return validateApprovalMode(in.ng.Spec.Disruptions, in.ng.Spec.NodeType)
	})},
	{"nodeTypeImmutable", 9, denies(func(in checkInput) field.ErrorList { return validateNodeTypeImmutable(in.old, in.ng) })},
	{"staticInstancesSelector", 0, denies(func(in checkInput) field.ErrorList {
		return validateStaticInstancesSelector(in.old, in.ng)
	})},
	{"dockerBlock", 0, denies(func(in checkInput) field.ErrorList { return validateDockerBlock(in.old, in.ng) })},
	{"uniqueTaints", 10, denies(func(in checkInput) field.ErrorList { return validateUniqueTaints(in.taints) })},
	// Deckhouse's checks 11 and 12 read the same two fields: one rule.
	{"topologyManager", 11, denies(func(in checkInput) field.ErrorList { return validateTopologyManager(in.ng.Spec.Kubelet) })},
	{"criChangeOnCustomContainerd", 13, denies(func(in checkInput) field.ErrorList {
		if in.old == nil {
			return nil
		}
		return validateCRIChangeOnCustomContainerd(in.old, in.ng, in.state.DefaultCRI, in.state.NodesWithCustomContainerd)
	})},
	{"containerdV2Nodes", 14, denies(func(in checkInput) field.ErrorList {
		if in.old == nil {
			return nil
		}
		return validateContainerdV2Nodes(in.ng.Name, in.ng.Spec.CRI, in.state.NodesWithoutContainerdV2)
	})},
	{"maxPods", 15, warns(func(in checkInput) []string {
		return warnMaxPods(in.ng.Spec.Kubelet, in.state.PodSubnetNodeCIDRPrefix)
	})},
	{"memorySwap", 16, denies(func(in checkInput) field.ErrorList {
		if in.old == nil {
			return nil
		}
		return validateMemorySwap(in.ng.Name, in.ng.Spec.Kubelet, in.state.NodesWithoutContainerdV2)
	})},
	{"conversionData", 0, denies(func(in checkInput) field.ErrorList { return validateConversionData(in.old, in.ng) })},
}

var (
	specPath    = field.NewPath("spec")
	cloudPath   = specPath.Child("cloudInstances")
	criPath     = specPath.Child("cri")
	taintsPath  = specPath.Child("nodeTemplate", "taints")
	kubeletPath = specPath.Child("kubelet")
)

// validateNameLength is check 1, on CREATE only: Deckhouse names cloud
// machines <prefix>-<group>-<21 characters of hashes>, and a node name
// label holds 63.
func validateNameLength(name, clusterType, prefix string) field.ErrorList {
	if clusterType == "Cloud" && len(prefix)+len(name) > 41 {
		return field.ErrorList{field.Forbidden(field.NewPath("metadata", "name"), msgNameTooLong)}
	}
	return nil
}

// validateMaxPerZone is check 2.
func validateMaxPerZone(ci *v1.CloudInstancesSpec) field.ErrorList {
	if ci != nil && ci.MaxPerZone < ci.MinPerZone {
		return field.ErrorList{field.Invalid(cloudPath.Child("maxPerZone"), ci.MaxPerZone, msgMaxLowerThanMin)}
	}
	return nil
}

// validateZones is check 3: every zone must be one of the provider's; no
// known zones turns the check off.
func validateZones(ci *v1.CloudInstancesSpec, known []string) field.ErrorList {
	if ci == nil || len(known) == 0 {
		return nil
	}
	var errs field.ErrorList
	for i, zone := range ci.Zones {
		if !slices.Contains(known, zone) {
			errs = append(errs, field.Invalid(cloudPath.Child("zones").Index(i), zone, fmt.Sprintf(msgUnknownZone, zone)))
		}
	}
	return errs
}

// validateCRIType is check 4.
func validateCRIType(cri *v1.CRISpec) field.ErrorList {
	if cri != nil && cri.Type == v1.CRITypeDocker {
		return field.ErrorList{field.Forbidden(criPath.Child("type"), msgDockerForbidden)}
	}
	return nil
}

// warnMasterCRIChange is check 5, a warning: switching master's runtime
// restarts its control-plane components, which fewer than three API
// server endpoints cannot ride out. old is nil on CREATE.
func warnMasterCRIChange(old, ng *v1.NodeGroup, defaultCRI string, endpoints int) []string {
	if ng.Name == v1.MasterNodeGroup && endpoints < 3 && effectiveCRI(old, defaultCRI) != effectiveCRI(ng, defaultCRI) {
		return []string{msgMasterCRIDisruptive}
	}
	return nil
}

// validateTaintKeys is check 6.
func validateTaintKeys(taints []v1.Taint, custom []string) field.ErrorList {
	if missing := untoleratedTaintKeys(taints, custom); len(missing) > 0 {
		return field.ErrorList{field.Forbidden(taintsPath, fmt.Sprintf(msgTaintsNotTolerated, " "+strings.Join(missing, " ")))}
	}
	return nil
}

// validateContainerdBlock is check 7. Only v1alpha1 lacks the schema rule
// that ties cri.containerd to its type, so only a v1alpha1 client can get
// this far with it.
func validateContainerdBlock(clientVersion string, cri *v1.CRISpec) field.ErrorList {
	if clientVersion == alpha1Version && cri != nil && cri.Containerd != nil && cri.Type != v1.CRITypeContainerd {
		return field.ErrorList{field.Forbidden(criPath.Child("containerd"), msgContainerdWithoutCRI)}
	}
	return nil
}

// validateApprovalMode is check 8. It compares in v1 terms, so Cloud of the
// older versions counts as CloudEphemeral; the shell hook compared the
// literal text and refused it.
func validateApprovalMode(d *v1.DisruptionsSpec, nodeType v1.NodeType) field.ErrorList {
	if d != nil && d.ApprovalMode == v1.ApprovalModeRollingUpdate && nodeType != v1.NodeTypeCloudEphemeral {
		return field.ErrorList{field.Forbidden(specPath.Child("disruptions", "approvalMode"), msgRollingUpdate)}
	}
	return nil
}

// validateNodeTypeImmutable is check 9; old is nil on CREATE.
func validateNodeTypeImmutable(old, ng *v1.NodeGroup) field.ErrorList {
	if old != nil && old.Spec.NodeType != ng.Spec.NodeType {
		return field.ErrorList{field.Forbidden(specPath.Child("nodeType"), msgNodeTypeImmutable)}
	}
	return nil
}

// validateStaticInstancesSelector keeps a Static or CloudStatic group's
// StaticInstance selector once set, as Deckhouse's Go port does: changing it
// would hand the group's machines to another selection. The schema's rule
// on spec.staticInstances does not run when the whole block goes, nor on a
// write through an older version, where the block rides in the
// conversion-data annotation that a client may drop or edit; this check
// sees every write in v1 terms. old is nil on CREATE.
func validateStaticInstancesSelector(old, ng *v1.NodeGroup) field.ErrorList {
	if old == nil || (old.Spec.NodeType != v1.NodeTypeStatic && old.Spec.NodeType != v1.NodeTypeCloudStatic) {
		return nil
	}
	was := staticSelector(old)
	if was == nil {
		return nil
	}
	path := specPath.Child("staticInstances", "labelSelector")
	if now := staticSelector(ng); now == nil || !apiequality.Semantic.DeepEqual(was, now) {
		return field.ErrorList{field.Forbidden(path, msgStaticSelector)}
	}
	return nil
}

func staticSelector(ng *v1.NodeGroup) *v1.StaticInstancesLabelSelector {
	if ng.Spec.StaticInstances == nil {
		return nil
	}
	return ng.Spec.StaticInstances.LabelSelector
}

// validateDockerBlock holds v1's schema rule on cri.docker for writes
// through the older versions, which the API server checks against their
// own schemas only: a forged conversion-data annotation could otherwise
// store a docker block beside another type. A block stored that way by an
// older conversion may stay unchanged. old is nil on CREATE.
func validateDockerBlock(old, ng *v1.NodeGroup) field.ErrorList {
	c := ng.Spec.CRI
	if c == nil || c.Docker == nil || c.Type == v1.CRITypeDocker {
		return nil
	}
	if old != nil && old.Spec.CRI != nil && old.Spec.CRI.Docker != nil && apiequality.Semantic.DeepEqual(old.Spec.CRI.Docker, c.Docker) {
		return nil
	}
	return field.ErrorList{field.Forbidden(criPath.Child("docker"), msgDockerWithoutType)}
}

// validateUniqueTaints is check 10.
func validateUniqueTaints(taints []v1.Taint) field.ErrorList {
	if i, dup := duplicateTaint(taints); dup {
		return field.ErrorList{field.Invalid(taintsPath.Index(i), taints[i].Key, msgDuplicateTaints)}
	}
	return nil
}

// validateTopologyManager is checks 11 and 12: an enabled topology manager
// needs a resource reservation, and a static one needs its cpu. The mode
// defaults to Auto, as the schema does.
func validateTopologyManager(k *v1.KubeletSpec) field.ErrorList {
	if k == nil || k.TopologyManager == nil || k.TopologyManager.Enabled == nil || !*k.TopologyManager.Enabled {
		return nil
	}
	mode := v1.ResourceReservationModeAuto
	var static *v1.StaticResourceReservation
	if rr := k.ResourceReservation; rr != nil {
		if rr.Mode != "" {
			mode = rr.Mode
		}
		static = rr.Static
	}
	switch {
	case mode == v1.ResourceReservationModeOff:
		return field.ErrorList{field.Forbidden(kubeletPath.Child("resourceReservation", "mode"), msgTopologyWithoutRR)}
	case mode == v1.ResourceReservationModeStatic && (static == nil || static.CPU == nil):
		return field.ErrorList{field.Required(kubeletPath.Child("resourceReservation", "static", "cpu"), msgTopologyStaticCPU)}
	}
	return nil
}

// validateCRIChangeOnCustomContainerd is check 13, on UPDATE: nodes is the
// group's nodes with a custom containerd configuration. It compares the
// runtime the nodes run, so spelling out the default type is not a change.
func validateCRIChangeOnCustomContainerd(old, ng *v1.NodeGroup, defaultCRI string, nodes []string) field.ErrorList {
	if len(nodes) > 0 && effectiveCRI(old, defaultCRI) != effectiveCRI(ng, defaultCRI) {
		return field.ErrorList{field.Forbidden(criPath.Child("type"), fmt.Sprintf(msgCustomContainerd, nodeList(ng.Name, nodes)))}
	}
	return nil
}

// maxListedNodes bounds the nodes a denial names: a group of a thousand
// nodes gets the first ones and the command that lists them all.
const maxListedNodes = 10

// nodeList names a group's custom-containerd nodes for check 13's message.
func nodeList(group string, nodes []string) string {
	names := sorted(nodes)
	if len(names) <= maxListedNodes {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more (list them with: kubectl get node -l node.deckhouse.io/group=%s,%s=custom; nodes labelled %s=custom count too)",
		strings.Join(names[:maxListedNodes], ", "), len(names)-maxListedNodes, group, customContainerdLabel, legacyCustomContainerdLabel)
}

// validateContainerdV2Nodes is check 14, on UPDATE: unsupported is the
// group's nodes labelled containerd-v2-unsupported.
func validateContainerdV2Nodes(name string, cri *v1.CRISpec, unsupported []string) field.ErrorList {
	if len(unsupported) > 0 && cri != nil && cri.Type == v1.CRITypeContainerdV2 {
		return field.ErrorList{field.Forbidden(criPath.Child("type"), fmt.Sprintf(msgContainerdV2, name, name))}
	}
	return nil
}

// warnMaxPods is check 15, a warning since Deckhouse PR #17275: each pod
// may hold two IPs while it restarts. prefix 0 means /24.
func warnMaxPods(k *v1.KubeletSpec, prefix int) []string {
	if k == nil || k.MaxPods == nil {
		return nil
	}
	if prefix == 0 {
		prefix = defaultPodSubnetNodeCIDRPrefix
	}
	available := int64(1)<<(32-prefix) - 3
	if 2*int64(*k.MaxPods) > available {
		return []string{fmt.Sprintf(msgMaxPods, *k.MaxPods, available, prefix)}
	}
	return nil
}

// validateMemorySwap is check 16, on UPDATE: limited swap needs cgroup v2,
// which the nodes labelled containerd-v2-unsupported lack.
func validateMemorySwap(name string, k *v1.KubeletSpec, unsupported []string) field.ErrorList {
	if len(unsupported) > 0 && k != nil && k.MemorySwap != nil && k.MemorySwap.SwapBehavior == v1.SwapBehaviorLimitedSwap {
		return field.ErrorList{field.Forbidden(kubeletPath.Child("memorySwap", "swapBehavior"), fmt.Sprintf(msgMemorySwapCgroupV1, name))}
	}
	return nil
}

// validateConversionData is not a Deckhouse check: a v1 client could store
// an annotation that no later conversion to an older version could read,
// breaking every read and LIST through that version. So the group is
// converted to each older version here, as the API server would convert
// it, and an annotation that makes either fail is refused. An UPDATE that
// leaves a stored annotation as it was is let through, so that a group
// stored before this check can still be changed. old is nil on CREATE.
func validateConversionData(old, ng *v1.NodeGroup) field.ErrorList {
	raw, ok := ng.Annotations[v1.ConversionDataAnnotation]
	if !ok {
		return nil
	}
	if old != nil {
		if was, ok := old.Annotations[v1.ConversionDataAnnotation]; ok && was == raw {
			return nil
		}
	}
	path := field.NewPath("metadata", "annotations").Key(v1.ConversionDataAnnotation)
	var sections map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &sections); err != nil {
		return field.ErrorList{field.Invalid(path, raw, fmt.Sprintf(msgConversionData, err))}
	}
	for _, spoke := range []struct {
		version string
		hub     interface{ ConvertFromHub(*v1.NodeGroup) error }
	}{
		{v1alpha1.GroupVersion.Version, &v1alpha1.NodeGroup{}},
		{v1alpha2.GroupVersion.Version, &v1alpha2.NodeGroup{}},
	} {
		if err := spoke.hub.ConvertFromHub(ng.DeepCopy()); err != nil {
			return field.ErrorList{field.Invalid(path, raw, fmt.Sprintf(msgConversionDataSpoke, spoke.version, err, spoke.version))}
		}
	}
	return nil
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
