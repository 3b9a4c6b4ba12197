package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha2"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/nodegroup"
	"github.com/gatehouse-dev/gatehouse/internal/testing/clustertest"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

const policyDenied = clustertest.NodeGroupPolicyDenied

// ngWarnings collects the warnings the API server relays.
type ngWarnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *ngWarnings) HandleWarningHeader(_ int, _, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *ngWarnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

type ngEnv struct {
	c        client.Client
	warnings *ngWarnings
	g        *testenv.Gatehouse
}

// ngClient is clustertest.NodeGroupClient on the shared control plane.
func ngClient(t testing.TB, warnings rest.WarningHandler) client.Client {
	t.Helper()
	return clustertest.NodeGroupClient(t, controlPlane.Config, warnings)
}

// startNodeGroup starts Gatehouse with the nodegroup module and waits until
// the API server converts and validates through it. On cleanup it removes
// the webhook configuration and the CRD's conversion stanza, which would
// otherwise point at a stopped server.
func startNodeGroup(t *testing.T) *ngEnv {
	t.Helper()
	opts := app.Options{
		Catalogue: []module.Module{nodegroup.New()},
		Modules:   map[string]app.ModuleConfig{"nodegroup": {Enabled: true}},
	}
	return startNodeGroupWith(t, opts)
}

func startNodeGroupWith(t testing.TB, opts app.Options) *ngEnv {
	t.Helper()
	env := &ngEnv{warnings: &ngWarnings{}}
	env.c = ngClient(t, env.warnings)
	env.g = clustertest.ServeNodeGroups(t, controlPlane, opts, env.c)
	return env
}

// eventually is clustertest.Eventually: retry until the check passes.
var eventually = clustertest.Eventually

// create creates obj and deletes it when the test ends. A group of the same
// name left by an interrupted run is deleted first: some names, such as
// master, cannot be made unique.
func (e *ngEnv) create(t testing.TB, obj client.Object) {
	t.Helper()
	deleteNodeGroup(t, obj.GetName())
	if err := e.c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	name := obj.GetName()
	t.Cleanup(func() { deleteNodeGroup(t, name) })
}

func deleteNodeGroup(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	c := ngClient(t, nil)
	if err := c.Delete(ctx, &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete NodeGroup %s: %v", name, err)
	}
}

func (e *ngEnv) get(t testing.TB, name string, into client.Object) {
	t.Helper()
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: name}, into); err != nil {
		t.Fatalf("get %T %s: %v", into, name, err)
	}
}

// ngName is a NodeGroup name of this run: base and a random suffix, so
// that the suite can run again on the same control plane and in any order.
func ngName(base string) string { return base + "-" + randSuffix() }

// putSecret writes a Secret in kube-system and removes it on cleanup. The
// names are Deckhouse's and cannot be made unique, so a Secret left by an
// interrupted run is replaced.
func putSecret(t testing.TB, name string, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, StringData: data}
	if err := controlPlane.Client.Delete(ctx, s.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := controlPlane.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlPlane.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Secret %s: %v", name, err)
		}
	})
}

func putNode(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := controlPlane.Client.Delete(ctx, n.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := controlPlane.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlPlane.Client.Delete(ctx, n); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Node %s: %v", name, err)
		}
	})
}

// installModuleConfigCRD installs a minimal ModuleConfig CRD, as Deckhouse
// would, and removes it on cleanup.
func installModuleConfigCRD(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "moduleconfigs.deckhouse.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "deckhouse.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "moduleconfigs", Singular: "moduleconfig", Kind: "ModuleConfig", ListKind: "ModuleConfigList"},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
					},
				}},
			}},
		},
	}
	// The CRD's name is Deckhouse's: one left by an interrupted run goes first.
	removeModuleConfigCRD(t)
	if err := controlPlane.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeModuleConfigCRD(t) })
	eventually(t, "the ModuleConfig CRD is served", func() error {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("deckhouse.io/v1alpha1")
		list.SetKind("ModuleConfigList")
		return controlPlane.Client.List(ctx, list)
	})
}

