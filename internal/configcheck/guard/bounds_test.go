package guard

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// ingressWithPaths is an Ingress of n paths, as a tenant would write it.
func ingressWithPaths(n int) map[string]any {
	paths := make([]any, n)
	for i := range paths {
		paths[i] = map[string]any{"path": fmt.Sprintf("/p%d", i), "pathType": "Prefix",
			"backend": map[string]any{"service": map[string]any{"name": "api", "port": map[string]any{"number": int64(80)}}}}
	}
	return map[string]any{
		"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"namespace": "tenant-a", "name": "big"},
		"spec":     map[string]any{"rules": []any{map[string]any{"host": "a.example", "http": map[string]any{"paths": paths}}}},
	}
}

// sizeOf measures obj as the API server would send it.
func sizeOf(t *testing.T, obj map[string]any) Size {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return MeasureRaw(raw)
}

func TestMeasureRaw(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		// managed is the managedFields' value, which is not counted.
		managed string
		longest int
		path    string
	}{
		{"flat", `{"a":1}`, "", 0, ""},
		{"nested lists", `{"spec":{"rules":[{"http":{"paths":[1,2,3]}},{"http":{"paths":[true,false,null,"x"]}}]}}`, "", 4, "spec.rules[1].http.paths"},
		{"a top list", `{"items":[[],[1,2]]}`, "", 2, "items[1]"},
		{"brackets, quotes and commas inside strings count as text", `{"k":"[1,2,3] \"],[\" {,}","l":["a,b","c"]}`, "", 2, "l"},
		{"escaped backslash before a quote", `{"k":"\\","l":[1,2,3]}`, "", 3, "l"},
		{"whitespace", "{ \"l\" : [ 1 , 2 ] ,\n \"m\" : { } }", "", 2, "l"},
		{"managedFields are not counted", `{"metadata":{"name":"x","managedFields":[{"f":[1,2,3,4,5]}]},"spec":{"l":[1,2]}}`, `[{"f":[1,2,3,4,5]}]`, 2, "spec.l"},
		{"managedFields elsewhere are", `{"spec":{"managedFields":[1]}}`, "", 1, "spec.managedFields"},
		{"keys of arrays in arrays", `{"a":[{"b":[1]},{"b":[1,2,3]}]}`, "", 3, "a[1].b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := int64(len(tc.json) - len(tc.managed))
			got := MeasureRaw([]byte(tc.json))
			if got.bytes != want || got.longest != tc.longest || got.path != tc.path {
				t.Fatalf("measureRaw(%s) = %+v; want %d bytes, longest %d at %q", tc.json, got, want, tc.longest, tc.path)
			}
		})
	}
}

func TestValidateBounds(t *testing.T) {
	w := &spec.Watched{Name: "ingresses", Bounds: spec.CompileBounds(gatehousev1alpha1.WatchedResource{})}
	if errs := ValidateBounds(w, sizeOf(t, ingressWithPaths(100)), nil, "Ingress", "lb/haproxy"); len(errs) > 0 {
		t.Fatalf("an Ingress of 100 paths is refused by the defaults: %v", errs)
	}

	// The attack: 10,000 paths, about 0.95 MB.
	big := sizeOf(t, ingressWithPaths(10000))
	errs := ValidateBounds(w, big, nil, "Ingress", "lb/haproxy")
	if len(errs) != 2 {
		t.Fatalf("got %v; want the size and the list length refused", errs)
	}
	msg := BoundsDenial(errs)
	for _, want := range []string{
		"this Ingress is 936.6 KiB;",
		"HAProxyTemplateConfig lb/haproxy accepts Ingress objects of watched resource ingresses up to 128.0 KiB",
		"spec.watchedResources[ingresses].maxObjectBytes",
		"spec.rules[0].http.paths of this Ingress has 10000 items", "at most 1000 items",
		"Split it into smaller objects", "split the object into several",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, msg)
		}
	}

	// A config stating larger bounds accepts it.
	roomy := &spec.Watched{Name: "ingresses", Bounds: spec.CompileBounds(gatehousev1alpha1.WatchedResource{MaxObjectBytes: 4 << 20, MaxListLength: 20000})}
	if errs := ValidateBounds(roomy, big, nil, "Ingress", "lb/haproxy"); len(errs) > 0 {
		t.Fatalf("refused under bounds stated larger: %v", errs)
	}

	// An object stored before the bounds may stay or shrink, never grow.
	smaller := sizeOf(t, ingressWithPaths(9000))
	if errs := ValidateBounds(w, smaller, &big, "Ingress", "lb/haproxy"); len(errs) > 0 {
		t.Fatalf("shrinking an oversized object is refused: %v", errs)
	}
	if errs := ValidateBounds(w, big, &smaller, "Ingress", "lb/haproxy"); len(errs) == 0 {
		t.Fatal("growing an oversized object is admitted")
	}
	small := sizeOf(t, ingressWithPaths(3))
	if errs := ValidateBounds(w, big, &small, "Ingress", "lb/haproxy"); len(errs) == 0 {
		t.Fatal("an update making a small object oversized is admitted")
	}
}

func TestWithoutListItems(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1}`: `{"a":1}`,
		`{"metadata":{"labels":{"x":"y"}},"spec":{"ingressClassName":"haproxy","rules":[{"http":{"paths":[1,2]}},{"a":"]"}]},"l":[]}`: `{"metadata":{"labels":{"x":"y"}},"spec":{"ingressClassName":"haproxy","rules":[]},"l":[]}`,
		`{"s":"[\"{","t":["\\",{"u":[[]]}],"v":true}`: `{"s":"[\"{","t":[],"v":true}`,
	} {
		if got := string(WithoutListItems([]byte(in))); got != want {
			t.Errorf("withoutListItems(%s) = %s; want %s", in, got, want)
		}
		var obj map[string]any
		if err := json.Unmarshal(WithoutListItems([]byte(in)), &obj); err != nil {
			t.Errorf("withoutListItems(%s) is no JSON: %v", in, err)
		}
	}
	// The attack's Ingress keeps what selections read.
	raw, _ := json.Marshal(ingressWithPaths(10000))
	if n := len(WithoutListItems(raw)); n > 300 {
		t.Fatalf("the 10,000-path Ingress without list items is %d bytes", n)
	}
}
