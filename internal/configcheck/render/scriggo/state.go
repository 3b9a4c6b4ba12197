package scriggo

import (
	"github.com/open2b/scriggo/native"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// state is what a rendering's templates see as globals. Each is declared
// to the templates as a pointer to a field here (see renderer), set by
// reset before each rendering.
type state struct {
	resources    map[string]*resourceStore
	extraContext map[string]any
}

// declarations are the names templates see: the globals and haptic's
// functions.
func (s *state) declarations() native.Declarations {
	d := native.Declarations{
		"resources":    &s.resources,
		"extraContext": &s.extraContext,
		"fail":         fail,
	}
	for name, fn := range functions {
		d[name] = fn
	}
	for name, fn := range dynHelpers {
		d[name] = fn
	}
	return d
}

// reset sets the globals for a rendering of data.
func (s *state) reset(data render.Data) error {
	s.resources = make(map[string]*resourceStore, len(data.Resources))
	for name, store := range data.Resources {
		s.resources[name] = &resourceStore{store: store}
	}
	s.extraContext = data.ExtraContext
	return nil
}

// resourceStore is resources.<name>: haptic's List, Fetch and GetSingle.
// None of them returns an error to the template; haptic logs a store's
// error and returns nothing.
type resourceStore struct {
	store render.Store
}

// List returns every object, by namespace then name.
func (r *resourceStore) List() []any {
	return objects(r.store.List())
}

// Fetch returns the objects whose indexBy keys start with keys.
func (r *resourceStore) Fetch(keys ...any) []any {
	objs, err := r.store.Fetch(keys...)
	if err != nil {
		return []any{}
	}
	return objects(objs)
}

// GetSingle returns the one object matching keys, or nil when none or
// more than one does.
func (r *resourceStore) GetSingle(keys ...any) any {
	objs, err := r.store.Fetch(keys...)
	if err != nil || len(objs) != 1 {
		return nil
	}
	return objs[0]
}

func objects(objs []map[string]any) []any {
	out := make([]any, len(objs))
	for i, obj := range objs {
		out[i] = obj
	}
	return out
}