func removeModuleConfigCRD(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "moduleconfigs.deckhouse.io"}}
	if err := controlPlane.Client.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete the ModuleConfig CRD: %v", err)
	}
	eventually(t, "the ModuleConfig CRD is gone", func() error {
		err := controlPlane.Client.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

func putModuleConfigGlobal(t testing.TB, tolerationKeys ...string) {
	t.Helper()
	keys := make([]any, len(tolerationKeys))
	for i, k := range tolerationKeys {
		keys[i] = k
	}
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
		"metadata": map[string]any{"name": "global"},
		"spec": map[string]any{"version": int64(1), "settings": map[string]any{
			"modules": map[string]any{"placement": map[string]any{"customTolerationKeys": keys}},
		}},
	}}
	if err := controlPlane.Client.Create(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
}

const openStackProviderConfig = `apiVersion: deckhouse.io/v1
kind: OpenStackClusterConfiguration
layout: Standard
masterNodeGroup:
  replicas: 1
nodeGroups:
- name: front-nm
  replicas: 2
`

// providerConfigListing is openStackProviderConfig with group as its
// permanent group instead of front-nm.
func providerConfigListing(group string) string {
	return strings.Replace(openStackProviderConfig, "name: front-nm", "name: "+group, 1)
}

// classRef is clustertest.NodeGroupClassRef: the cloud groups' class.
var classRef = clustertest.NodeGroupClassRef

func TestNodeGroupWrittenThroughV1alpha1IsReadThroughEveryVersion(t *testing.T) {
	env := startNodeGroup(t)
	name := ngName("alpha1-cloud")
	env.create(t, &v1alpha1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodeGroupSpec{
			NodeType:          v1alpha1.NodeTypeCloud,
			KubernetesVersion: "1.33",
			Static:            &v1alpha1.StaticSpec{InternalNetworkCIDRs: []string{"10.10.0.0/16"}},
			Docker:            &v1alpha1.DockerSpec{MaxConcurrentDownloads: ptr.To[int32](4)},
			CloudInstances: &v1alpha1.CloudInstancesSpec{MinPerZone: 1, MaxPerZone: 2,
				ClassReference: v1alpha1.ClassReference{Kind: "OpenStackInstanceClass", Name: "worker"}},
		},
	})

	hub := &ngv1.NodeGroup{}
	env.get(t, name, hub)
	// docker beside no cri.type rides in the conversion data: v1 allows
	// cri.docker only beside type Docker.
	if hub.Spec.NodeType != ngv1.NodeTypeCloudEphemeral || hub.Spec.CRI != nil {
		t.Fatalf("through v1: %+v", hub.Spec)
	}
	if hub.Spec.Kubelet == nil || hub.Spec.Kubelet.ContainerLogMaxSize != "50Mi" {
		t.Fatalf("v1 defaults not applied on read: %+v", hub.Spec.Kubelet)
	}
	alpha2 := &v1alpha2.NodeGroup{}
	env.get(t, name, alpha2)
	if alpha2.Spec.NodeType != v1alpha2.NodeTypeCloud || alpha2.Spec.CRI != nil {
		t.Fatalf("through v1alpha2: %+v", alpha2.Spec)
	}
	alpha1 := &v1alpha1.NodeGroup{}
	env.get(t, name, alpha1)
	if alpha1.Spec.KubernetesVersion != "1.33" || alpha1.Spec.Static == nil || alpha1.Spec.Static.InternalNetworkCIDRs[0] != "10.10.0.0/16" ||
		alpha1.Spec.Docker == nil || *alpha1.Spec.Docker.MaxConcurrentDownloads != 4 {
		t.Fatalf("through v1alpha1 the v1alpha1-only fields are lost: %+v", alpha1.Spec)
	}
}

func TestNodeGroupWrittenThroughV1IsReadThroughOlderVersions(t *testing.T) {
	env := startNodeGroup(t)
	name := ngName("v1-groups")
	env.create(t, &ngv1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeCloudPermanent, CloudInstances: &ngv1.CloudInstancesSpec{MinPerZone: 1, MaxPerZone: 1, ClassReference: classRef()}},
	})
	for _, obj := range []client.Object{&v1alpha1.NodeGroup{}, &v1alpha2.NodeGroup{}} {
		env.get(t, name, obj)
	}
	list := &v1alpha2.NodeGroupList{}
	if err := env.c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ng := range list.Items {
		if ng.Name != name {
			continue
		}
		found = true
		if ng.Spec.NodeType != v1alpha2.NodeTypeHybrid {
			t.Fatalf("CloudPermanent read through v1alpha2 as %s", ng.Spec.NodeType)
		}
	}
	if !found {
		t.Fatalf("%s is missing from the v1alpha2 list of %d", name, len(list.Items))
	}
}

