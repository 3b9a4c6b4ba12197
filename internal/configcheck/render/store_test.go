package render

import (
	"reflect"
	"strings"
	"sync"
	"testing"
)

func nsNameStore(t *testing.T) *MemoryStore {
	t.Helper()
	// Inserted out of order on purpose: results must not depend on it.
	return mustStore(t, mustIndexer(t, "metadata.namespace", "metadata.name"),
		object("shop", "web", nil),
		object("blog", "web", nil),
		object("shop", "api", nil),
		object("admin", "api", nil),
	)
}

func TestMemoryStoreListAndFetchOrder(t *testing.T) {
	store := nsNameStore(t)
	tests := []struct {
		name string
		keys []any
		want []string
	}{
		{"no keys is everything", nil, []string{"admin/api", "blog/web", "shop/api", "shop/web"}},
		{"one key is a prefix match", []any{"shop"}, []string{"shop/api", "shop/web"}},
		{"all keys", []any{"shop", "web"}, []string{"shop/web"}},
		{"no match", []any{"shop", "cart"}, []string{}},
		{"unknown prefix", []any{"nowhere"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := store.Fetch(tt.keys...)
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if !reflect.DeepEqual(names(got), tt.want) {
				t.Errorf("Fetch(%v) = %v, want %v", tt.keys, names(got), tt.want)
			}
		})
	}
	if got := names(store.List()); !reflect.DeepEqual(got, []string{"admin/api", "blog/web", "shop/api", "shop/web"}) {
		t.Errorf("List = %v", got)
	}
	if _, err := store.Fetch("a", "b", "c"); err == nil {
		t.Errorf("Fetch with more keys than indexBy: want an error")
	}
}

func TestMemoryStoreGetSingle(t *testing.T) {
	store := mustStore(t, mustIndexer(t, "metadata.labels['app']"),
		object("shop", "one", map[string]any{"app": "web"}),
		object("shop", "two", map[string]any{"app": "web"}),
		object("shop", "three", map[string]any{"app": "db"}),
	)
	got, err := store.GetSingle("db")
	if err != nil || identityOf(got).String() != "shop/three" {
		t.Errorf("GetSingle(db) = %v, %v; want shop/three", got, err)
	}
	got, err = store.GetSingle("cache")
	if err != nil || got != nil {
		t.Errorf("GetSingle(cache) = %v, %v; want nil, nil", got, err)
	}
	_, err = store.GetSingle("web")
	if err == nil || !strings.Contains(err.Error(), `GetSingle "web": 2 objects match`) ||
		!strings.Contains(err.Error(), "shop/one, shop/two") {
		t.Errorf("GetSingle(web) err = %v, want one naming the keys and the objects", err)
	}
}

func TestMemoryStoreUpsertAndDelete(t *testing.T) {
	store := mustStore(t, mustIndexer(t, "metadata.labels['kubernetes.io/service-name']"),
		object("shop", "api-1", map[string]any{"kubernetes.io/service-name": "api"}),
	)
	before := store.List()

	// Moving api-1 to another service takes it out of the old bucket.
	if err := store.Upsert(object("shop", "api-1", map[string]any{"kubernetes.io/service-name": "web"})); err != nil {
		t.Fatal(err)
	}
	if err := store.Upsert(object("shop", "api-2", map[string]any{"kubernetes.io/service-name": "api"})); err != nil {
		t.Fatal(err)
	}
	assertFetch(t, store, []any{"api"}, []string{"shop/api-2"})
	assertFetch(t, store, []any{"web"}, []string{"shop/api-1"})
	if got := names(store.List()); !reflect.DeepEqual(got, []string{"shop/api-1", "shop/api-2"}) {
		t.Errorf("List after upserts = %v", got)
	}

	if !store.Delete("shop", "api-1") || store.Delete("shop", "api-1") {
		t.Errorf("Delete: want true once, then false")
	}
	assertFetch(t, store, []any{"web"}, []string{})

	// A slice handed out earlier is a snapshot: later writes never change it.
	if got := names(before); !reflect.DeepEqual(got, []string{"shop/api-1"}) ||
		before[0]["metadata"].(map[string]any)["labels"].(map[string]any)["kubernetes.io/service-name"] != "api" {
		t.Errorf("earlier List result changed to %v", before)
	}
}

func TestMemoryStoreReplaceKeepsLastDuplicate(t *testing.T) {
	first := object("shop", "api", map[string]any{"v": "1"})
	second := object("shop", "api", map[string]any{"v": "2"})
	store := mustStore(t, mustIndexer(t, "metadata.labels.v"), first, second)
	assertFetch(t, store, nil, []string{"shop/api"})
	assertFetch(t, store, []any{"1"}, []string{})
	assertFetch(t, store, []any{"2"}, []string{"shop/api"})
}

func TestMemoryStoreAppendDoesNotLeakIntoStore(t *testing.T) {
	store := nsNameStore(t)
	list := store.List()
	_ = append(list, object("zzz", "intruder", nil))
	if got := len(store.List()); got != 4 {
		t.Errorf("append to a List result changed the store: %d objects", got)
	}
}

func TestMemoryStoreConcurrentReadsAndWrites(t *testing.T) {
	store := nsNameStore(t)
	var wg sync.WaitGroup
	for worker := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if worker%2 == 0 {
					_ = store.Upsert(object("shop", "tmp", map[string]any{"i": int64(i)}))
					store.Delete("shop", "tmp")
					continue
				}
				for _, obj := range store.List() {
					_ = identityOf(obj)
				}
				_, _ = store.Fetch("shop")
			}
		}()
	}
	wg.Wait()
}

func assertFetch(t *testing.T, store Store, keys []any, want []string) {
	t.Helper()
	got, err := store.Fetch(keys...)
	if err != nil {
		t.Fatalf("Fetch(%v): %v", keys, err)
	}
	if !reflect.DeepEqual(names(got), want) {
		t.Errorf("Fetch(%v) = %v, want %v", keys, names(got), want)
	}
}
