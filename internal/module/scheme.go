package module

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