// A client of an older version that reads, changes what it knows and writes
// back keeps every v1-only field, status included.
func TestNodeGroupV1OnlyFieldsSurviveReadModifyWriteThroughOlderVersions(t *testing.T) {
	env := startNodeGroup(t)
	ctx := context.Background()
	name := ngName("rich")
	original := &ngv1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ngv1.NodeGroupSpec{
			NodeType:               ngv1.NodeTypeCloudStatic,
			CRI:                    &ngv1.CRISpec{Type: ngv1.CRITypeContainerdV2, ContainerdV2: &ngv1.ContainerdSpec{MaxConcurrentDownloads: ptr.To[int32](6)}},
			GPU:                    &ngv1.GPUSpec{Sharing: "TimeSlicing", TimeSlicing: &ngv1.GPUTimeSlicing{PartitionCount: ptr.To[int32](4)}},
			Fencing:                &ngv1.FencingSpec{Mode: "Watchdog"},
			Update:                 &ngv1.UpdateSpec{MaxConcurrent: ptr.To(intstr.FromString("25%"))},
			StaticInstances:        &ngv1.StaticInstancesSpec{Count: ptr.To[int32](2), LabelSelector: &ngv1.StaticInstancesLabelSelector{MatchLabels: map[string]string{"pool": "gpu"}}},
			NodeDrainTimeoutSecond: ptr.To[int32](600),
			Chaos:                  &ngv1.ChaosSpec{Mode: "DrainAndDelete", Period: "2h30m"},
			Kubelet: &ngv1.KubeletSpec{
				MaxPods:             ptr.To[int32](100),
				ResourceReservation: &ngv1.ResourceReservation{Mode: ngv1.ResourceReservationModeStatic, Static: &ngv1.StaticResourceReservation{CPU: ptr.To(intstr.FromString("500m"))}},
				TopologyManager:     &ngv1.TopologyManager{Enabled: ptr.To(true), Policy: "SingleNumaNode"},
			},
		},
	}
	env.create(t, original)
	original.Status = ngv1.NodeGroupStatus{
		Ready:      ptr.To[int32](2),
		Conditions: []ngv1.NodeGroupCondition{{Type: "Ready", Status: "True", LastTransitionTime: "2025-03-04T05:06:07.891Z"}},
		Deckhouse:  &ngv1.DeckhouseStatus{Synced: "True"},
	}
	if err := env.c.Status().Update(ctx, original); err != nil {
		t.Fatal(err)
	}
	stored := &ngv1.NodeGroup{}
	env.get(t, name, stored)

	// Through v1alpha2: a label and the chaos mode change.
	alpha2 := &v1alpha2.NodeGroup{}
	env.get(t, name, alpha2)
	if alpha2.Spec.NodeType != v1alpha2.NodeTypeHybrid || alpha2.Spec.CRI.Type != v1alpha2.CRITypeContainerd {
		t.Fatalf("v1alpha2 view: %+v %+v", alpha2.Spec.NodeType, alpha2.Spec.CRI)
	}
	alpha2.Labels = map[string]string{"changed-through": "v1alpha2"}
	alpha2.Spec.Chaos.Mode = "Disabled"
	if err := env.c.Update(ctx, alpha2); err != nil {
		t.Fatalf("write back through v1alpha2: %v", err)
	}
	// Through v1alpha1, its status subresource: the ready count changes.
	alpha1 := &v1alpha1.NodeGroup{}
	env.get(t, name, alpha1)
	alpha1.Status.Ready = ptr.To[int32](3)
	if err := env.c.Status().Update(ctx, alpha1); err != nil {
		t.Fatalf("write status back through v1alpha1: %v", err)
	}
	// And a plain spec update through v1alpha1.
	env.get(t, name, alpha1)
	alpha1.Spec.Kubelet.MaxPods = ptr.To[int32](90)
	if err := env.c.Update(ctx, alpha1); err != nil {
		t.Fatalf("write back through v1alpha1: %v", err)
	}

	after := &ngv1.NodeGroup{}
	env.get(t, name, after)
	want := stored.DeepCopy()
	want.Labels = map[string]string{"changed-through": "v1alpha2"}
	want.Spec.Chaos.Mode = "Disabled"
	want.Status.Ready = ptr.To[int32](3)
	want.Spec.Kubelet.MaxPods = ptr.To[int32](90)
	if _, ok := after.Annotations[ngv1.ConversionDataAnnotation]; ok {
		t.Errorf("the conversion-data annotation was stored: %s", after.Annotations[ngv1.ConversionDataAnnotation])
	}
	after.ObjectMeta, want.ObjectMeta = metav1.ObjectMeta{Labels: after.Labels}, metav1.ObjectMeta{Labels: want.Labels}
	if got, exp := asJSON(t, after), asJSON(t, want); got != exp {
		t.Fatalf("after writes through older versions\n got %s\nwant %s", got, exp)
	}
}

