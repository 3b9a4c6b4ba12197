package module

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestGVKString(t *testing.T) {
	for want, gvk := range map[string]schema.GroupVersionKind{
		"v1.Service":                                   {Version: "v1", Kind: "Service"},
		"networking.k8s.io/v1.Ingress":                 {Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
		"gatehouse.dev/v1alpha1.HAProxyTemplateConfig": {Group: "gatehouse.dev", Version: "v1alpha1", Kind: "HAProxyTemplateConfig"},
	} {
		if got := GVKString(gvk); got != want {
			t.Errorf("GVKString(%v) = %q, want %q", gvk, got, want)
		}
	}
}
