package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha2"
)

// Documented denials (internal/nodegroup/doc.go, examples/nodegroup).
const (
	msgStaticSelector    = ".spec.staticInstances.labelSelector can be added but cannot be modified or removed once set. To change it, create a new NodeGroup"
	msgDockerWithoutType = "docker may be set only when type is Docker; a docker block stored without it by an older conversion may stay unchanged or be removed"
)

// A Static or CloudStatic group's StaticInstance selector, once set, cannot
// be swapped in two writes (drop spec.staticInstances, which the schema's
// rule on that block does not see, then add another), in any version.
// Through the older versions the block rides in the conversion-data
// annotation: dropping or editing the annotation is the same attack.
func TestNodeGroupStaticInstancesSelectorKeptInEveryVersion(t *testing.T) {
	env := startNodeGroup(t)
	ctx := context.Background()
	poolA := &ngv1.StaticInstancesLabelSelector{MatchLabels: map[string]string{"pool": "a"}}
	for _, nodeType := range []ngv1.NodeType{ngv1.NodeTypeStatic, ngv1.NodeTypeCloudStatic} {
		t.Run(string(nodeType), func(t *testing.T) {
			name := ngName("selector")
			env.create(t, &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ngv1.NodeGroupSpec{NodeType: nodeType,
				StaticInstances: &ngv1.StaticInstancesSpec{Count: ptr.To[int32](1), LabelSelector: poolA}}})
			refused := func(t *testing.T, what string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s was admitted", what)
				}
				if !strings.Contains(err.Error(), policyDenied) || !strings.Contains(err.Error(), msgStaticSelector) {
					t.Fatalf("%s: %v, want the denial %q", what, err, msgStaticSelector)
				}
			}

			t.Run("v1 drops staticInstances, then adds another selector", func(t *testing.T) {
				ng := &ngv1.NodeGroup{}
				env.get(t, name, ng)
				ng.Spec.StaticInstances = nil
				refused(t, "dropping spec.staticInstances", env.c.Update(ctx, ng))
			})
			t.Run("v1 drops the selector beside the count", func(t *testing.T) {
				ng := &ngv1.NodeGroup{}
				env.get(t, name, ng)
				if ng.Spec.StaticInstances == nil {
					t.Fatal("spec.staticInstances is gone")
				}
				ng.Spec.StaticInstances.LabelSelector = nil
				// The schema's rule on the block answers first.
				if err := env.c.Update(ctx, ng); err == nil || !strings.Contains(err.Error(), "spec.staticInstances.labelSelector can be added but cannot be modified once set") {
					t.Fatalf("dropping the selector: %v", err)
				}
			})
			for _, version := range []struct {
				name string
				obj  func() client.Object
			}{
				{"v1alpha2", func() client.Object { return &v1alpha2.NodeGroup{} }},
				{"v1alpha1", func() client.Object { return &v1alpha1.NodeGroup{} }},
			} {
				t.Run(version.name+" drops the conversion data", func(t *testing.T) {
					old := version.obj()
					env.get(t, name, old)
					if !strings.Contains(old.GetAnnotations()[ngv1.ConversionDataAnnotation], `"staticInstances"`) {
						t.Fatalf("the %s view holds no staticInstances: %v", version.name, old.GetAnnotations())
					}
					old.SetAnnotations(nil)
					refused(t, "dropping the conversion data", env.c.Update(ctx, old))
				})
				t.Run(version.name+" edits the selector in the conversion data", func(t *testing.T) {
					old := version.obj()
					env.get(t, name, old)
					a := old.GetAnnotations()
					a[ngv1.ConversionDataAnnotation] = strings.Replace(a[ngv1.ConversionDataAnnotation], `"pool":"a"`, `"pool":"b"`, 1)
					old.SetAnnotations(a)
					refused(t, "editing the selector", env.c.Update(ctx, old))
				})
				t.Run(version.name+" read-modify-write keeps the selector", func(t *testing.T) {
					old := version.obj()
					env.get(t, name, old)
					old.SetLabels(map[string]string{"written-through": version.name})
					if err := env.c.Update(ctx, old); err != nil {
						t.Fatalf("a label through %s: %v", version.name, err)
					}
				})
			}

			after := &ngv1.NodeGroup{}
			env.get(t, name, after)
			if after.Spec.StaticInstances == nil || mustJSON(t, after.Spec.StaticInstances.LabelSelector) != mustJSON(t, poolA) {
				t.Fatalf("stored staticInstances %s, want the selector %s", mustJSON(t, after.Spec.StaticInstances), mustJSON(t, poolA))
			}
		})
	}

	t.Run("added later, then kept", func(t *testing.T) {
		name := ngName("selector-added")
		env.create(t, &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic}})
		ng := &ngv1.NodeGroup{}
		env.get(t, name, ng)
		ng.Spec.StaticInstances = &ngv1.StaticInstancesSpec{LabelSelector: poolA}
		if err := env.c.Update(ctx, ng); err != nil {
			t.Fatalf("adding a selector: %v", err)
		}
		env.get(t, name, ng)
		ng.Spec.StaticInstances = nil
		if err := env.c.Update(ctx, ng); err == nil || !strings.Contains(err.Error(), msgStaticSelector) {
			t.Fatalf("dropping the added selector: %v", err)
		}
	})
}

