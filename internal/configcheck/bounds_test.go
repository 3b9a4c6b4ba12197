package configcheck

import (
	"fmt"
	"strings"
	"testing"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
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

func TestValidateBounds(t *testing.T) {
	w := &watchedSpec{name: "ingresses", bounds: compileBounds(gatehousev1alpha1.WatchedResource{})}
	if errs := validateBounds(w, ingressWithPaths(100), nil, "Ingress", "lb/haproxy"); len(errs) > 0 {
		t.Fatalf("an Ingress of 100 paths is refused by the defaults: %v", errs)
	}

	// The attack: 10,000 paths, about 0.95 MB.
	big := ingressWithPaths(10000)
	errs := validateBounds(w, big, nil, "Ingress", "lb/haproxy")
	if len(errs) != 2 {
		t.Fatalf("got %v; want the size and the list length refused", errs)
	}
	msg := boundsDenial(errs)
	for _, want := range []string{
		"this Ingress is 936.6 KiB as the templates see it",
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
	roomy := &watchedSpec{name: "ingresses", bounds: compileBounds(gatehousev1alpha1.WatchedResource{MaxObjectBytes: 4 << 20, MaxListLength: 20000})}
	if errs := validateBounds(roomy, big, nil, "Ingress", "lb/haproxy"); len(errs) > 0 {
		t.Fatalf("refused under bounds stated larger: %v", errs)
	}

	// An object stored before the bounds may stay or shrink, never grow.
	smaller := ingressWithPaths(9000)
	if errs := validateBounds(w, smaller, big, "Ingress", "lb/haproxy"); len(errs) > 0 {
		t.Fatalf("shrinking an oversized object is refused: %v", errs)
	}
	if errs := validateBounds(w, big, smaller, "Ingress", "lb/haproxy"); len(errs) == 0 {
		t.Fatal("growing an oversized object is admitted")
	}
	if errs := validateBounds(w, big, ingressWithPaths(3), "Ingress", "lb/haproxy"); len(errs) == 0 {
		t.Fatal("an update making a small object oversized is admitted")
	}
}