func asJSON(t testing.TB, v any) string {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v)
	if err != nil {
		t.Fatal(err)
	}
	b, err := (&unstructured.Unstructured{Object: u}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNodeGroupHybridFollowsTheProviderConfiguration(t *testing.T) {
	hybrid := func(name string, annotations map[string]string) *v1alpha2.NodeGroup {
		return &v1alpha2.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Spec: v1alpha2.NodeGroupSpec{NodeType: v1alpha2.NodeTypeHybrid}}
	}
	nodeType := func(t *testing.T, env *ngEnv, name string) ngv1.NodeType {
		ng := &ngv1.NodeGroup{}
		env.get(t, name, ng)
		return ng.Spec.NodeType
	}

	// listed is the group the provider configuration names; the others are
	// of this run too, except master, whose name is the rule.
	listed, another, pinned, unpinned, edge := ngName("front-nm"), ngName("another"), ngName("pinned"), ngName("unpinned"), ngName("edge")

	t.Run("secret absent", func(t *testing.T) {
		env := startNodeGroup(t)
		env.create(t, hybrid(ngv1.MasterNodeGroup, nil))
		env.create(t, hybrid(listed, nil))
		env.create(t, hybrid(pinned, map[string]string{ngv1.PermanentNodeGroupAnnotation: "true"}))
		for name, want := range map[string]ngv1.NodeType{ngv1.MasterNodeGroup: ngv1.NodeTypeCloudPermanent, listed: ngv1.NodeTypeCloudStatic, pinned: ngv1.NodeTypeCloudPermanent} {
			if got := nodeType(t, env, name); got != want {
				t.Errorf("%s: %s, want %s", name, got, want)
			}
		}
	})

	t.Run("secret present", func(t *testing.T) {
		putSecret(t, "d8-provider-cluster-configuration", map[string]string{"cloud-provider-cluster-configuration.yaml": providerConfigListing(listed)})
		env := startNodeGroup(t)
		env.create(t, hybrid(listed, nil))
		env.create(t, hybrid(another, nil))
		env.create(t, hybrid(unpinned, map[string]string{ngv1.PermanentNodeGroupAnnotation: "false"}))
		for name, want := range map[string]ngv1.NodeType{listed: ngv1.NodeTypeCloudPermanent, another: ngv1.NodeTypeCloudStatic, unpinned: ngv1.NodeTypeCloudStatic} {
			if got := nodeType(t, env, name); got != want {
				t.Errorf("%s: %s, want %s", name, got, want)
			}
		}
		// Read and written back through v1alpha2, a group keeps its exact type.
		read := &v1alpha2.NodeGroup{}
		env.get(t, listed, read)
		read.Labels = map[string]string{"touched": "yes"}
		if err := env.c.Update(context.Background(), read); err != nil {
			t.Fatal(err)
		}
		if got := nodeType(t, env, listed); got != ngv1.NodeTypeCloudPermanent {
			t.Fatalf("%s became %s", listed, got)
		}
	})

	t.Run("secret unparsable", func(t *testing.T) {
		putSecret(t, "d8-provider-cluster-configuration", map[string]string{"cloud-provider-cluster-configuration.yaml": "nodeGroups: [name: {"})
		env := startNodeGroup(t)
		err := env.c.Create(context.Background(), hybrid(edge, nil))
		if err == nil {
			deleteNodeGroup(t, edge)
		}
		want := "Secret kube-system/d8-provider-cluster-configuration key cloud-provider-cluster-configuration.yaml"
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf(`object 0 (NodeGroup %q, deckhouse.io/v1alpha2)`, edge)) {
			t.Fatalf("create of a Hybrid group: %v, want a conversion failure naming %q", err, want)
		}
		// Groups that need no lookup are unaffected.
		env.create(t, hybrid(ngv1.MasterNodeGroup, nil))
	})
}

