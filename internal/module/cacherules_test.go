package module

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// TestHostCacheOptions: every host's module caches strip managedFields
// unless the module transforms objects itself, and refuse reads of types
// they hold no informer of.
func TestHostCacheOptions(t *testing.T) {
	scheme := runtime.NewScheme()
	got := HostCacheOptions(cache.Options{}, scheme, nil, nil)
	if got.Scheme != scheme || got.DefaultTransform == nil || !got.ReaderFailOnMissingInformer {
		t.Fatalf("defaults: %+v", got)
	}
	stripped, err := got.DefaultTransform(&runtime.Unknown{})
	if err != nil || stripped == nil {
		t.Fatalf("the managedFields transform: %v %v", stripped, err)
	}
	own := func(o any) (any, error) { return "own", nil }
	if out, _ := HostCacheOptions(cache.Options{DefaultTransform: own}, scheme, nil, nil).DefaultTransform(nil); out != "own" {
		t.Errorf("the module's own transform was replaced: %v", out)
	}
}
