package nodegroup

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// checkCase is one call of a check: what it returned, and the details and
// field paths it should have.
type checkCase struct {
	name   string
	errs   field.ErrorList
	want   []string
	fields []string
}

func runChecks(t *testing.T, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var details, fields []string
			for _, e := range tc.errs {
				details = append(details, e.Detail)
				fields = append(fields, e.Field)
				// Each rule's refusal gives a declared reason, never
				// "other" (gatehouse_webhook_denials_total).
				if r := denialReason(field.ErrorList{e}); !slices.Contains(denialReasons(), r) {
					t.Errorf("the refusal of %s gives no declared denial reason", e.Field)
				}
			}
			if !slices.Equal(details, tc.want) {
				t.Errorf("denials %q, want %q", details, tc.want)
			}
			if tc.fields != nil && !slices.Equal(fields, tc.fields) {
				t.Errorf("fields %q, want %q", fields, tc.fields)
			}
		})
	}
}

type warnCase struct {
	name string
	got  []string
	want []string
}

func runWarnings(t *testing.T, cases []warnCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Equal(tc.got, tc.want) {
				t.Errorf("warnings %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func ci(minPerZone, maxPerZone int32, zones ...string) *v1.CloudInstancesSpec {
	return &v1.CloudInstancesSpec{MinPerZone: minPerZone, MaxPerZone: maxPerZone, Zones: zones}
}

func taintList(keyEffects ...string) []v1.Taint {
	var out []v1.Taint
	for _, ke := range keyEffects {
		key, effect, _ := strings.Cut(ke, ":")
		out = append(out, v1.Taint{Key: key, Effect: v1.TaintEffect(effect)})
	}
	return out
}

func TestValidateNameLength(t *testing.T) {
	runChecks(t, []checkCase{
		{"41 characters in a cloud cluster", validateNameLength(strings.Repeat("n", 19), "Cloud", prefixOf22), nil, nil},
		{"42 characters in a cloud cluster", validateNameLength(strings.Repeat("n", 20), "Cloud", prefixOf22), []string{msgNameTooLong}, []string{"metadata.name"}},
		{"static cluster", validateNameLength(strings.Repeat("n", 40), "Static", prefixOf22), nil, nil},
	})
}

func TestValidateMaxPerZone(t *testing.T) {
	runChecks(t, []checkCase{
		{"no cloud instances", validateMaxPerZone(nil), nil, nil},
		{"equal", validateMaxPerZone(ci(2, 2)), nil, nil},
		{"below", validateMaxPerZone(ci(3, 2)), []string{msgMaxLowerThanMin}, []string{"spec.cloudInstances.maxPerZone"}},
	})
}

func TestValidateZones(t *testing.T) {
	runChecks(t, []checkCase{
		{"known", validateZones(ci(1, 1, "a", "b"), []string{"a", "b"}), nil, nil},
		{"each unknown zone", validateZones(ci(1, 1, "a", "x", "y"), []string{"a"}), []string{`unknown zone "x"`, `unknown zone "y"`},
			[]string{"spec.cloudInstances.zones[1]", "spec.cloudInstances.zones[2]"}},
		{"no provider zones", validateZones(ci(1, 1, "x"), nil), nil, nil},
		{"no cloud instances", validateZones(nil, []string{"a"}), nil, nil},
	})
}

func TestValidateCRIType(t *testing.T) {
	runChecks(t, []checkCase{
		{"Docker", validateCRIType(&v1.CRISpec{Type: v1.CRITypeDocker}), []string{msgDockerForbidden}, []string{"spec.cri.type"}},
		{"Containerd", validateCRIType(&v1.CRISpec{Type: v1.CRITypeContainerd}), nil, nil},
		{"no cri", validateCRIType(nil), nil, nil},
	})
}

func TestWarnMasterCRIChange(t *testing.T) {
	containerd := group("master", v1.NodeTypeCloudPermanent, criType(v1.CRITypeContainerd))
	v2 := group("master", v1.NodeTypeCloudPermanent, criType(v1.CRITypeContainerdV2))
	runWarnings(t, []warnCase{
		{"2 endpoints", warnMasterCRIChange(containerd, v2, "", 2), []string{msgMasterCRIDisruptive}},
		{"3 endpoints", warnMasterCRIChange(containerd, v2, "", 3), nil},
		{"default spelled out", warnMasterCRIChange(group("master", v1.NodeTypeCloudPermanent), v2, "ContainerdV2", 1), nil},
		{"created with another runtime", warnMasterCRIChange(nil, v2, "", 1), []string{msgMasterCRIDisruptive}},
		{"another group", warnMasterCRIChange(group("w", v1.NodeTypeStatic), group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerdV2)), "", 1), nil},
	})
}

