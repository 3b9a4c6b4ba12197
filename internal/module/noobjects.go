package module

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NoObjects is how a followed kind that cannot be read reads: Get answers
// NotFound and List an empty list. Every host's Kind answers with it while
// the kind is not served, not permitted or not synced, so that the three
// hosts (the process, the offline suite, the unit-test host) agree on it.
type NoObjects schema.GroupVersionKind

// Get answers NotFound for the kind's resource (its kind in lower case: the
// RESTMapper may not know the kind).
func (n NoObjects) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: n.Group, Resource: strings.ToLower(n.Kind)}, key.Name)
}

// List empties list.
func (n NoObjects) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	return meta.SetList(list, nil)
}
