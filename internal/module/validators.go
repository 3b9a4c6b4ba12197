package module

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GVKString formats a GVK the way the generic /validate path keys it:
// "group/version.Kind", or "version.Kind" for the core group.
func GVKString(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version + "." + gvk.Kind
	}
	return gvk.Group + "/" + gvk.Version + "." + gvk.Kind
}

// ValidatorRegistry maps GVKs to validators for the generic /validate path.
// A request for a GVK with no validator is allowed.
type ValidatorRegistry struct {
	mapper meta.RESTMapper

	mu         sync.RWMutex
	validators map[string]AdmitFunc
	resources  []schema.GroupVersionResource
}

// NewValidatorRegistry returns a registry that resolves resources with mapper,
// typically the manager's discovery-backed RESTMapper.
func NewValidatorRegistry(mapper meta.RESTMapper) *ValidatorRegistry {
	return &ValidatorRegistry{mapper: mapper, validators: map[string]AdmitFunc{}}
}

// RegisterResource resolves a plural resource (as webhook rules name it) to
// its Kind through discovery and registers fn for it. It returns the GVK string.
func (r *ValidatorRegistry) RegisterResource(gvr schema.GroupVersionResource, fn AdmitFunc) (string, error) {
	gvk, err := r.mapper.KindFor(gvr)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", gvr, err)
	}
	key := GVKString(gvk)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.validators[key]; dup {
		return "", fmt.Errorf("a validator for %s is already registered", key)
	}
	r.validators[key] = fn
	r.resources = append(r.resources, gvr)
	return key, nil
}

// Lookup returns the validator for a GVK string.
func (r *ValidatorRegistry) Lookup(gvk string) (AdmitFunc, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn, ok := r.validators[gvk]
	return fn, ok
}

// Resources lists the registered resources, for the webhook rules.
func (r *ValidatorRegistry) Resources() []schema.GroupVersionResource {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]schema.GroupVersionResource(nil), r.resources...)
}