func TestValidateTaintKeys(t *testing.T) {
	runChecks(t, []checkCase{
		{"untolerated keys once each", validateTaintKeys(taintList("a:NoSchedule", "dedicated:NoSchedule", "b:NoExecute", "a:NoExecute"), []string{"c"}),
			[]string{"it is forbidden to create a NodeGroup resource with taints not specified in global.modules.placement.customTolerationKeys in Deckhouse ConfigMap, add: a b to customTolerationKeys."},
			[]string{"spec.nodeTemplate.taints"}},
		{"always tolerated", validateTaintKeys(taintList("dedicated:NoSchedule", "dedicated.deckhouse.io:NoSchedule", "node-role.kubernetes.io/control-plane:NoSchedule",
			"node-role.kubernetes.io/master:NoSchedule", "node.deckhouse.io/etcd-arbiter:NoSchedule"), nil), nil, nil},
		{"custom key", validateTaintKeys(taintList("gpu:NoSchedule"), []string{"gpu"}), nil, nil},
	})
}

func TestValidateContainerdBlock(t *testing.T) {
	block := func(typ v1.CRIType) *v1.CRISpec { return &v1.CRISpec{Type: typ, Containerd: &v1.ContainerdSpec{}} }
	runChecks(t, []checkCase{
		{"v1alpha1 without type Containerd", validateContainerdBlock(alpha1Version, block(v1.CRITypeNotManaged)), []string{msgContainerdWithoutCRI}, []string{"spec.cri.containerd"}},
		{"v1alpha1 with type Containerd", validateContainerdBlock(alpha1Version, block(v1.CRITypeContainerd)), nil, nil},
		{"v1 is left to the schema", validateContainerdBlock(hubVersion, block(v1.CRITypeNotManaged)), nil, nil},
		{"v1alpha1 without a block", validateContainerdBlock(alpha1Version, &v1.CRISpec{Type: v1.CRITypeNotManaged}), nil, nil},
	})
}

func TestValidateApprovalMode(t *testing.T) {
	rolling := &v1.DisruptionsSpec{ApprovalMode: v1.ApprovalModeRollingUpdate}
	runChecks(t, []checkCase{
		{"RollingUpdate on Static", validateApprovalMode(rolling, v1.NodeTypeStatic), []string{msgRollingUpdate}, []string{"spec.disruptions.approvalMode"}},
		{"RollingUpdate on CloudEphemeral", validateApprovalMode(rolling, v1.NodeTypeCloudEphemeral), nil, nil},
		{"Automatic on Static", validateApprovalMode(&v1.DisruptionsSpec{ApprovalMode: v1.ApprovalModeAutomatic}, v1.NodeTypeStatic), nil, nil},
	})
}

func TestValidateNodeTypeImmutable(t *testing.T) {
	runChecks(t, []checkCase{
		{"changed", validateNodeTypeImmutable(group("w", v1.NodeTypeCloudStatic), group("w", v1.NodeTypeStatic)), []string{msgNodeTypeImmutable}, []string{"spec.nodeType"}},
		{"kept", validateNodeTypeImmutable(group("w", v1.NodeTypeStatic), group("w", v1.NodeTypeStatic)), nil, nil},
		{"create", validateNodeTypeImmutable(nil, group("w", v1.NodeTypeStatic)), nil, nil},
	})
}