func TestNodeGroupChecksDenyThroughTheAPI(t *testing.T) {
	putSecret(t, "d8-cluster-configuration", map[string]string{"cluster-configuration.yaml": "apiVersion: deckhouse.io/v1\nkind: ClusterConfiguration\n" +
		"clusterType: Cloud\ncloud:\n  provider: OpenStack\n  prefix: " + strings.Repeat("p", 22) + "\ndefaultCRI: Containerd\npodSubnetNodeCIDRPrefix: \"24\"\n"})
	putSecret(t, "d8-provider-cluster-configuration", map[string]string{
		"cloud-provider-cluster-configuration.yaml": openStackProviderConfig,
		"cloud-provider-discovery-data.json":        `{"zones":["nova","az-2"]}`,
	})
	installModuleConfigCRD(t)
	putModuleConfigGlobal(t, "gpu")
	// Names stay within 19 characters: the cluster prefix of 22 leaves no
	// more to a group created here (check 1).
	//
	// Groups and nodes of this run: custom runs nodes with a custom
	// containerd configuration, legacy one that cannot run ContainerdV2.
	custom, legacy := ngName("custom"), ngName("legacy")
	putNode(t, custom+"-1", map[string]string{"node.deckhouse.io/group": custom, "node.deckhouse.io/containerd-config": "custom"})
	putNode(t, custom+"-2", map[string]string{"node.deckhouse.io/group": custom, "node.deckhouse.io/containerd": "custom"})
	putNode(t, legacy+"-1", map[string]string{"node.deckhouse.io/group": legacy, "node.deckhouse.io/containerd-v2-unsupported": ""})
	env := startNodeGroup(t)
	ctx := context.Background()

	static := func(name string, mutate ...func(*ngv1.NodeGroup)) *ngv1.NodeGroup {
		ng := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic}}
		for _, m := range mutate {
			m(ng)
		}
		return ng
	}
	ephemeral := func(name string, minPerZone, maxPerZone int32, zones ...string) *ngv1.NodeGroup {
		return &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeCloudEphemeral,
			CloudInstances: &ngv1.CloudInstancesSpec{MinPerZone: minPerZone, MaxPerZone: maxPerZone, Zones: zones, ClassReference: classRef()}}}
	}
	withCRI := func(t ngv1.CRIType) func(*ngv1.NodeGroup) {
		return func(ng *ngv1.NodeGroup) { ng.Spec.CRI = &ngv1.CRISpec{Type: t} }
	}
	withTaints := func(keys ...string) func(*ngv1.NodeGroup) {
		return func(ng *ngv1.NodeGroup) {
			ng.Spec.NodeTemplate = &ngv1.NodeTemplate{}
			for _, k := range keys {
				ng.Spec.NodeTemplate.Taints = append(ng.Spec.NodeTemplate.Taints, ngv1.Taint{Key: k, Effect: "NoSchedule"})
			}
		}
	}
	withKubelet := func(k ngv1.KubeletSpec) func(*ngv1.NodeGroup) {
		return func(ng *ngv1.NodeGroup) { ng.Spec.Kubelet = &k }
	}

	creates := []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"1 name too long for the cluster prefix", ephemeral(strings.Repeat("n", 20), 1, 2),
			[]string{"it is forbidden for this cluster to set (cluster prefix + node group name) longer then 42 symbols"}},
		{"2 maxPerZone below minPerZone", ephemeral(ngName("min-max"), 3, 2), []string{"it is forbidden to set maxPerZone lower than minPerZone for NodeGroup"}},
		{"3 unknown zone", ephemeral(ngName("zones"), 1, 2, "nova", "mars"), []string{`unknown zone "mars"`}},
		{"4 Docker", static(ngName("docker"), withCRI(ngv1.CRITypeDocker)), []string{"it is forbidden to set cri type to Docker"}},
		{"6 taint not tolerated", static(ngName("taints"), withTaints("gpu", "other")),
			[]string{"it is forbidden to create a NodeGroup resource with taints not specified in global.modules.placement.customTolerationKeys in Deckhouse ConfigMap, add: other to customTolerationKeys."}},
		{"7 v1alpha1 containerd without type Containerd", &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: ngName("alpha1-cri")},
			Spec: v1alpha1.NodeGroupSpec{NodeType: v1alpha1.NodeTypeStatic, CRI: &v1alpha1.CRISpec{Type: v1alpha1.CRITypeNotManaged, Containerd: &v1alpha1.ContainerdSpec{}}}},
			[]string{`it is forbidden to create NodeGroup resource with set .spec.cri.containerd and without .spec.cri.type="Containerd"`}},
		{"8 RollingUpdate on Static", static(ngName("rolling"), func(ng *ngv1.NodeGroup) {
			ng.Spec.Disruptions = &ngv1.DisruptionsSpec{ApprovalMode: ngv1.ApprovalModeRollingUpdate}
		}), []string{`it is forbidden to change NodeGroup resource with set .spec.disruptions.approvalMode to "RollingUpdate" when spec.nodeType is not "CloudEphemeral"`}},
		{"10 duplicate taints", static(ngName("dup-taints"), withTaints("gpu", "gpu")), []string{".spec.nodeTemplate.taints must contains only one taint with the same key and effect"}},
		{"11 topology manager without reservation", static(ngName("topo-off"), withKubelet(ngv1.KubeletSpec{
			ResourceReservation: &ngv1.ResourceReservation{Mode: ngv1.ResourceReservationModeOff}, TopologyManager: &ngv1.TopologyManager{Enabled: ptr.To(true)}})),
			[]string{".spec.kubelet.resourceReservation must be enabled for .spec.kubelet.topologyManager.enabled to work"}},
		{"12 static reservation without cpu", static(ngName("topo-static"), withKubelet(ngv1.KubeletSpec{
			ResourceReservation: &ngv1.ResourceReservation{Mode: ngv1.ResourceReservationModeStatic, Static: &ngv1.StaticResourceReservation{Memory: ptr.To(intstr.FromString("1Gi"))}},
			TopologyManager:     &ngv1.TopologyManager{Enabled: ptr.To(true)}})),
			[]string{`.spec.kubelet.resourceReservation.static.cpu must be specified when .spec.kubelet.topologyManager.enabled is true and .spec.kubelet.resourceReservation.mode is "Static"`}},
		{"every denial of a request at once", static(ngName("many"), withCRI(ngv1.CRITypeDocker), withTaints("other", "other")),
			[]string{"it is forbidden to set cri type to Docker\nit is forbidden to create a NodeGroup resource with taints not specified in global.modules.placement.customTolerationKeys in Deckhouse ConfigMap, add: other to customTolerationKeys.\n.spec.nodeTemplate.taints must contains only one taint with the same key and effect"}},
	}
	for _, tc := range creates {
		t.Run(tc.name, func(t *testing.T) {
			err := env.c.Create(ctx, tc.obj)
			if err == nil {
				deleteNodeGroup(t, tc.obj.GetName())
				t.Fatal("admitted")
			}
			for _, want := range append([]string{policyDenied}, tc.want...) {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("denial %q lacks %q", err, want)
				}
			}
		})
	}

	immutable := ngName("immutable")
	updates := []struct {
		name          string
		before, after *ngv1.NodeGroup
		want          string
	}{
		{"9 nodeType is immutable", static(immutable), static(immutable, func(ng *ngv1.NodeGroup) { ng.Spec.NodeType = ngv1.NodeTypeCloudStatic }),
			".spec.nodeType field is immutable"},
		{"13 runtime change on nodes with custom containerd", static(custom, withCRI(ngv1.CRITypeContainerd)), static(custom, withCRI(ngv1.CRITypeContainerdV2)),
			fmt.Sprintf("CRI cannot be changed because some nodes are using custom configuration: %s-1, %s-2", custom, custom)},
		{"14 ContainerdV2 on nodes that cannot run it", static(legacy), static(legacy, withCRI(ngv1.CRITypeContainerdV2)),
			fmt.Sprintf(`It is forbidden for NodeGroup %q to use CRI ContainerdV2 because it contains nodes that do not support ContainerdV2. You can list them with: kubectl get node -l node.deckhouse.io/containerd-v2-unsupported,node.deckhouse.io/group=%s`, legacy, legacy)},
		{"16 limited swap on nodes without cgroup v2", static(legacy), static(legacy, withKubelet(ngv1.KubeletSpec{MemorySwap: &ngv1.MemorySwap{
			SwapBehavior: ngv1.SwapBehaviorLimitedSwap, LimitedSwap: &ngv1.LimitedSwap{Size: "2G"}}})),
			fmt.Sprintf(`memorySwap requires cgroup v2, but NodeGroup %q contains nodes where cgroup v2 is not supported`, legacy)},
	}
	for _, tc := range updates {
		t.Run(tc.name, func(t *testing.T) {
			env.create(t, tc.before)
			current := &ngv1.NodeGroup{}
			env.get(t, tc.before.Name, current)
			current.Spec = tc.after.Spec
			err := env.c.Update(ctx, current)
			if err == nil || !strings.Contains(err.Error(), policyDenied) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("update: %v, want a denial with %q", err, tc.want)
			}
		})
	}

	t.Run("9 nodeType through v1alpha2", func(t *testing.T) {
		name := ngName("via-alpha2")
		env.create(t, &v1alpha2.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha2.NodeGroupSpec{NodeType: v1alpha2.NodeTypeHybrid}})
		ng := &v1alpha2.NodeGroup{}
		env.get(t, name, ng)
		ng.Spec.NodeType = v1alpha2.NodeTypeStatic
		if err := env.c.Update(ctx, ng); err == nil || !strings.Contains(err.Error(), ".spec.nodeType field is immutable") {
			t.Fatalf("update: %v", err)
		}
	})

	t.Run("5 and 15 warn and admit", func(t *testing.T) {
		env.warnings.take()
		env.create(t, static(ngv1.MasterNodeGroup, withKubelet(ngv1.KubeletSpec{MaxPods: ptr.To[int32](200)})))
		got := strings.Join(env.warnings.take(), "\n")
		if want := ".spec.kubelet.maxPods (200) is too high: each pod may need 2 IPs (one terminating + one starting), but only 253 IPs available in podSubnetNodeCIDRPrefix /24"; !strings.Contains(got, want) {
			t.Fatalf("warnings %q lack %q", got, want)
		}
		master := &ngv1.NodeGroup{}
		env.get(t, ngv1.MasterNodeGroup, master)
		master.Spec.CRI = &ngv1.CRISpec{Type: ngv1.CRITypeContainerdV2}
		if err := env.c.Update(ctx, master); err != nil {
			t.Fatalf("a warning must not deny: %v", err)
		}
		got = strings.Join(env.warnings.take(), "\n")
		if want := "it is disruptive to change cri.type in master node group for cluster with apiserver endpoints < 3"; !strings.Contains(got, want) {
			t.Fatalf("warnings %q lack %q", got, want)
		}
	})

	t.Run("allowed", func(t *testing.T) {
		env.create(t, ephemeral(ngName("fine"), 1, 2, "nova"))
		env.create(t, static(ngName("tolerated"), withTaints("gpu", "dedicated")))
		env.create(t, &v1alpha2.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: ngName("rolling")}, Spec: v1alpha2.NodeGroupSpec{
			NodeType:       v1alpha2.NodeTypeCloud,
			CloudInstances: &v1alpha2.CloudInstancesSpec{MinPerZone: 1, MaxPerZone: 1, ClassReference: v1alpha2.ClassReference{Kind: "OpenStackInstanceClass", Name: "w"}},
			Disruptions:    &v1alpha2.DisruptionsSpec{ApprovalMode: "RollingUpdate"},
		}})
	})
}

