package nodegroup

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha2"
)

// openStackConfig is the provider cluster configuration of Deckhouse's own
// conversion tests: one permanent group, front-nm.
const openStackConfig = `apiVersion: deckhouse.io/v1
kind: OpenStackClusterConfiguration
layout: Standard
sshPublicKey: ssh-rsa AAAA
masterNodeGroup:
  replicas: 1
  instanceClass:
    flavorName: m1.large
    imageName: ubuntu-22-04
nodeGroups:
- name: front-nm
  replicas: 2
  instanceClass:
    flavorName: m1.large
    imageName: ubuntu-22-04
provider:
  authURL: https://cloud.example.com/v3/
  domainName: Default
`

func providerWith(data map[string]string) providerState {
	secret := &corev1.Secret{Data: map[string][]byte{}}
	for k, v := range data {
		secret.Data[k] = []byte(v)
	}
	return parseProviderSecret(secret)
}

var (
	withOpenStackConfig = providerWith(map[string]string{providerConfigKey: openStackConfig})
	noProviderSecret    = parseProviderSecret(nil)
)

func review(desired string, objects ...string) *apiextensionsv1.ConversionRequest {
	req := &apiextensionsv1.ConversionRequest{UID: "uid", DesiredAPIVersion: desired}
	for _, o := range objects {
		req.Objects = append(req.Objects, runtime.RawExtension{Raw: []byte(o)})
	}
	return req
}

func nodeGroupJSON(apiVersion, name, spec string) string {
	return fmt.Sprintf(`{"apiVersion":%q,"kind":"NodeGroup","metadata":{"name":%q},"spec":%s}`, apiVersion, name, spec)
}

func convert(t *testing.T, lookup v1.CloudPermanentLookup, req *apiextensionsv1.ConversionRequest) []runtime.RawExtension {
	t.Helper()
	out, err := (&converter{lookup: lookup}).Convert(context.Background(), req)
	if err != nil {
		t.Fatalf("conversion failed: %v", err)
	}
	if len(out) != len(req.Objects) {
		t.Fatalf("%d objects for %d", len(out), len(req.Objects))
	}
	return out
}