func TestValidateStaticInstancesSelector(t *testing.T) {
	selecting := func(nodeType v1.NodeType, matchLabels map[string]string) *v1.NodeGroup {
		ng := group("w", nodeType)
		ng.Spec.StaticInstances = &v1.StaticInstancesSpec{Count: ptr.To[int32](1)}
		if matchLabels != nil {
			ng.Spec.StaticInstances.LabelSelector = &v1.StaticInstancesLabelSelector{MatchLabels: matchLabels}
		}
		return ng
	}
	poolA := map[string]string{"pool": "a"}
	withoutBlock := group("w", v1.NodeTypeCloudStatic)
	runChecks(t, []checkCase{
		{"changed", validateStaticInstancesSelector(selecting(v1.NodeTypeStatic, poolA), selecting(v1.NodeTypeStatic, map[string]string{"pool": "b"})),
			[]string{msgStaticSelector}, []string{"spec.staticInstances.labelSelector"}},
		{"selector removed", validateStaticInstancesSelector(selecting(v1.NodeTypeCloudStatic, poolA), selecting(v1.NodeTypeCloudStatic, nil)), []string{msgStaticSelector}, nil},
		{"block removed", validateStaticInstancesSelector(selecting(v1.NodeTypeCloudStatic, poolA), withoutBlock), []string{msgStaticSelector}, nil},
		{"kept, count changed", validateStaticInstancesSelector(selecting(v1.NodeTypeStatic, poolA), func() *v1.NodeGroup {
			ng := selecting(v1.NodeTypeStatic, map[string]string{"pool": "a"})
			ng.Spec.StaticInstances.Count = ptr.To[int32](3)
			return ng
		}()), nil, nil},
		{"added", validateStaticInstancesSelector(selecting(v1.NodeTypeStatic, nil), selecting(v1.NodeTypeStatic, poolA)), nil, nil},
		{"none before, block removed", validateStaticInstancesSelector(selecting(v1.NodeTypeStatic, nil), group("w", v1.NodeTypeStatic)), nil, nil},
		{"empty and absent matchLabels are the same selector", validateStaticInstancesSelector(selecting(v1.NodeTypeStatic, map[string]string{}), func() *v1.NodeGroup {
			ng := selecting(v1.NodeTypeStatic, nil)
			ng.Spec.StaticInstances.LabelSelector = &v1.StaticInstancesLabelSelector{}
			return ng
		}()), nil, nil},
		{"create", validateStaticInstancesSelector(nil, selecting(v1.NodeTypeStatic, poolA)), nil, nil},
	})
}

func TestValidateDockerBlock(t *testing.T) {
	docker := func(typ v1.CRIType, downloads int32) *v1.NodeGroup {
		ng := group("w", v1.NodeTypeStatic)
		ng.Spec.CRI = &v1.CRISpec{Type: typ, Docker: &v1.DockerSpec{MaxConcurrentDownloads: ptr.To(downloads)}}
		return ng
	}
	runChecks(t, []checkCase{
		{"created beside no type", validateDockerBlock(nil, docker("", 3)), []string{msgDockerWithoutType}, []string{"spec.cri.docker"}},
		{"added beside Containerd", validateDockerBlock(group("w", v1.NodeTypeStatic), docker(v1.CRITypeContainerd, 3)), []string{msgDockerWithoutType}, nil},
		{"stored, unchanged", validateDockerBlock(docker("", 3), docker("", 3)), nil, nil},
		{"stored, type changed beside it", validateDockerBlock(docker("", 3), docker(v1.CRITypeContainerd, 3)), nil, nil},
		{"stored, changed", validateDockerBlock(docker("", 3), docker("", 4)), []string{msgDockerWithoutType}, nil},
		{"beside Docker (check 4 refuses the type)", validateDockerBlock(nil, docker(v1.CRITypeDocker, 3)), nil, nil},
	})
}

func TestValidateUniqueTaints(t *testing.T) {
	runChecks(t, []checkCase{
		{"same key and effect", validateUniqueTaints(taintList("d:NoSchedule", "d:NoExecute", "d:NoSchedule")), []string{msgDuplicateTaints}, []string{"spec.nodeTemplate.taints[2]"}},
		{"same key, other effect", validateUniqueTaints(taintList("d:NoSchedule", "d:NoExecute")), nil, nil},
	})
}

