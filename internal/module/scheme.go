package module

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// NewScheme is the scheme of a Gatehouse serving mods: client-go's kinds,
// CustomResourceDefinitions (the optional kinds are followed through them)
// and each module's own types. The server and the offline test runner
// build it alike, so that a suite decodes what the cluster would.
func NewScheme(mods []Module) (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	for _, m := range mods {
		if err := m.AddToScheme(scheme); err != nil {
			return nil, fmt.Errorf("module %s: add types: %w", m.Name(), err)
		}
	}
	return scheme, nil
}

// ClusterScoper is implemented by a module whose own custom kinds include
// cluster-scoped ones. The API server maps a custom kind through its CRD;
// where there is no CRD or discovery to ask (`gatehouse test` decoding a
// suite's objects), the module's word is the scope.
type ClusterScoper interface {
	ClusterScopedKinds() []schema.GroupKind
}

// ClusterScopedKinds are the cluster-scoped custom kinds mods declare.
func ClusterScopedKinds(mods []Module) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, m := range mods {
		if s, ok := m.(ClusterScoper); ok {
			for _, gk := range s.ClusterScopedKinds() {
				out[gk] = true
			}
		}
	}
	return out
}