// A v1alpha1 group with spec.docker beside no cri.type (or another type)
// was stored as cri.docker without a type, which v1's rule flagged on
// every later write, down to kubectl label. Now the block rides in the
// conversion data: v1 writes pass without a warning, and every version
// reads what was written.
func TestNodeGroupDockerWrittenThroughV1alpha1KeepsV1Rules(t *testing.T) {
	env := startNodeGroup(t)
	ctx := context.Background()
	for _, cri := range []*v1alpha1.CRISpec{nil, {Type: v1alpha1.CRITypeContainerd}} {
		t.Run(fmt.Sprintf("cri %s", mustJSON(t, cri)), func(t *testing.T) {
			name := ngName("alpha1-docker")
			env.create(t, &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeGroupSpec{
				NodeType: v1alpha1.NodeTypeStatic, CRI: cri, Docker: &v1alpha1.DockerSpec{MaxConcurrentDownloads: ptr.To[int32](4)}}})
			env.warnings.take()

			hub := &ngv1.NodeGroup{}
			env.get(t, name, hub)
			if c := hub.Spec.CRI; c != nil && c.Docker != nil {
				t.Fatalf("stored cri %s: docker beside type %q breaks v1's rule", mustJSON(t, c), c.Type)
			}
			labelled := hub.DeepCopy()
			labelled.Labels = map[string]string{"team": "a"}
			if err := env.c.Patch(ctx, labelled, client.MergeFrom(hub)); err != nil {
				t.Fatalf("a label through v1: %v", err)
			}
			alpha2 := &v1alpha2.NodeGroup{}
			env.get(t, name, alpha2)
			alpha2.Labels["team"] = "b"
			if err := env.c.Update(ctx, alpha2); err != nil {
				t.Fatalf("a label through v1alpha2: %v", err)
			}
			if w := env.warnings.take(); len(w) > 0 {
				t.Fatalf("writes that do not touch spec.cri warned: %q", w)
			}

			alpha1 := &v1alpha1.NodeGroup{}
			env.get(t, name, alpha1)
			if alpha1.Spec.Docker == nil || *alpha1.Spec.Docker.MaxConcurrentDownloads != 4 || mustJSON(t, alpha1.Spec.CRI) != mustJSON(t, cri) {
				t.Fatalf("the v1alpha1 view lost what was written: docker %s cri %s", mustJSON(t, alpha1.Spec.Docker), mustJSON(t, alpha1.Spec.CRI))
			}
			alpha1.Spec.Docker.MaxConcurrentDownloads = ptr.To[int32](6)
			if err := env.c.Update(ctx, alpha1); err != nil {
				t.Fatalf("editing docker through v1alpha1: %v", err)
			}
			env.get(t, name, alpha1)
			if *alpha1.Spec.Docker.MaxConcurrentDownloads != 6 {
				t.Fatalf("docker after the edit: %s", mustJSON(t, alpha1.Spec.Docker))
			}
		})
	}
}