func decodeAs[T any](t *testing.T, raw runtime.RawExtension) *T {
	t.Helper()
	out := new(T)
	if err := json.Unmarshal(raw.Raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Deckhouse's Python hook moved docker into cri.docker whatever the type;
// v1alpha2, like v1, allows cri.docker only beside type Docker, so a
// docker block beside no type rides in the conversion data instead.
func TestAlpha1ToAlpha2KeepsWhatAlpha2Lacks(t *testing.T) {
	out := convert(t, noProviderSecret, review(alpha2Version, nodeGroupJSON(alpha1Version, "worker",
		`{"nodeType":"Cloud","kubernetesVersion":"1.33","static":{"internalNetworkCIDRs":["10.0.0.0/8"]},
		  "docker":{"maxConcurrentDownloads":4},"kubelet":{"maxPods":100},
		  "cloudInstances":{"minPerZone":1,"maxPerZone":2,"classReference":{"kind":"OpenStackInstanceClass","name":"worker"}}}`)))
	ng := decodeAs[v1alpha2.NodeGroup](t, out[0])
	if ng.APIVersion != alpha2Version || ng.Kind != kind {
		t.Fatalf("typeMeta %s %s", ng.APIVersion, ng.Kind)
	}
	if ng.Spec.NodeType != v1alpha2.NodeTypeCloud || ng.Spec.CRI != nil || *ng.Spec.Kubelet.MaxPods != 100 {
		t.Fatalf("spec %s", out[0].Raw)
	}
	spec := map[string]any{}
	_ = json.Unmarshal(out[0].Raw, &struct {
		Spec *map[string]any `json:"spec"`
	}{&spec})
	for _, gone := range []string{"docker", "kubernetesVersion", "static"} {
		if _, ok := spec[gone]; ok {
			t.Errorf("spec.%s is still there: %s", gone, out[0].Raw)
		}
	}
	if got := ng.Annotations[v1.ConversionDataAnnotation]; got != `{"v1alpha1":{"kubernetesVersion":"1.33","static":{"internalNetworkCIDRs":["10.0.0.0/8"]},"docker":{"maxConcurrentDownloads":4}}}` {
		t.Fatalf("conversion data %s", got)
	}
}

func TestAlpha1ToAlpha2MovesDockerBesideTypeDocker(t *testing.T) {
	out := convert(t, noProviderSecret, review(alpha2Version, nodeGroupJSON(alpha1Version, "worker",
		`{"nodeType":"Static","cri":{"type":"Docker"},"docker":{"maxConcurrentDownloads":4}}`)))
	ng := decodeAs[v1alpha2.NodeGroup](t, out[0])
	if ng.Spec.CRI == nil || ng.Spec.CRI.Type != v1alpha2.CRITypeDocker || ng.Spec.CRI.Docker == nil || *ng.Spec.CRI.Docker.MaxConcurrentDownloads != 4 {
		t.Fatalf("spec %s", out[0].Raw)
	}
	if _, ok := ng.Annotations[v1.ConversionDataAnnotation]; ok {
		t.Fatalf("conversion data left: %s", out[0].Raw)
	}
}

func TestAlpha2ToAlpha1MovesCRIDockerAndKeepsTheType(t *testing.T) {
	out := convert(t, noProviderSecret, review(alpha1Version, nodeGroupJSON(alpha2Version, "worker",
		`{"nodeType":"Static","cri":{"type":"Docker","docker":{"maxConcurrentDownloads":3,"manage":true}}}`)))
	ng := decodeAs[v1alpha1.NodeGroup](t, out[0])
	if ng.Spec.Docker == nil || *ng.Spec.Docker.MaxConcurrentDownloads != 3 || !*ng.Spec.Docker.Manage {
		t.Fatalf("docker not moved: %s", out[0].Raw)
	}
	if ng.Spec.CRI == nil || ng.Spec.CRI.Type != v1alpha1.CRITypeDocker {
		t.Fatalf("cri.type lost: %s", out[0].Raw)
	}
	if strings.Contains(string(out[0].Raw), `"cri":{"type":"Docker","docker"`) {
		t.Fatalf("cri.docker left behind: %s", out[0].Raw)
	}
}

// Deckhouse's Python hook left "cri": {} behind when docker was all of
// spec.cri; v1alpha1 has no cri.docker, so Gatehouse leaves no empty block.
func TestAlpha2ToAlpha1WithDockerOnly(t *testing.T) {
	out := convert(t, noProviderSecret, review(alpha1Version, nodeGroupJSON(alpha2Version, "worker",
		`{"nodeType":"Static","cri":{"docker":{"manage":false}}}`)))
	if got := string(out[0].Raw); !strings.Contains(got, `"docker":{"manage":false}`) || strings.Contains(got, `"cri"`) {
		t.Fatalf("converted %s", got)
	}
}

func TestAlpha2ToV1ResolvesHybridFromTheProviderConfiguration(t *testing.T) {
	out := convert(t, withOpenStackConfig, review(hubVersion,
		nodeGroupJSON(alpha2Version, "worker", `{"nodeType":"Cloud","cri":{"type":"Containerd","containerd":{"maxConcurrentDownloads":2}},
			"cloudInstances":{"minPerZone":1,"maxPerZone":3,"classReference":{"kind":"OpenStackInstanceClass","name":"worker"}}}`),
		nodeGroupJSON(alpha2Version, "master", `{"nodeType":"Hybrid"}`),
		nodeGroupJSON(alpha2Version, "front-nm", `{"nodeType":"Hybrid"}`),
		nodeGroupJSON(alpha2Version, "another", `{"nodeType":"Hybrid"}`),
		nodeGroupJSON(alpha2Version, "backend", `{"nodeType":"Static"}`),
	))
	want := []struct {
		name     string
		nodeType v1.NodeType
	}{
		{"worker", v1.NodeTypeCloudEphemeral}, {"master", v1.NodeTypeCloudPermanent}, {"front-nm", v1.NodeTypeCloudPermanent},
		{"another", v1.NodeTypeCloudStatic}, {"backend", v1.NodeTypeStatic},
	}
	for i, w := range want {
		ng := decodeAs[v1.NodeGroup](t, out[i])
		if ng.Name != w.name || ng.Spec.NodeType != w.nodeType || ng.APIVersion != hubVersion {
			t.Errorf("object %d: %s %s %s, want %s %s", i, ng.APIVersion, ng.Name, ng.Spec.NodeType, w.name, w.nodeType)
		}
		if _, ok := ng.Annotations[v1.ConversionDataAnnotation]; ok {
			t.Errorf("object %d carries conversion data into v1: %s", i, out[i].Raw)
		}
	}
	worker := decodeAs[v1.NodeGroup](t, out[0])
	if worker.Spec.CRI.Type != v1.CRITypeContainerd || *worker.Spec.CRI.Containerd.MaxConcurrentDownloads != 2 ||
		worker.Spec.CloudInstances.ClassReference != (v1.ClassReference{Kind: "OpenStackInstanceClass", Name: "worker"}) {
		t.Fatalf("cri or classReference changed: %s", out[0].Raw)
	}
}

func TestV1ToAlpha2FourObjectBatchKeepsOrderLabelsAndStatus(t *testing.T) {
	objects := []string{
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"master","labels":{"role":"control-plane"}},"spec":{"nodeType":"CloudPermanent"},"status":{"ready":1,"nodes":1,"conditionSummary":{"ready":"True","statusMessage":""}}}`,
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"worker"},"spec":{"nodeType":"Static"},"status":{"ready":2}}`,
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"worker-small-a2"},"spec":{"nodeType":"CloudEphemeral","cloudInstances":{"minPerZone":0,"maxPerZone":5,"classReference":{"kind":"AWSInstanceClass","name":"small"}}}}`,
		`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"worker-static"},"spec":{"nodeType":"CloudStatic"}}`,
	}
	out := convert(t, noProviderSecret, review(alpha2Version, objects...))
	want := []struct {
		name     string
		nodeType v1alpha2.NodeType
	}{{"master", v1alpha2.NodeTypeHybrid}, {"worker", v1alpha2.NodeTypeStatic}, {"worker-small-a2", v1alpha2.NodeTypeCloud}, {"worker-static", v1alpha2.NodeTypeHybrid}}
	for i, w := range want {
		ng := decodeAs[v1alpha2.NodeGroup](t, out[i])
		if ng.Name != w.name || ng.Spec.NodeType != w.nodeType {
			t.Errorf("object %d: %s %s, want %s %s", i, ng.Name, ng.Spec.NodeType, w.name, w.nodeType)
		}
	}
	master := decodeAs[v1alpha2.NodeGroup](t, out[0])
	if master.Labels["role"] != "control-plane" || *master.Status.Ready != 1 || master.Status.ConditionSummary.Ready != "True" {
		t.Fatalf("labels or status lost: %s", out[0].Raw)
	}
	if got := decodeAs[v1alpha2.NodeGroup](t, out[2]).Spec.CloudInstances.MinPerZone; got != 0 || !strings.Contains(string(out[2].Raw), `"minPerZone":0`) {
		t.Fatalf("required minPerZone 0 dropped: %s", out[2].Raw)
	}
}

func TestObjectsAlreadyInTheDesiredVersionPassUntouched(t *testing.T) {
	in := `{"kind":"NodeGroup","apiVersion":"deckhouse.io/v1alpha2", "metadata":{"name":"w"},"spec":{"nodeType":"Cloud"}}`
	out := convert(t, noProviderSecret, review(alpha2Version, in))
	if string(out[0].Raw) != in {
		t.Fatalf("changed to %s", out[0].Raw)
	}
}

func TestMissingProviderSecretMeansOnlyMasterIsPermanent(t *testing.T) {
	out := convert(t, noProviderSecret, review(hubVersion,
		nodeGroupJSON(alpha1Version, "master", `{"nodeType":"Hybrid"}`),
		nodeGroupJSON(alpha1Version, "front-nm", `{"nodeType":"Hybrid"}`),
		`{"apiVersion":"deckhouse.io/v1alpha1","kind":"NodeGroup","metadata":{"name":"pinned","annotations":{"node.deckhouse.io/permanent-node-group":"true"}},"spec":{"nodeType":"Hybrid"}}`,
	))
	for i, want := range []v1.NodeType{v1.NodeTypeCloudPermanent, v1.NodeTypeCloudStatic, v1.NodeTypeCloudPermanent} {
		if got := decodeAs[v1.NodeGroup](t, out[i]).Spec.NodeType; got != want {
			t.Errorf("object %d: %s, want %s", i, got, want)
		}
	}
}

func TestReviewFailures(t *testing.T) {
	unparsable := providerWith(map[string]string{providerConfigKey: "nodeGroups: [name: {"})
	notLoaded := lookupFunc(func(string) (bool, error) {
		return false, fmt.Errorf("Secret kube-system/d8-provider-cluster-configuration: %w", errNotLoaded)
	})
	cases := []struct {
		name   string
		lookup v1.CloudPermanentLookup
		req    *apiextensionsv1.ConversionRequest
		want   []string
	}{
		{"unparsable provider configuration", unparsable, review(hubVersion,
			nodeGroupJSON(alpha2Version, "cloud", `{"nodeType":"Cloud","cloudInstances":{"minPerZone":1,"maxPerZone":1,"classReference":{}}}`),
			nodeGroupJSON(alpha2Version, "edge", `{"nodeType":"Hybrid"}`),
			nodeGroupJSON(alpha2Version, "edge-2", `{"nodeType":"Hybrid"}`)),
			[]string{"failed for 2 of 3 objects", `object 1 (NodeGroup "edge", deckhouse.io/v1alpha2): decide whether Hybrid NodeGroup "edge" is CloudPermanent or CloudStatic: Secret kube-system/d8-provider-cluster-configuration key cloud-provider-cluster-configuration.yaml:`, `object 2 (NodeGroup "edge-2"`}},
		{"provider configuration not loaded yet", notLoaded, review(hubVersion,
			nodeGroupJSON(alpha2Version, "master", `{"nodeType":"Hybrid"}`),
			nodeGroupJSON(alpha2Version, "edge", `{"nodeType":"Hybrid"}`)),
			[]string{"failed for 1 of 2 objects", `object 1 (NodeGroup "edge", deckhouse.io/v1alpha2)`, "not loaded yet", "retry"}},
		{"unsupported desired version", withOpenStackConfig, review("deckhouse.io/v2", nodeGroupJSON(hubVersion, "w", `{"nodeType":"Static"}`)),
			[]string{`desiredAPIVersion "deckhouse.io/v2" is not a served NodeGroup version`}},
		{"unsupported source version", withOpenStackConfig, review(hubVersion,
			nodeGroupJSON(hubVersion, "ok", `{"nodeType":"Static"}`), nodeGroupJSON("deckhouse.io/v1beta9", "odd", `{"nodeType":"Static"}`)),
			[]string{`object 1 (NodeGroup "odd", deckhouse.io/v1beta9): apiVersion "deckhouse.io/v1beta9" is not a served NodeGroup version`}},
		{"another kind", withOpenStackConfig, review(hubVersion, `{"apiVersion":"deckhouse.io/v1alpha1","kind":"ModuleConfig","metadata":{"name":"global"}}`),
			[]string{`object 0 (ModuleConfig "global") is not a NodeGroup`}},
		{"field the types do not know", withOpenStackConfig, review(hubVersion, nodeGroupJSON(alpha2Version, "w", `{"nodeType":"Static","gpu":{"sharing":"MIG"}}`)),
			[]string{`object 0 (NodeGroup "w", deckhouse.io/v1alpha2): decode: json: unknown field "gpu"`}},
		{"not JSON", withOpenStackConfig, review(hubVersion, `{"apiVersion":`),
			[]string{"object 0 is not a JSON object"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&converter{lookup: tc.lookup}).Convert(context.Background(), tc.req)
			if err == nil {
				t.Fatal("the review succeeded")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// A v1 object read and written back through each older version comes back
// identical, through the same JSON the API server exchanges.
func TestV1ObjectSurvivesAReadWriteThroughEachOlderVersion(t *testing.T) {
	stored := `{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"gpu","labels":{"a":"b"}},` +
		`"spec":{"nodeType":"CloudStatic","cri":{"type":"ContainerdV2","containerdV2":{"maxConcurrentDownloads":5}},` +
		`"gpu":{"sharing":"TimeSlicing","timeSlicing":{"partitionCount":4}},"fencing":{"mode":"Watchdog"},"update":{"maxConcurrent":"25%"},` +
		`"staticInstances":{"count":2,"labelSelector":{"matchLabels":{"pool":"gpu"}}},"nodeDrainTimeoutSecond":300,` +
		`"chaos":{"mode":"DrainAndDelete","period":"2h30m"},"kubelet":{"containerLogMaxSize":"50Mi","containerLogMaxFiles":4,` +
		`"resourceReservation":{"mode":"Auto"},"memorySwap":{"swapBehavior":"LimitedSwap","swappiness":60,"limitedSwap":{"size":"4G"}}}},` +
		`"status":{"ready":2,"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2025-03-04T05:06:07.891Z"}],` +
		`"deckhouse":{"synced":"True","observed":{"lastTimestamp":"2025-03-04T05:06:07Z","checkSum":"abc"}}}}`
	for _, version := range []string{alpha1Version, alpha2Version} {
		t.Run(version, func(t *testing.T) {
			down := convert(t, lookupNotConsulted, review(version, stored))
			up := convert(t, lookupNotConsulted, review(hubVersion, string(down[0].Raw)))
			if !jsonEqual(t, up[0].Raw, []byte(stored)) {
				t.Fatalf("through %s\nstored %s\n   got %s\nvia %s", version, stored, up[0].Raw, down[0].Raw)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

type lookupFunc func(string) (bool, error)

func (f lookupFunc) IsCloudPermanent(name string) (bool, error) { return f(name) }

var lookupNotConsulted = lookupFunc(func(string) (bool, error) {
	return false, fmt.Errorf("the provider configuration was consulted")
})
