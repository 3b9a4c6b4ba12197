package nodegroup

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

var moduleConfigGVK = schema.GroupVersionKind{Group: "deckhouse.io", Version: "v1alpha1", Kind: "ModuleConfig"}

const globalModuleName = "global"

// moduleConfigReader reads ModuleConfig global, whose CRD may be installed
// or removed while Gatehouse runs. The host follows the kind: its informer
// runs only while the CRD serves it, and its reader answers NotFound
// meanwhile, so a missing CRD means no custom toleration keys, and a CRD
// installed later is picked up without a restart.
type moduleConfigReader struct {
	kind module.Kind
}

func moduleConfigObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(moduleConfigGVK)
	return u
}

func newModuleConfigReader(ctx context.Context, host module.Host) (*moduleConfigReader, error) {
	log := logf.FromContext(ctx)
	// Only ModuleConfig global is read: the API server sends no other.
	scope := module.Scope{Fields: fields.OneTermEqualSelector("metadata.name", globalModuleName)}
	k, err := host.FollowKind(moduleConfigObject(), scope, func() {
		log.Info("ModuleConfig API changed; custom toleration keys follow it")
	})
	if err != nil {
		return nil, err
	}
	return &moduleConfigReader{kind: k}, nil
}

// get returns the custom toleration keys: none without a ModuleConfig
// global (or while its CRD is not served).
func (m *moduleConfigReader) get() ([]string, error) {
	u := moduleConfigObject()
	err := m.kind.Get(context.Background(), client.ObjectKey{Name: globalModuleName}, u)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("ModuleConfig %s: %w", globalModuleName, err)
	}
	return parseModuleConfig(u)
}

func parseModuleConfig(u *unstructured.Unstructured) ([]string, error) {
	keys, _, err := unstructured.NestedStringSlice(u.Object, "spec", "settings", "modules", "placement", "customTolerationKeys")
	if err != nil {
		return nil, fmt.Errorf("ModuleConfig %s: .spec.settings.modules.placement.customTolerationKeys: %w", globalModuleName, err)
	}
	return keys, nil
}