// A group stored by an older conversion (Gatehouse's before, Deckhouse's
// Python hook) holds cri.docker without cri.type. It is readable and
// writable through every version without a warning; only a change of the
// docker block itself is refused, with a message that says what to do.
func TestNodeGroupStoredLegacyDockerIsWritable(t *testing.T) {
	env := startNodeGroup(t)
	ctx := context.Background()
	name := ngName("legacy-docker")
	env.create(t, &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic}})
	storeAsOlderConversionsDid(t, name, func(spec map[string]any) {
		spec["cri"] = map[string]any{"docker": map[string]any{"maxConcurrentDownloads": 4}}
	})
	env.warnings.take()

	hub := &ngv1.NodeGroup{}
	env.get(t, name, hub)
	labelled := hub.DeepCopy()
	labelled.Labels = map[string]string{"team": "a"}
	if err := env.c.Patch(ctx, labelled, client.MergeFrom(hub)); err != nil {
		t.Fatalf("a label through v1: %v", err)
	}
	for i, obj := range []client.Object{&v1alpha2.NodeGroup{}, &v1alpha1.NodeGroup{}} {
		env.get(t, name, obj)
		obj.SetLabels(map[string]string{"team": fmt.Sprintf("older-%d", i)})
		if err := env.c.Update(ctx, obj); err != nil {
			t.Fatalf("a label through %T: %v", obj, err)
		}
	}
	if w := env.warnings.take(); len(w) > 0 {
		t.Fatalf("writes that do not touch spec.cri warned: %q", w)
	}
	env.get(t, name, hub)
	if hub.Spec.CRI == nil || hub.Spec.CRI.Docker == nil || *hub.Spec.CRI.Docker.MaxConcurrentDownloads != 4 || hub.Spec.CRI.Type != "" {
		t.Fatalf("the stored block changed under writes that did not touch it: %s", mustJSON(t, hub.Spec.CRI))
	}

	edited := hub.DeepCopy()
	edited.Spec.CRI.Docker.MaxConcurrentDownloads = ptr.To[int32](6)
	// As examples/nodegroup/README.md shows it.
	if err := env.c.Update(ctx, edited); err == nil || !strings.Contains(err.Error(), "spec.cri: Invalid value: "+msgDockerWithoutType) {
		t.Fatalf("editing the block through v1: %v, want %q", err, msgDockerWithoutType)
	}
	alpha2 := &v1alpha2.NodeGroup{}
	env.get(t, name, alpha2)
	alpha2.Spec.CRI.Docker.MaxConcurrentDownloads = ptr.To[int32](6)
	if err := env.c.Update(ctx, alpha2); err == nil || !strings.Contains(err.Error(), msgDockerWithoutType) {
		t.Fatalf("editing the block through v1alpha2: %v, want %q", err, msgDockerWithoutType)
	}
	removed := hub.DeepCopy()
	removed.Spec.CRI = nil
	if err := env.c.Update(ctx, removed); err != nil {
		t.Fatalf("removing the block through v1: %v", err)
	}
}

// A client of v1alpha1 cannot use a forged conversion-data annotation to
// store a docker block v1's rule refuses.
func TestNodeGroupForgedConversionDataCannotStoreDocker(t *testing.T) {
	env := startNodeGroup(t)
	name := ngName("forged-docker")
	forged := &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
		ngv1.ConversionDataAnnotation: `{"v1":{"spec":{"cri":{"docker":{"maxConcurrentDownloads":4}}}}}`}},
		Spec: v1alpha1.NodeGroupSpec{NodeType: v1alpha1.NodeTypeStatic, Docker: &v1alpha1.DockerSpec{MaxConcurrentDownloads: ptr.To[int32](4)}}}
	err := env.c.Create(context.Background(), forged)
	if err == nil {
		deleteNodeGroup(t, name)
		t.Fatal("admitted")
	}
	if !strings.Contains(err.Error(), policyDenied+msgDockerWithoutType) {
		t.Fatalf("create: %v, want the denial %q", err, msgDockerWithoutType)
	}
}

// storeAsOlderConversionsDid rewrites the stored NodeGroup name in etcd,
// changing its spec with edit: the shape an older conversion left, which no
// write through the API server can produce any more. It goes through
// etcd's JSON gateway, as the API server reads what etcd holds, and waits
// until the API server serves the new value.
func storeAsOlderConversionsDid(t *testing.T, name string, edit func(spec map[string]any)) {
	t.Helper()
	stored := &ngv1.NodeGroup{}
	c := ngClient(t, nil)
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, stored); err != nil {
		t.Fatal(err)
	}
	stored.APIVersion, stored.Kind = ngv1.GroupVersion.String(), "NodeGroup"
	stored.ResourceVersion = ""
	raw, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	edit(obj["spec"].(map[string]any))
	value, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	put, err := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte("/registry/deckhouse.io/nodegroups/" + name)),
		"value": base64.StdEncoding.EncodeToString(value),
	})
	if err != nil {
		t.Fatal(err)
	}
	etcd := controlPlane.Env.ControlPlane.Etcd.URL
	resp, err := http.Post(etcd.String()+"/v3/kv/put", "application/json", bytes.NewReader(put))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd put: %s %s", resp.Status, body)
	}
	want := map[string]any{}
	edit(want)
	eventually(t, "the API server serves the rewritten NodeGroup", func() error {
		got := &ngv1.NodeGroup{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, got); err != nil {
			return err
		}
		if g, w := mustJSON(t, got.Spec.CRI), mustJSON(t, want["cri"]); g != w {
			return fmt.Errorf("cri %s, want %s", g, w)
		}
		return nil
	})
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