func TestValidateTopologyManager(t *testing.T) {
	enabled := func(mode v1.ResourceReservationMode, static *v1.StaticResourceReservation) *v1.KubeletSpec {
		return &v1.KubeletSpec{ResourceReservation: &v1.ResourceReservation{Mode: mode, Static: static}, TopologyManager: &v1.TopologyManager{Enabled: ptr.To(true)}}
	}
	runChecks(t, []checkCase{
		{"11 reservation off", validateTopologyManager(enabled(v1.ResourceReservationModeOff, nil)), []string{msgTopologyWithoutRR}, []string{"spec.kubelet.resourceReservation.mode"}},
		{"12 static without cpu", validateTopologyManager(enabled(v1.ResourceReservationModeStatic, &v1.StaticResourceReservation{Memory: ptr.To(intstr.FromString("1Gi"))})),
			[]string{msgTopologyStaticCPU}, []string{"spec.kubelet.resourceReservation.static.cpu"}},
		{"static with cpu", validateTopologyManager(enabled(v1.ResourceReservationModeStatic, &v1.StaticResourceReservation{CPU: ptr.To(intstr.FromString("500m"))})), nil, nil},
		{"default mode is Auto", validateTopologyManager(&v1.KubeletSpec{TopologyManager: &v1.TopologyManager{Enabled: ptr.To(true)}}), nil, nil},
		{"disabled", validateTopologyManager(&v1.KubeletSpec{ResourceReservation: &v1.ResourceReservation{Mode: v1.ResourceReservationModeOff},
			TopologyManager: &v1.TopologyManager{Enabled: ptr.To(false), Policy: "None"}}), nil, nil},
		{"no kubelet", validateTopologyManager(nil), nil, nil},
	})
}

func TestValidateCRIChangeOnCustomContainerd(t *testing.T) {
	runChecks(t, []checkCase{
		{"change, nodes sorted", validateCRIChangeOnCustomContainerd(group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerd)),
			group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerdV2)), "", []string{"w-2", "w-1"}),
			[]string{"CRI cannot be changed because some nodes are using custom configuration: w-1, w-2"}, []string{"spec.cri.type"}},
		{"default spelled out", validateCRIChangeOnCustomContainerd(group("w", v1.NodeTypeStatic), group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerd)), "", []string{"w-1"}), nil, nil},
		{"no custom nodes", validateCRIChangeOnCustomContainerd(group("w", v1.NodeTypeStatic), group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerdV2)), "", nil), nil, nil},
	})
}

func TestValidateContainerdV2Nodes(t *testing.T) {
	v2 := &v1.CRISpec{Type: v1.CRITypeContainerdV2}
	runChecks(t, []checkCase{
		{"unsupported nodes", validateContainerdV2Nodes("w", v2, []string{"w-1"}), []string{`It is forbidden for NodeGroup "w" to use CRI ContainerdV2 because it contains nodes that do not support ContainerdV2. ` +
			`You can list them with: kubectl get node -l node.deckhouse.io/containerd-v2-unsupported,node.deckhouse.io/group=w`}, []string{"spec.cri.type"}},
		{"no such nodes", validateContainerdV2Nodes("w", v2, nil), nil, nil},
		{"Containerd", validateContainerdV2Nodes("w", &v1.CRISpec{Type: v1.CRITypeContainerd}, []string{"w-1"}), nil, nil},
	})
}

func TestValidateMemorySwap(t *testing.T) {
	swap := func(b v1.SwapBehavior) *v1.KubeletSpec {
		return &v1.KubeletSpec{MemorySwap: &v1.MemorySwap{SwapBehavior: b}}
	}
	runChecks(t, []checkCase{
		{"limited swap without cgroup v2", validateMemorySwap("w", swap(v1.SwapBehaviorLimitedSwap), []string{"w-1"}),
			[]string{`memorySwap requires cgroup v2, but NodeGroup "w" contains nodes where cgroup v2 is not supported`}, []string{"spec.kubelet.memorySwap.swapBehavior"}},
		{"NoSwap", validateMemorySwap("w", swap(v1.SwapBehaviorNoSwap), []string{"w-1"}), nil, nil},
		{"every node has cgroup v2", validateMemorySwap("w", swap(v1.SwapBehaviorLimitedSwap), nil), nil, nil},
	})
}

func TestWarnMaxPods(t *testing.T) {
	maxPods := func(n int32) *v1.KubeletSpec { return &v1.KubeletSpec{MaxPods: ptr.To(n)} }
	runWarnings(t, []warnCase{
		{"500 on /24", warnMaxPods(maxPods(500), 0), []string{".spec.kubelet.maxPods (500) is too high: each pod may need 2 IPs (one terminating + one starting), but only 253 IPs available in podSubnetNodeCIDRPrefix /24"}},
		{"126 on /24, the largest that fits", warnMaxPods(maxPods(126), 24), nil},
		{"500 on /22", warnMaxPods(maxPods(500), 22), nil},
		{"unset", warnMaxPods(&v1.KubeletSpec{}, 0), nil},
	})
}

