package scriggo

import (
	"reflect"

	"github.com/open2b/scriggo/native"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// state is what a rendering's templates see as globals. Each is declared
// to the templates as a pointer to a field here (see renderer), set by
// reset before each rendering.
type state struct {
	resources          map[string]*resourceStore
	controller         map[string]*resourceStore
	extraContext       map[string]any
	templateSnippets   []string
	pathResolver       *pathResolver
	fileRegistry       *fileRegistry
	shared             *sharedContext
	dataplane          map[string]any
	capabilities       map[string]any
	runtimeEnvironment *runtimeEnvironment
	currentConfig      *currentConfig
	http               *httpFetcher

	// snippetNames are the config's snippets in name order, set once.
	snippetNames []string
}

// declarations are the names templates see: the globals and haptic's
// functions.
func (s *state) declarations() native.Declarations {
	d := native.Declarations{
		"resources":          &s.resources,
		"controller":         &s.controller,
		"extraContext":       &s.extraContext,
		"templateSnippets":   &s.templateSnippets,
		"pathResolver":       &s.pathResolver,
		"fileRegistry":       &s.fileRegistry,
		"shared":             &s.shared,
		"dataplane":          &s.dataplane,
		"capabilities":       &s.capabilities,
		"runtimeEnvironment": &s.runtimeEnvironment,
		"currentConfig":      &s.currentConfig,
		"http":               &s.http,
		"fail":               fail,
		// GetPath and Register are variadic: rerouted (transform.go).
		// They keep their two results, as haptic's templates read them
		// (var path, err = fileRegistry.Register(…)); a show of one
		// shows the value.
		"dyn_m_GetPath":  func(p *pathResolver, args ...any) (any, error) { return p.GetPath(args...) },
		"dyn_m_Register": func(r *fileRegistry, args ...any) (string, error) { return r.Register(args...) },
		// http.Fetch too, under its own name: the stores' Fetch has
		// another result.
		"dyn_http_Fetch": func(h *httpFetcher, args ...any) (any, error) { return h.Fetch(args...) },
	}
	for name, fn := range functions {
		d[name] = stopOnError(fn)
	}
	for name, fn := range dynHelpers {
		d[name] = stopOnError(fn)
	}
	return d
}

// reset sets the globals for a rendering of data.
func (s *state) reset(data render.Data) error {
	s.resources = make(map[string]*resourceStore, len(data.Resources))
	for name, store := range data.Resources {
		s.resources[name] = &resourceStore{store: store}
	}
	// A copy with whole numbers as int64, as the gotemplate engine sees
	// it: from a render worker, numbers arrive as json.Number.
	s.extraContext = render.NormalizeObject(data.ExtraContext)
	// Gatehouse does not watch haptic's HAProxy pods: the store is there,
	// empty, as on a controller that has found none yet.
	s.controller = map[string]*resourceStore{"haproxy_pods": {store: emptyStore{}}}
	s.templateSnippets = s.snippetNames
	// The base directory is haptic's (its controller deploys there); the
	// rest is relative, the checker's layout. configcheck's check reads
	// "default-path origin /etc/haproxy" as the checked directory.
	s.pathResolver = &pathResolver{baseDir: "/etc/haproxy", mapsDir: "maps", sslDir: "ssl", crtListDir: "general", generalDir: "general"}
	s.fileRegistry = &fileRegistry{paths: s.pathResolver, files: map[string]registeredFile{}}
	s.shared = &sharedContext{values: map[string]any{}}
	s.dataplane = map[string]any{}
	s.capabilities = map[string]any{}
	// A fixed value, so that a rendering does not depend on the machine
	// rendering it (haptic's templates size shards by it; the text of
	// the shards put together is the same whatever their count).
	s.runtimeEnvironment = &runtimeEnvironment{GOMAXPROCS: 1}
	s.currentConfig = nil
	if data.CurrentConfig != "" {
		s.currentConfig = parseCurrentConfig(data.CurrentConfig)
	}
	s.http = &httpFetcher{resources: data.HTTPResources}
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

// emptyStore is a store with nothing in it.
type emptyStore struct{}

func (emptyStore) List() []map[string]any                   { return nil }
func (emptyStore) Fetch(...any) ([]map[string]any, error)   { return nil, nil }
func (emptyStore) GetSingle(...any) (map[string]any, error) { return nil, nil }

var (
	envType   = reflect.TypeFor[native.Env]()
	errorType = reflect.TypeFor[error]()
)

// stopOnError adapts a function returning (T, error) to one returning T
// that stops the rendering with the error. haptic's functions return
// errors that way, and haptic's fork calls them where one value is
// expected (x | b64decode() | tostring()); upstream refuses a two-valued
// call there. The adapted function takes native.Env first (which
// templates do not see) to stop the run with the error as it is.
func stopOnError(fn any) any {
	t := reflect.TypeOf(fn)
	if t.Kind() != reflect.Func || t.NumOut() != 2 || t.Out(1) != errorType {
		return fn
	}
	takesEnv := t.NumIn() > 0 && t.In(0) == envType
	in := make([]reflect.Type, 0, t.NumIn()+1)
	if !takesEnv {
		in = append(in, envType)
	}
	for i := range t.NumIn() {
		in = append(in, t.In(i))
	}
	adapted := reflect.FuncOf(in, []reflect.Type{t.Out(0)}, t.IsVariadic())
	original := reflect.ValueOf(fn)
	return reflect.MakeFunc(adapted, func(args []reflect.Value) []reflect.Value {
		env := args[0].Interface().(native.Env)
		if !takesEnv {
			args = args[1:]
		}
		var results []reflect.Value
		if t.IsVariadic() {
			results = original.CallSlice(args)
		} else {
			results = original.Call(args)
		}
		if err, _ := results[1].Interface().(error); err != nil {
			env.Stop(err)
		}
		return results[:1]
	}).Interface()
}