// The ModuleConfig CRD may arrive after Gatehouse: until then no custom
// toleration keys exist; once it and ModuleConfig global exist, their keys
// count, and once it is gone they no longer do, without a restart.
func TestNodeGroupModuleConfigInstalledLater(t *testing.T) {
	env := startNodeGroup(t)
	probe := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "gpu-tainted"}, Spec: ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic,
		NodeTemplate: &ngv1.NodeTemplate{Taints: []ngv1.Taint{{Key: "gpu", Effect: "NoSchedule"}}}}}
	err := env.c.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "add: gpu to customTolerationKeys.") {
		t.Fatalf("without ModuleConfig: %v", err)
	}
	installModuleConfigCRD(t)
	putModuleConfigGlobal(t, "gpu")
	eventually(t, "the taint key of ModuleConfig global is tolerated", func() error {
		return env.c.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)
	})

	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "moduleconfigs.deckhouse.io"}}
	if err := controlPlane.Client.Delete(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the taint key is refused again without the CRD", func() error {
		err := env.c.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "add: gpu to customTolerationKeys.") {
			return fmt.Errorf("create: %v", err)
		}
		return nil
	})
}

// The generated CRD carries the upstream schema rules; the API server
// enforces them before any webhook runs.
func TestNodeGroupSchemaRules(t *testing.T) {
	c := ngClient(t, nil)
	ctx := context.Background()
	v1Group := func(name string, spec ngv1.NodeGroupSpec) *ngv1.NodeGroup {
		return &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	cloud := &ngv1.CloudInstancesSpec{MinPerZone: 1, MaxPerZone: 1, ClassReference: classRef()}
	window := func(from, day string) *ngv1.DisruptionsSpec {
		return &ngv1.DisruptionsSpec{ApprovalMode: ngv1.ApprovalModeAutomatic, Automatic: &ngv1.AutomaticDisruptions{
			Windows: []ngv1.DisruptionWindow{{From: from, To: "06:00", Days: []ngv1.Weekday{ngv1.Weekday(day)}}}}}
	}
	refused := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"name over 42 characters", v1Group(strings.Repeat("a", 43), ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic}), "metadata.name must be at most 42 characters long"},
		{"name with capitals", v1Group("Workers", ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic}), "metadata.name must consist of lower case alphanumeric characters"},
		{"CloudEphemeral without cloudInstances", v1Group("eph", ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeCloudEphemeral}), "cloudInstances is required when nodeType is CloudEphemeral"},
		{"Static with cloudInstances", v1Group("static-cloud", ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic, CloudInstances: cloud}), "cloudInstances is forbidden when nodeType is Static or CloudStatic"},
		{"CloudPermanent with staticInstances", v1Group("perm-static", ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeCloudPermanent, StaticInstances: &ngv1.StaticInstancesSpec{}}),
			"staticInstances is forbidden when nodeType is CloudEphemeral or CloudPermanent"},
		{"containerd block with another type", v1Group("cri-mix", ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic, CRI: &ngv1.CRISpec{Type: ngv1.CRITypeNotManaged, Containerd: &ngv1.ContainerdSpec{}}}),
			"containerd may be set only when type is Containerd"},
		{"window at 25:00", v1Group("late", ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic, Disruptions: window("25:00", "Mon")}), "spec.disruptions.automatic.windows[0].from"},
		{"window on Monday", v1Group("monday", ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic, Disruptions: window("1:00", "Monday")}), `Unsupported value: "Monday"`},
		{"v1alpha2 has no ContainerdV2", &v1alpha2.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "v2"}, Spec: v1alpha2.NodeGroupSpec{NodeType: v1alpha2.NodeTypeStatic, CRI: &v1alpha2.CRISpec{Type: "ContainerdV2"}}},
			`Unsupported value: "ContainerdV2"`},
		{"v1alpha2 chaos period in hours and minutes", &v1alpha2.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "chaos"}, Spec: v1alpha2.NodeGroupSpec{NodeType: v1alpha2.NodeTypeStatic, Chaos: &v1alpha2.ChaosSpec{Period: "2h30m"}}},
			"spec.chaos.period"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Create(ctx, tc.obj, client.DryRunAll)
			if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create: %v, want Invalid with %q", err, tc.want)
			}
		})
	}
	if err := c.Create(ctx, v1Group("chaos", ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic, Chaos: &ngv1.ChaosSpec{Period: "2h30m"}, Disruptions: window("1:00", "Fri")}), client.DryRunAll); err != nil {
		t.Fatalf("v1 refused a valid period and window: %v", err)
	}

	t.Run("staticInstances.labelSelector can be added but not changed or removed", func(t *testing.T) {
		ng := v1Group(ngName("static-selector"), ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeCloudStatic, StaticInstances: &ngv1.StaticInstancesSpec{}})
		if err := c.Create(ctx, ng); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteNodeGroup(t, ng.Name) })
		ng.Spec.StaticInstances.LabelSelector = &ngv1.StaticInstancesLabelSelector{MatchLabels: map[string]string{"pool": "a"}}
		if err := c.Update(ctx, ng); err != nil {
			t.Fatalf("adding a selector: %v", err)
		}
		for _, change := range []*ngv1.StaticInstancesLabelSelector{{MatchLabels: map[string]string{"pool": "b"}}, nil} {
			changed := ng.DeepCopy()
			changed.Spec.StaticInstances.LabelSelector = change
			err := c.Update(ctx, changed)
			if err == nil || !strings.Contains(err.Error(), "spec.staticInstances.labelSelector can be added but cannot be modified once set") {
				t.Fatalf("changing the selector to %v: %v", change, err)
			}
		}
	})
}
