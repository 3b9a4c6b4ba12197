package render

import (
	"reflect"
	"testing"
)

func TestSnapshotVersionCountsEveryChange(t *testing.T) {
	byNsName := mustIndexer(t, "metadata.namespace", "metadata.name")
	store := mustStore(t, byNsName, object("a", "x", nil))
	other := mustStore(t, byNsName)
	if store.Snapshot().ID == other.Snapshot().ID || store.Snapshot().ID == 0 {
		t.Fatalf("stores share the identity %d", store.Snapshot().ID)
	}

	versions := []uint64{store.Snapshot().Version}
	step := func(what string, change func()) {
		t.Helper()
		change()
		v := store.Snapshot().Version
		if v == versions[len(versions)-1] {
			t.Errorf("%s left the version at %d", what, v)
		}
		versions = append(versions, v)
	}
	step("Upsert", func() { mustDo(t, store.Upsert(object("a", "y", nil))) })
	step("Upsert of the same identity", func() { mustDo(t, store.Upsert(object("a", "y", map[string]any{"k": "v"}))) })
	step("Delete", func() { store.Delete("a", "x") })
	step("Replace", func() { mustDo(t, store.Replace(nil)) })

	before := store.Snapshot().Version
	if store.Delete("a", "absent") || store.Snapshot().Version != before {
		t.Errorf("a Delete that removed nothing changed the version")
	}
}

func TestSnapshotIsTheStoreAtItsVersion(t *testing.T) {
	store := mustStore(t, mustIndexer(t, "metadata.namespace", "metadata.labels['app']"),
		decodeJSON(t, `{"metadata": {"namespace": "b", "name": "z", "labels": {"app": "web"}}, "spec": {"port": 8080}}`),
		decodeJSON(t, `{"metadata": {"namespace": "a", "name": "y"}}`),
	)
	snapshot := store.Snapshot()
	if !reflect.DeepEqual(snapshot.IndexBy, []string{"metadata.namespace", "metadata.labels['app']"}) {
		t.Errorf("IndexBy %q", snapshot.IndexBy)
	}
	if got := names(snapshot.Objects); !reflect.DeepEqual(got, []string{"a/y", "b/z"}) {
		t.Errorf("objects %v, want a/y, b/z in order", got)
	}
	if port := snapshot.Objects[1]["spec"].(map[string]any)["port"]; port != int64(8080) {
		t.Errorf("objects are not normalized: port %T %v", port, port)
	}

	// A snapshot taken before a change keeps what it had.
	mustDo(t, store.Upsert(object("c", "new", nil)))
	if len(snapshot.Objects) != 2 || len(store.Snapshot().Objects) != 3 {
		t.Errorf("the snapshot changed with the store")
	}
}

func TestOverlayChangeRebuildsTheOverlay(t *testing.T) {
	byLabel := mustIndexer(t, "metadata.namespace", "metadata.labels['app']")
	base := mustStore(t, byLabel,
		object("shop", "api", map[string]any{"app": "api"}),
		object("shop", "web", map[string]any{"app": "web"}),
	)
	for _, tt := range []struct {
		op  Operation
		obj map[string]any
	}{
		{OperationCreate, decodeJSON(t, `{"metadata": {"namespace": "shop", "name": "new", "labels": {"app": "api"}}, "n": 1}`)},
		{OperationUpdate, object("shop", "web", map[string]any{"app": "api"})},
		{OperationDelete, object("shop", "api", nil)},
		// An empty namespace and an object with nothing else.
		{OperationCreate, object("", "cluster-wide", nil)},
	} {
		overlay, err := Overlay(base, tt.op, tt.obj)
		mustDo(t, err)
		change, ok := OverlayChangeOf(overlay)
		if !ok || change.Base != IndexedStore(base) {
			t.Fatalf("%s: OverlayChangeOf = %v, %v", tt.op, change, ok)
		}
		if (change.Object == nil) != (tt.op == OperationDelete) {
			t.Errorf("%s: object %v", tt.op, change.Object)
		}
		// Applied to a copy of the base, it shows what the overlay shows.
		copied := mustStore(t, byLabel, base.Snapshot().Objects...)
		rebuilt, err := change.Apply(copied)
		mustDo(t, err)
		for _, keys := range [][]any{nil, {"shop"}, {"shop", "api"}, {"shop", "web"}} {
			want, err := overlay.Fetch(keys...)
			mustDo(t, err)
			got, err := rebuilt.Fetch(keys...)
			mustDo(t, err)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: Fetch %v: rebuilt %v, overlay %v", tt.op, keys, names(got), names(want))
			}
		}
	}

	if _, ok := OverlayChangeOf(base); ok {
		t.Errorf("a MemoryStore is not an overlay")
	}
	if _, err := (OverlayChange{Namespace: "shop", Name: "a", Object: object("shop", "b", nil)}).Apply(base); err == nil {
		t.Errorf("a change whose object is another object was applied")
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
