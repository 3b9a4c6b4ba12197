package nodegroup

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

type mutation func(*v1.NodeGroup)

func group(name string, nodeType v1.NodeType, mutations ...mutation) *v1.NodeGroup {
	ng := &v1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeGroupSpec{NodeType: nodeType}}
	for _, m := range mutations {
		m(ng)
	}
	return ng
}

func cloud(minPerZone, maxPerZone int32, zones ...string) mutation {
	return func(ng *v1.NodeGroup) {
		ng.Spec.CloudInstances = &v1.CloudInstancesSpec{
			MinPerZone: minPerZone, MaxPerZone: maxPerZone, Zones: zones,
			ClassReference: v1.ClassReference{Kind: "OpenStackInstanceClass", Name: "worker"},
		}
	}
}

func criType(t v1.CRIType) mutation {
	return func(ng *v1.NodeGroup) {
		if ng.Spec.CRI == nil {
			ng.Spec.CRI = &v1.CRISpec{}
		}
		ng.Spec.CRI.Type = t
	}
}

func containerdBlock(ng *v1.NodeGroup) {
	if ng.Spec.CRI == nil {
		ng.Spec.CRI = &v1.CRISpec{}
	}
	ng.Spec.CRI.Containerd = &v1.ContainerdSpec{MaxConcurrentDownloads: ptr.To[int32](3)}
}

func taints(keyEffects ...string) mutation {
	return func(ng *v1.NodeGroup) {
		ng.Spec.NodeTemplate = &v1.NodeTemplate{}
		for _, ke := range keyEffects {
			key, effect, _ := strings.Cut(ke, ":")
			ng.Spec.NodeTemplate.Taints = append(ng.Spec.NodeTemplate.Taints, v1.Taint{Key: key, Effect: v1.TaintEffect(effect)})
		}
	}
}

func approval(mode v1.ApprovalMode) mutation {
	return func(ng *v1.NodeGroup) { ng.Spec.Disruptions = &v1.DisruptionsSpec{ApprovalMode: mode} }
}

func kubelet(k v1.KubeletSpec) mutation {
	return func(ng *v1.NodeGroup) { ng.Spec.Kubelet = &k }
}

func topology(mode v1.ResourceReservationMode, static *v1.StaticResourceReservation) mutation {
	return kubelet(v1.KubeletSpec{
		ResourceReservation: &v1.ResourceReservation{Mode: mode, Static: static},
		TopologyManager:     &v1.TopologyManager{Enabled: ptr.To(true), Policy: "SingleNumaNode"},
	})
}

func annotated(key, value string) mutation {
	return func(ng *v1.NodeGroup) { ng.Annotations = map[string]string{key: value} }
}

var prefixOf22 = strings.Repeat("p", 22)

