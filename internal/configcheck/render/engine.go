package render

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// EngineGoTemplate is the name of the text/template + sprig engine, the only
// value templatingSettings.engine accepts for now.
const EngineGoTemplate = "gotemplate"

// Engine compiles a config's templates. An engine is chosen by name with
// NewEngine.
type Engine interface {
	// Name is the engine's templatingSettings.engine value.
	Name() string
	// Compile parses every template once. Its error is a *CompileError
	// naming the template that failed.
	Compile(templates Templates) (Renderer, error)
}

// Renderer renders compiled templates; it is safe for concurrent use.
type Renderer interface {
	// Render executes every template with data. Its error is a
	// *RenderError naming the template; errors.As finds a *FailError in it
	// when a template called fail, and ctx's error when ctx ended first.
	Render(ctx context.Context, data Data) (Output, error)
}

// Templates are the template sources of an HAProxyTemplateConfig. Every map
// is keyed by name: snippets by the name render and renderGlob use, the
// others by the output's file name.
type Templates struct {
	Snippets        map[string]string
	HAProxyConfig   string
	Maps            map[string]string
	Files           map[string]string
	SSLCertificates map[string]string
	// PostProcessing rewrites outputs after rendering, keyed by
	// OutputTemplateName (haptic's postProcessing); Compile applies it
	// whatever the engine.
	PostProcessing map[string][]PostProcessor
}

// Data is what templates render from.
type Data struct {
	// Resources are the watched resources' stores by watched name, seen as
	// .resources.<name>.
	Resources map[string]Store
	// ExtraContext is templatingSettings.extraContext, seen as
	// .extraContext. Render normalizes a copy (whole numbers as int64).
	ExtraContext map[string]any
	// CurrentConfig is an haproxy.cfg the templates may read as the one
	// running (haptic's currentConfig, for its slot preservation), "" for
	// none. Only a validation test gives one; only the scriggo engine
	// reads it.
	CurrentConfig string
	// HTTPResources answer the templates' http.Fetch by URL (the scriggo
	// engine). Only a validation test gives them: Gatehouse never fetches
	// from the network.
	HTTPResources map[string]string
	// OnDemand names the stores of haptic's store: on-demand, which hold
	// the objects fetched so far; Missed, when set, collects the whole
	// keys the templates asked of them and they did not hold
	// (RecordMisses), for the caller to fetch before rendering again.
	OnDemand map[string]bool
	Missed   *Missed
}

// Output is one rendering. Every text ends with exactly one newline.
type Output struct {
	HAProxyConfig string
	Maps          map[string]string
	Files         map[string]string
	Certs         map[string]string
}

// NewEngine returns the engine templatingSettings.engine names; the empty
// name is the default, gotemplate.
func NewEngine(name string) (Engine, error) {
	if name == "" || name == EngineGoTemplate {
		return goTemplateEngine{}, nil
	}
	enginesMu.RLock()
	engine, ok := engines[name]
	enginesMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown template engine %q (supported: %s)", name, strings.Join(Engines(), ", "))
	}
	return engine, nil
}

// engines are the engines registered besides gotemplate (RegisterEngine).
var (
	enginesMu sync.RWMutex
	engines   = map[string]Engine{}
)

// RegisterEngine adds an engine under its name, from a package of its own
// (an engine with dependencies this package should not have), at init.
// Registering a name twice panics.
func RegisterEngine(e Engine) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if _, dup := engines[e.Name()]; dup || e.Name() == EngineGoTemplate || e.Name() == "" {
		panic("render: engine " + e.Name() + " registered twice")
	}
	engines[e.Name()] = e
}

// Engines are the names NewEngine knows, gotemplate first.
func Engines() []string {
	enginesMu.RLock()
	defer enginesMu.RUnlock()
	return append([]string{EngineGoTemplate}, slices.Sorted(maps.Keys(engines))...)
}

// FailError is the error of a template's fail call; Message is exactly the
// text the template passed, which becomes the admission denial reason.
type FailError struct {
	Message string
}

func (e *FailError) Error() string { return e.Message }

// CompileError reports which template did not compile.
type CompileError struct {
	// Template names the template as the config does: haproxyConfig,
	// templateSnippets[name], maps[name], files[name] or
	// sslCertificates[name].
	Template string
	Err      error
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("compile %s: %v", e.Template, e.Err)
}

func (e *CompileError) Unwrap() error { return e.Err }

// RenderError reports which template failed to render.
type RenderError struct {
	// Template names the template as CompileError.Template does.
	Template string
	Err      error
}

func (e *RenderError) Error() string {
	return fmt.Sprintf("render %s: %v", e.Template, e.Err)
}

func (e *RenderError) Unwrap() error { return e.Err }
