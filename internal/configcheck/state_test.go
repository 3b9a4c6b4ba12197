package configcheck

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// syncedRegistration stands in for the informer's handler of a feed whose
// store the test fills itself.
type syncedRegistration struct {
	toolscache.ResourceEventHandlerRegistration
}

func (syncedRegistration) HasSynced() bool { return true }

func TestUnchangedComparesWhatTheTemplatesSee(t *testing.T) {
	cfgSpec := loadExample(t)
	c, errs := spec.Compile(&cfgSpec.Spec, inProcess)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	w := c.Watched["ingresses"]
	store, err := render.NewMemoryStore(w.Indexer)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]any{
		"metadata": map[string]any{"namespace": "app", "name": "web", "labels": map[string]any{"team": "a"},
			"annotations": map[string]any{"owner": "x"}, "resourceVersion": "1"},
		"spec": map[string]any{"ingressClassName": "haproxy"},
	}
	if err := store.Upsert(w.Stored(stored)); err != nil {
		t.Fatal(err)
	}
	f := &feed{spec: w, store: store, reg: syncedRegistration{}}
	st := &configState{feeds: map[string]*feed{"ingresses": f}}

	with := func(edit func(meta map[string]any)) map[string]any {
		obj := render.NormalizeObject(stored)
		edit(obj["metadata"].(map[string]any))
		return w.Stored(obj)
	}
	cases := []struct {
		name string
		op   render.Operation
		obj  map[string]any
		want bool
	}{
		{"a re-apply", render.OperationUpdate, with(func(map[string]any) {}), true},
		{"labels only (ignored by the example)", render.OperationUpdate, with(func(m map[string]any) { m["labels"] = map[string]any{"team": "b"} }), true},
		{"resourceVersion only (always ignored)", render.OperationUpdate, with(func(m map[string]any) { m["resourceVersion"] = "2" }), true},
		{"an annotation (templates may read it)", render.OperationUpdate, with(func(m map[string]any) { m["annotations"] = map[string]any{"owner": "y"} }), false},
		{"another object", render.OperationCreate, with(func(m map[string]any) { m["name"] = "web2" }), false},
		{"a delete always renders", render.OperationDelete, with(func(map[string]any) {}), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := st.unchanged(w, tc.op, tc.obj, guard.NewAdmissions(guard.PendingTTL, time.Now)); got != tc.want {
				t.Fatalf("unchanged = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("a pending change of the object is what the templates see", func(t *testing.T) {
		adm := guard.NewAdmissions(guard.PendingTTL, time.Now)
		adm.Record("ingresses", render.OperationDelete, with(func(map[string]any) {}))
		if st.unchanged(w, render.OperationUpdate, with(func(map[string]any) {}), adm) {
			t.Fatal("a re-apply of an object whose deletion is pending is a change")
		}
		adm.Record("ingresses", render.OperationUpdate, with(func(m map[string]any) { m["annotations"] = map[string]any{"owner": "y"} }))
		if !st.unchanged(w, render.OperationUpdate, with(func(m map[string]any) { m["annotations"] = map[string]any{"owner": "y"} }), adm) {
			t.Fatal("the pending object applied again is no change")
		}
	})
	t.Run("a store not synced is not trusted", func(t *testing.T) {
		unsynced := &configState{feeds: map[string]*feed{"ingresses": {spec: w, store: store}}}
		if unsynced.unchanged(w, render.OperationUpdate, with(func(map[string]any) {}), guard.NewAdmissions(guard.PendingTTL, time.Now)) {
			t.Fatal("unchanged from a store that has not synced")
		}
	})
}

func TestWebhookNameIsValidAndDistinct(t *testing.T) {
	key := spec.GatehouseKey(types.NamespacedName{Namespace: "lb-system", Name: "Edge_Config"})
	if got, want := webhookName(key, "ingresses"), "ingresses.edge-config.lb-system.configcheck.gatehouse.dev"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	long := strings.Repeat("a", 45)
	a, b := webhookName(key, long+"_one"), webhookName(key, long+"_two")
	if a == b {
		t.Fatalf("two long watched names share the webhook name %q", a)
	}
	for _, name := range []string{a, b} {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Fatalf("%q: %v", name, errs)
		}
		if first, _, _ := strings.Cut(name, "."); len(first) > 40 {
			t.Fatalf("%q: first label of %d characters", name, len(first))
		}
	}
}