func TestValidate(t *testing.T) {
	cases := []struct {
		name          string
		update        bool
		clientVersion string
		old           *v1.NodeGroup
		ng            *v1.NodeGroup
		state         ClusterState
		denials       []string
		warnings      []string
	}{
		{name: "plain create", ng: group("worker", v1.NodeTypeStatic)},

		// 1. name length, CREATE in Cloud clusters only.
		{name: "cloud prefix 22 and a 20-character name", ng: group(strings.Repeat("n", 20), v1.NodeTypeCloudEphemeral, cloud(1, 2)),
			state: ClusterState{ClusterType: "Cloud", ClusterPrefix: prefixOf22}, denials: []string{msgNameTooLong}},
		{name: "cloud prefix 22 and a 19-character name", ng: group(strings.Repeat("n", 19), v1.NodeTypeCloudEphemeral, cloud(1, 2)),
			state: ClusterState{ClusterType: "Cloud", ClusterPrefix: prefixOf22}},
		{name: "static cluster skips the name length", ng: group(strings.Repeat("n", 40), v1.NodeTypeStatic),
			state: ClusterState{ClusterType: "Static", ClusterPrefix: prefixOf22}},
		{name: "updates of long-named groups pass", update: true,
			old:   group(strings.Repeat("n", 30), v1.NodeTypeCloudEphemeral, cloud(1, 2)),
			ng:    group(strings.Repeat("n", 30), v1.NodeTypeCloudEphemeral, cloud(1, 3)),
			state: ClusterState{ClusterType: "Cloud", ClusterPrefix: prefixOf22}},

		// 2.
		{name: "maxPerZone below minPerZone", ng: group("w", v1.NodeTypeCloudEphemeral, cloud(3, 2)), denials: []string{msgMaxLowerThanMin}},
		{name: "maxPerZone equal to minPerZone", ng: group("w", v1.NodeTypeCloudEphemeral, cloud(2, 2))},

		// 3.
		{name: "unknown zones, each reported", ng: group("w", v1.NodeTypeCloudEphemeral, cloud(1, 2, "a", "x", "y")),
			state: ClusterState{Zones: []string{"a", "b"}}, denials: []string{`unknown zone "x"`, `unknown zone "y"`}},
		{name: "known zones", ng: group("w", v1.NodeTypeCloudEphemeral, cloud(1, 2, "a", "b")), state: ClusterState{Zones: []string{"a", "b"}}},
		{name: "no provider zones turns the check off", ng: group("w", v1.NodeTypeCloudEphemeral, cloud(1, 2, "x"))},
		{name: "no zones in the spec", ng: group("w", v1.NodeTypeCloudEphemeral, cloud(1, 2)), state: ClusterState{Zones: []string{"a"}}},

		// 4.
		{name: "Docker", ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeDocker)), denials: []string{msgDockerForbidden}},
		{name: "Containerd", ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerd))},

		// 5. a warning, never a denial.
		{name: "master switches to ContainerdV2 with 2 endpoints", update: true,
			old: group("master", v1.NodeTypeCloudPermanent, criType(v1.CRITypeContainerd)), ng: group("master", v1.NodeTypeCloudPermanent, criType(v1.CRITypeContainerdV2)),
			state: ClusterState{APIServerEndpoints: 2}, warnings: []string{msgMasterCRIDisruptive}},
		{name: "master switches with 3 endpoints", update: true,
			old: group("master", v1.NodeTypeCloudPermanent, criType(v1.CRITypeContainerd)), ng: group("master", v1.NodeTypeCloudPermanent, criType(v1.CRITypeContainerdV2)),
			state: ClusterState{APIServerEndpoints: 3}},
		{name: "master spells out the default runtime", update: true,
			old: group("master", v1.NodeTypeCloudPermanent), ng: group("master", v1.NodeTypeCloudPermanent, criType(v1.CRITypeContainerdV2)),
			state: ClusterState{APIServerEndpoints: 1, DefaultCRI: "ContainerdV2"}},
		{name: "master created with another runtime than the default",
			ng: group("master", v1.NodeTypeCloudPermanent, criType(v1.CRITypeNotManaged)), state: ClusterState{APIServerEndpoints: 1},
			warnings: []string{msgMasterCRIDisruptive}},
		{name: "another group switches runtime with 1 endpoint", update: true,
			old: group("w", v1.NodeTypeStatic), ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerdV2)), state: ClusterState{APIServerEndpoints: 1}},

		// 6.
		{name: "taint keys ModuleConfig global does not list", ng: group("w", v1.NodeTypeStatic, taints("a:NoSchedule", "dedicated:NoSchedule", "b:NoExecute", "a:NoExecute")),
			state:   ClusterState{CustomTolerationKeys: []string{"c"}},
			denials: []string{"it is forbidden to create a NodeGroup resource with taints not specified in global.modules.placement.customTolerationKeys in Deckhouse ConfigMap, add: a b to customTolerationKeys."}},
		{name: "always tolerated taint keys", ng: group("w", v1.NodeTypeStatic, taints("dedicated:NoSchedule", "dedicated.deckhouse.io:NoSchedule",
			"node-role.kubernetes.io/control-plane:NoSchedule", "node-role.kubernetes.io/master:NoSchedule", "node.deckhouse.io/etcd-arbiter:NoSchedule"))},
		{name: "taint key listed in ModuleConfig global", ng: group("w", v1.NodeTypeStatic, taints("gpu:NoSchedule")),
			state: ClusterState{CustomTolerationKeys: []string{"gpu"}}},

		// 7. only for v1alpha1 clients.
		{name: "v1alpha1 containerd block without type Containerd", clientVersion: "deckhouse.io/v1alpha1",
			ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeNotManaged), containerdBlock), denials: []string{msgContainerdWithoutCRI}},
		{name: "v1alpha1 containerd block with Docker is refused twice", clientVersion: "deckhouse.io/v1alpha1",
			ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeDocker), containerdBlock), denials: []string{msgDockerForbidden, msgContainerdWithoutCRI}},
		{name: "v1alpha1 containerd block with type Containerd", clientVersion: "deckhouse.io/v1alpha1",
			ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerd), containerdBlock)},
		{name: "v1 clients are left to the schema", clientVersion: "deckhouse.io/v1",
			ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeNotManaged), containerdBlock)},

		// 8.
		{name: "RollingUpdate on Static", ng: group("w", v1.NodeTypeStatic, approval(v1.ApprovalModeRollingUpdate)), denials: []string{msgRollingUpdate}},
		{name: "RollingUpdate on CloudEphemeral, also what v1alpha2 Cloud becomes", clientVersion: "deckhouse.io/v1alpha2",
			ng: group("w", v1.NodeTypeCloudEphemeral, cloud(1, 2), approval(v1.ApprovalModeRollingUpdate))},

		// 9.
		{name: "nodeType changed", update: true, old: group("w", v1.NodeTypeCloudStatic), ng: group("w", v1.NodeTypeStatic), denials: []string{msgNodeTypeImmutable}},
		{name: "nodeType kept", update: true, old: group("w", v1.NodeTypeStatic), ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerd))},

		// 10.
		{name: "duplicate taint", ng: group("w", v1.NodeTypeStatic, taints("dedicated:NoSchedule", "dedicated:NoExecute", "dedicated:NoSchedule")),
			denials: []string{msgDuplicateTaints}},

		// 11 and 12.
		{name: "topology manager without reservation", ng: group("w", v1.NodeTypeStatic, topology(v1.ResourceReservationModeOff, nil)), denials: []string{msgTopologyWithoutRR}},
		{name: "topology manager with a static reservation without cpu", ng: group("w", v1.NodeTypeStatic,
			topology(v1.ResourceReservationModeStatic, &v1.StaticResourceReservation{Memory: ptr.To(intstr.FromString("1Gi"))})),
			denials: []string{msgTopologyStaticCPU}},
		{name: "topology manager with a static reservation of cpu 500m", ng: group("w", v1.NodeTypeStatic,
			topology(v1.ResourceReservationModeStatic, &v1.StaticResourceReservation{CPU: ptr.To(intstr.FromString("500m"))}))},
		{name: "topology manager with the default reservation", ng: group("w", v1.NodeTypeStatic, topology("", nil))},
		{name: "disabled topology manager with a policy and no reservation", ng: group("w", v1.NodeTypeStatic, kubelet(v1.KubeletSpec{
			ResourceReservation: &v1.ResourceReservation{Mode: v1.ResourceReservationModeOff},
			TopologyManager:     &v1.TopologyManager{Enabled: ptr.To(false), Policy: "None"},
		}))},

		// 13.
		{name: "runtime change with custom containerd nodes", update: true,
			old: group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerd)), ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerdV2)),
			state:   ClusterState{NodesWithCustomContainerd: []string{"w-2", "w-1"}},
			denials: []string{"CRI cannot be changed because some nodes are using custom configuration: w-1, w-2"}},
		{name: "spelling out the default runtime with custom containerd nodes", update: true,
			old: group("w", v1.NodeTypeStatic), ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerd)),
			state: ClusterState{NodesWithCustomContainerd: []string{"w-1"}}},
		{name: "runtime change without custom containerd nodes", update: true,
			old: group("w", v1.NodeTypeStatic), ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerdV2))},

		// 14.
		{name: "ContainerdV2 with nodes that cannot run it", update: true,
			old: group("w", v1.NodeTypeStatic), ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerdV2)),
			state: ClusterState{NodesWithoutContainerdV2: []string{"w-1"}},
			denials: []string{`It is forbidden for NodeGroup "w" to use CRI ContainerdV2 because it contains nodes that do not support ContainerdV2. ` +
				`You can list them with: kubectl get node -l node.deckhouse.io/containerd-v2-unsupported,node.deckhouse.io/group=w`}},
		{name: "ContainerdV2 without such nodes", update: true,
			old: group("w", v1.NodeTypeStatic), ng: group("w", v1.NodeTypeStatic, criType(v1.CRITypeContainerdV2))},

		// 15. a warning.
		{name: "maxPods 500 with a /24 node subnet", ng: group("w", v1.NodeTypeStatic, kubelet(v1.KubeletSpec{MaxPods: ptr.To[int32](500)})),
			warnings: []string{".spec.kubelet.maxPods (500) is too high: each pod may need 2 IPs (one terminating + one starting), but only 253 IPs available in podSubnetNodeCIDRPrefix /24"}},
		{name: "maxPods 100 with a /24 node subnet", ng: group("w", v1.NodeTypeStatic, kubelet(v1.KubeletSpec{MaxPods: ptr.To[int32](100)}))},
		{name: "maxPods 500 with a /22 node subnet", ng: group("w", v1.NodeTypeStatic, kubelet(v1.KubeletSpec{MaxPods: ptr.To[int32](500)})),
			state: ClusterState{PodSubnetNodeCIDRPrefix: 22}},

		// 16.
		{name: "limited swap on nodes without cgroup v2", update: true,
			old: group("w", v1.NodeTypeStatic), ng: group("w", v1.NodeTypeStatic, kubelet(v1.KubeletSpec{MemorySwap: &v1.MemorySwap{
				SwapBehavior: v1.SwapBehaviorLimitedSwap, LimitedSwap: &v1.LimitedSwap{Size: "2G"}}})),
			state:   ClusterState{NodesWithoutContainerdV2: []string{"w-1"}},
			denials: []string{`memorySwap requires cgroup v2, but NodeGroup "w" contains nodes where cgroup v2 is not supported`}},
		{name: "NoSwap on nodes without cgroup v2", update: true,
			old: group("w", v1.NodeTypeStatic), ng: group("w", v1.NodeTypeStatic, kubelet(v1.KubeletSpec{MemorySwap: &v1.MemorySwap{SwapBehavior: v1.SwapBehaviorNoSwap}})),
			state: ClusterState{NodesWithoutContainerdV2: []string{"w-1"}}},

		{name: "every denial and warning of a request together", update: true,
			old: group("master", v1.NodeTypeCloudPermanent),
			ng: group("master", v1.NodeTypeCloudStatic, criType(v1.CRITypeDocker), taints("x:NoSchedule", "x:NoSchedule"),
				kubelet(v1.KubeletSpec{MaxPods: ptr.To[int32](200)})),
			state:    ClusterState{APIServerEndpoints: 1},
			denials:  []string{msgDockerForbidden, "it is forbidden to create a NodeGroup resource with taints not specified in global.modules.placement.customTolerationKeys in Deckhouse ConfigMap, add: x to customTolerationKeys.", msgNodeTypeImmutable, msgDuplicateTaints},
			warnings: []string{msgMasterCRIDisruptive, ".spec.kubelet.maxPods (200) is too high: each pod may need 2 IPs (one terminating + one starting), but only 253 IPs available in podSubnetNodeCIDRPrefix /24"}},

		{name: "unreadable conversion data", ng: group("w", v1.NodeTypeStatic, annotated(v1.ConversionDataAnnotation, "{")),
			denials: []string{"the annotation is written by Gatehouse's conversion and must be a JSON object: unexpected end of JSON input"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := Request{Operation: admissionv1.Create, ClientVersion: tc.clientVersion, Old: tc.old, New: tc.ng}
			if tc.update {
				req.Operation = admissionv1.Update
			}
			if req.ClientVersion == "" {
				req.ClientVersion = "deckhouse.io/v1"
			}
			errs, warnings := Validate(req, tc.state)
			var denials []string
			for _, e := range errs {
				denials = append(denials, e.Detail)
			}
			if !slices.Equal(denials, tc.denials) {
				t.Errorf("denials:\n got %q\nwant %q", denials, tc.denials)
			}
			if !slices.Equal(warnings, tc.warnings) {
				t.Errorf("warnings:\n got %q\nwant %q", warnings, tc.warnings)
			}
		})
	}
}

func TestDenialsNameTheirFields(t *testing.T) {
	errs, _ := Validate(Request{Operation: admissionv1.Create, New: group("w", v1.NodeTypeCloudEphemeral, cloud(1, 2, "x"), criType(v1.CRITypeDocker))},
		ClusterState{Zones: []string{"a"}})
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.Field)
	}
	if want := []string{"spec.cloudInstances.zones[0]", "spec.cri.type"}; !slices.Equal(fields, want) {
		t.Fatalf("fields %q, want %q", fields, want)
	}
	if got, want := denialMessage(errs), "unknown zone \"x\"\n"+msgDockerForbidden; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}
