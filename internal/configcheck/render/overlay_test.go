package render

import (
	"reflect"
	"strings"
	"testing"
)

func TestOverlay(t *testing.T) {
	serviceName := func(ns, name, service string) map[string]any {
		return object(ns, name, map[string]any{"kubernetes.io/service-name": service})
	}
	// EndpointSlice-like objects indexed by namespace and the service label:
	// the case upstream's overlay got wrong (it matched on namespace/name).
	base := mustStore(t, mustIndexer(t, "metadata.namespace", "metadata.labels['kubernetes.io/service-name']"),
		serviceName("shop", "api-a", "api"),
		serviceName("shop", "web-a", "web"),
		serviceName("blog", "web-a", "web"),
	)

	tests := []struct {
		name  string
		op    Operation
		obj   map[string]any
		fetch map[string][]string // Fetch keys joined by "," → namespace/names
	}{
		{
			name: "CREATE adds, seen by the label index",
			op:   OperationCreate,
			obj:  serviceName("shop", "api-b", "api"),
			fetch: map[string][]string{
				"":         {"blog/web-a", "shop/api-a", "shop/api-b", "shop/web-a"},
				"shop":     {"shop/api-a", "shop/api-b", "shop/web-a"},
				"shop,api": {"shop/api-a", "shop/api-b"},
				"shop,web": {"shop/web-a"},
				"blog,api": {},
			},
		},
		{
			name: "UPDATE replaces, not duplicates, and moves between label buckets",
			op:   OperationUpdate,
			obj:  serviceName("shop", "api-a", "web"),
			fetch: map[string][]string{
				"":         {"blog/web-a", "shop/api-a", "shop/web-a"},
				"shop,api": {},
				"shop,web": {"shop/api-a", "shop/web-a"},
			},
		},
		{
			name: "UPDATE of an object the base lacks adds it",
			op:   OperationUpdate,
			obj:  serviceName("blog", "api-x", "api"),
			fetch: map[string][]string{
				"blog,api": {"blog/api-x"},
			},
		},
		{
			name: "CREATE of an existing identity replaces it",
			op:   OperationCreate,
			obj:  serviceName("blog", "web-a", "api"),
			fetch: map[string][]string{
				"":         {"blog/web-a", "shop/api-a", "shop/web-a"},
				"blog,web": {},
				"blog,api": {"blog/web-a"},
			},
		},
		{
			name: "DELETE removes from every index",
			op:   OperationDelete,
			obj:  serviceName("shop", "web-a", "web"),
			fetch: map[string][]string{
				"":         {"blog/web-a", "shop/api-a"},
				"shop":     {"shop/api-a"},
				"shop,web": {},
				"blog,web": {"blog/web-a"},
			},
		},
		{
			name: "DELETE of an absent object changes nothing",
			op:   OperationDelete,
			obj:  serviceName("shop", "gone", "web"),
			fetch: map[string][]string{
				"": {"blog/web-a", "shop/api-a", "shop/web-a"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			overlay, err := Overlay(base, tt.op, tt.obj)
			if err != nil {
				t.Fatalf("Overlay: %v", err)
			}
			for joined, want := range tt.fetch {
				var keys []any
				if joined != "" {
					for _, key := range strings.Split(joined, ",") {
						keys = append(keys, key)
					}
				}
				assertFetch(t, overlay, keys, want)
				if len(keys) == 0 {
					if got := names(overlay.List()); !reflect.DeepEqual(got, want) {
						t.Errorf("List = %v, want %v", got, want)
					}
				}
			}
		})
	}

	// The base is never changed by an overlay.
	assertFetch(t, base, nil, []string{"blog/web-a", "shop/api-a", "shop/web-a"})
	assertFetch(t, base, []any{"shop", "api"}, []string{"shop/api-a"})
}

func TestOverlayGetSingle(t *testing.T) {
	base := mustStore(t, mustIndexer(t, "metadata.namespace", "metadata.name"), object("shop", "api", nil))
	updated := object("shop", "api", map[string]any{"version": "2"})
	overlay, err := Overlay(base, OperationUpdate, updated)
	if err != nil {
		t.Fatal(err)
	}
	got, err := overlay.GetSingle("shop", "api")
	if err != nil {
		t.Fatalf("GetSingle after UPDATE: %v (the overlay must replace, not duplicate)", err)
	}
	if got["metadata"].(map[string]any)["labels"].(map[string]any)["version"] != "2" {
		t.Errorf("GetSingle returned the old object: %v", got)
	}
}

func TestOverlayStacks(t *testing.T) {
	base := mustStore(t, mustIndexer(t, "metadata.namespace", "metadata.name"), object("shop", "api", nil))
	first, err := Overlay(base, OperationCreate, object("shop", "web", nil))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Overlay(first, OperationDelete, object("shop", "api", nil))
	if err != nil {
		t.Fatal(err)
	}
	assertFetch(t, second, []any{"shop"}, []string{"shop/web"})
}

func TestOverlayNormalizesAndValidates(t *testing.T) {
	base := mustStore(t, mustIndexer(t, "spec.port"))
	overlay, err := Overlay(base, OperationCreate, decodeJSON(t, `{"metadata":{"name":"a"},"spec":{"port":8080}}`))
	if err != nil {
		t.Fatal(err)
	}
	assertFetch(t, overlay, []any{int64(8080)}, []string{"a"})
	assertFetch(t, overlay, []any{"8080"}, []string{"a"})
	if port := overlay.List()[0]["spec"].(map[string]any)["port"]; port != int64(8080) {
		t.Errorf("overlay object port = %#v, want int64 8080", port)
	}

	if _, err := Overlay(base, "CONNECT", object("", "a", nil)); err == nil {
		t.Errorf("unknown operation: want an error")
	}
	if _, err := Overlay(base, OperationCreate, decodeJSON(t, `{"metadata":{"name":"a"},"spec":{"port":{"x":1}}}`)); err == nil {
		t.Errorf("unindexable object: want an error")
	}
}
