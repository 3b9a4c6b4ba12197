package nodegroup

import (
	"fmt"
	"sync/atomic"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// followed keeps what parse makes of the one object a field-selected
// informer holds.
type followed[T any] struct {
	name    string
	handler toolscache.ResourceEventHandlerRegistration
	absent  T
	current atomic.Pointer[T]
}

func follow[T any](name string, informer cache.Informer, parse func(obj any) T) (*followed[T], error) {
	f := &followed[T]{name: name, absent: parse(nil)}
	store := func(obj any) {
		v := parse(obj)
		f.current.Store(&v)
	}
	var err error
	f.handler, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    store,
		UpdateFunc: func(_, obj any) { store(obj) },
		DeleteFunc: func(any) { store(nil) },
	})
	return f, err
}

// get returns the parsed object, the parse of nothing when the informer
// listed and found none, or errNotLoaded before it listed.
func (f *followed[T]) get() (T, error) {
	if v := f.current.Load(); v != nil {
		return *v, nil
	}
	// The handler has seen the initial list once it reports synced, so an
	// empty value then means the object does not exist.
	if f.handler.HasSynced() {
		return f.absent, nil
	}
	var zero T
	return zero, fmt.Errorf("%s: %w", f.name, errNotLoaded)
}