func TestValidateConversionData(t *testing.T) {
	group := func(annotation string) *v1.NodeGroup {
		ng := &v1.NodeGroup{Spec: v1.NodeGroupSpec{NodeType: v1.NodeTypeStatic}}
		if annotation != "" {
			ng.Annotations = map[string]string{v1.ConversionDataAnnotation: annotation}
		}
		return ng
	}
	path := []string{"metadata.annotations[gatehouse.dev/nodegroup-conversion-data]"}
	runChecks(t, []checkCase{
		{"unreadable", validateConversionData(nil, group("{")),
			[]string{"the annotation is written by Gatehouse's conversion and must be a JSON object: unexpected end of JSON input"}, path},
		{"an object", validateConversionData(nil, group(`{"v1":{}}`)), nil, nil},
		{"absent", validateConversionData(nil, group("")), nil, nil},
		// Stored before this check, unchanged by the update: let through.
		{"unchanged on update", validateConversionData(group(`{"v1alpha1":{"x":1}}`), group(`{"v1alpha1":{"x":1}}`)), nil, nil},
	})
	// A JSON object with a section no conversion can read: every read of
	// the group in that version would fail from then on. (v1alpha2 keeps no
	// section of its own; its conversion fails only on the object itself.)
	for _, tc := range []struct {
		name     string
		old, now *v1.NodeGroup
		want     string
	}{
		{"an unknown field in the v1alpha1 section", nil, group(`{"v1alpha1":{"x":1}}`),
			`the annotation is written by Gatehouse's conversion: with it, the group cannot be read as v1alpha1: section "v1alpha1" of the conversion data`},
		{"a v1alpha1 section of the wrong type", nil, group(`{"v1alpha1":[]}`), "the group cannot be read as v1alpha1"},
		{"changed on update", group(`{"v1alpha1":{}}`), group(`{"v1alpha1":{"x":1}}`), "the group cannot be read as v1alpha1"},
	} {
		errs := validateConversionData(tc.old, tc.now)
		if len(errs) != 1 || !strings.Contains(errs[0].Detail, tc.want) || errs[0].Field != path[0] ||
			!strings.HasSuffix(errs[0].Detail, "remove the annotation or restore its v1alpha1 section") {
			t.Errorf("%s: %v, want one denial of %s saying %q", tc.name, errs, path[0], tc.want)
		}
		if len(errs) == 1 && !slices.Contains(denialReasons(), denialReason(errs)) {
			t.Errorf("%s: no declared denial reason", tc.name)
		}
	}
}

// TestCustomContainerdDenialIsBounded: a group of 1,000 custom-containerd
// nodes is refused naming the first ten and the command that lists all.
func TestCustomContainerdDenialIsBounded(t *testing.T) {
	var nodes []string
	for i := range 1000 {
		nodes = append(nodes, fmt.Sprintf("w-%04d", i))
	}
	got := nodeList("workers", nodes)
	want := "w-0000, w-0001, w-0002, w-0003, w-0004, w-0005, w-0006, w-0007, w-0008, w-0009 and 990 more (list them with: kubectl get node -l node.deckhouse.io/group=workers,node.deckhouse.io/containerd-config=custom"
	if !strings.HasPrefix(got, want) || len(got) > 512 {
		t.Fatalf("got %d bytes: %s", len(got), got)
	}
}

// TestChecksFollowDeckhousesOrder: the checks run in Deckhouse's order
// (its numbers ascend; Gatehouse's own, numbered 0, sit between), each has
// a name of its own, and every Deckhouse check but 12 (folded into 11,
// which reads the same fields) is there.
func TestChecksFollowDeckhousesOrder(t *testing.T) {
	names := map[string]bool{}
	last := 0
	numbers := map[int]bool{}
	for _, c := range checks {
		if c.name == "" || names[c.name] {
			t.Errorf("check %q: want a name of its own", c.name)
		}
		names[c.name] = true
		if c.deckhouse == 0 {
			continue
		}
		if c.deckhouse <= last {
			t.Errorf("check %q is Deckhouse's %d, after %d", c.name, c.deckhouse, last)
		}
		last = c.deckhouse
		numbers[c.deckhouse] = true
	}
	for n := 1; n <= 16; n++ {
		if n != 12 && !numbers[n] {
			t.Errorf("Deckhouse's check %d has no rule", n)
		}
	}
}
