package module_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// TestModulesDeclareTheirClusterScopedKinds: the modules' own
// cluster-scoped kinds come from the modules (module.ClusterScoper), which
// `gatehouse test` maps without discovery; a namespaced kind is not among
// them.
func TestModulesDeclareTheirClusterScopedKinds(t *testing.T) {
	got := module.ClusterScopedKinds(catalogue.All())
	for _, gk := range []string{"NodeGroup.deckhouse.io", "ModuleConfig.deckhouse.io", "AffinityClass.cozystack.io"} {
		if !got[schema.ParseGroupKind(gk)] {
			t.Errorf("%s is not declared cluster-scoped", gk)
		}
	}
	if got[schema.ParseGroupKind("HAProxyTemplateConfig.gatehouse.dev")] {
		t.Error("HAProxyTemplateConfig, namespaced, is declared cluster-scoped")
	}
}
