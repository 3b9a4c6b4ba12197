package scriggo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"testing/fstest"

	sg "github.com/open2b/scriggo"
	"github.com/open2b/scriggo/ast"
	"github.com/open2b/scriggo/native"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// Name is the engine's templatingSettings.engine value, haptic's.
const Name = "scriggo"

// Engine compiles haptic's Scriggo templates.
type Engine struct{}

var _ render.Engine = Engine{}

// The engine is there for templatingSettings.engine wherever this package
// is linked: configcheck's render worker links it (renderproc), so every
// process that compiles or renders a config has it.
func init() { render.RegisterEngine(Engine{}) }

// Name is "scriggo".
func (Engine) Name() string { return Name }

// entryPrefix marks the file names under which a config's outputs are
// built, so that no snippet name can be taken for one. Outputs live at the
// root beside the snippets: Scriggo resolves a relative import or render
// against the importing file's directory, and haptic's templates name
// snippets relative to the root.
const entryPrefix = "@"

// output is one template a rendering outputs.
type output struct {
	kind    outputKind
	name    string // the output's file name; empty for haproxy.cfg
	display string // as the config names it, e.g. maps[host.map]
	file    string // its name in the template file system
}

type outputKind int

const (
	haproxyConfigOutput outputKind = iota
	mapOutput
	fileOutput
	certOutput
)

// Compile builds every output's template. Snippets are built only as the
// outputs render or import them, as haptic's fork does: a snippet nothing
// reaches is never checked.
func (e Engine) Compile(templates render.Templates) (render.Renderer, error) {
	r, _, err := e.CompileLearned(templates, nil)
	return r, err
}

var _ render.LearningEngine = Engine{}

// CompileLearned is Compile starting from the repairs an earlier compile
// of the same templates learned (repair.go), and returning those it knows
// after: with them a compile takes one build per output instead of one
// per repair.
func (Engine) CompileLearned(templates render.Templates, learned []byte) (render.Renderer, []byte, error) {
	r, known, err := compile(templates, decodeRepairs(learned))
	if err != nil {
		return nil, nil, err
	}
	return r, known.encode(), nil
}

func compile(templates render.Templates, learned *repairs) (render.Renderer, *repairs, error) {
	for name := range templates.Snippets {
		if err := checkSnippetName(name); err != nil {
			return nil, nil, &render.CompileError{Template: "templateSnippets[" + name + "]", Err: err}
		}
	}
	outputs := []output{{kind: haproxyConfigOutput, display: "haproxyConfig"}}
	sources := map[string]string{}
	for kind, names := range map[outputKind]map[string]string{mapOutput: templates.Maps, fileOutput: templates.Files, certOutput: templates.SSLCertificates} {
		for _, name := range slices.Sorted(maps.Keys(names)) {
			outputs = append(outputs, output{kind: kind, name: name, display: fmt.Sprintf("%s[%s]", kindField[kind], name)})
		}
	}
	// haproxy.cfg first, then maps, files and certificates by name, as
	// haptic renders them (its parallel renders share nothing, so order
	// is only the order errors are reported in).
	slices.SortStableFunc(outputs, func(a, b output) int { return int(a.kind) - int(b.kind) })
	for i := range outputs {
		outputs[i].file = entryPrefix + strings.ReplaceAll(outputs[i].display, "/", "%2F")
		switch outputs[i].kind {
		case haproxyConfigOutput:
			sources[outputs[i].file] = templates.HAProxyConfig
		case mapOutput:
			sources[outputs[i].file] = templates.Maps[outputs[i].name]
		case fileOutput:
			sources[outputs[i].file] = templates.Files[outputs[i].name]
		case certOutput:
			sources[outputs[i].file] = templates.SSLCertificates[outputs[i].name]
		}
	}
	maps.Copy(sources, templates.Snippets)

	preparer := newPreparer(templates.Snippets)
	files := fstest.MapFS{}
	trims := map[string]*prepared{}
	for file, src := range sources {
		prep, err := preparer.prepare(file, src)
		if err != nil {
			return nil, nil, &render.CompileError{Template: displayName(file), Err: err}
		}
		files[file] = &fstest.MapFile{Data: []byte(prep.text)}
		trims[file] = prep
	}
	fsys := textFS{files}

	r := &renderer{outputs: outputs, state: &state{snippetNames: slices.Sorted(maps.Keys(templates.Snippets))}}
	r.built = make([]*sg.Template, len(outputs))
	for i, out := range outputs {
		built, err := build(fsys, out.file, trims, learned, r.state)
		if err != nil {
			return nil, nil, &render.CompileError{Template: out.display, Err: err}
		}
		r.built[i] = built
	}
	return r, learned, nil
}

var kindField = map[outputKind]string{
	haproxyConfigOutput: "haproxyConfig",
	mapOutput:           "maps",
	fileOutput:          "files",
	certOutput:          "sslCertificates",
}

// checkSnippetName refuses the snippet names the template file system
// could not serve as haptic means them.
func checkSnippetName(name string) error {
	switch {
	case name == "" || strings.Contains(name, "/"):
		return fmt.Errorf("a snippet name must be non-empty and without a slash (Scriggo would resolve it as a directory): %q", name)
	case strings.HasPrefix(name, entryPrefix):
		return fmt.Errorf("a snippet name must not start with %q, which names the outputs: %q", entryPrefix, name)
	case !fs.ValidPath(name):
		return fmt.Errorf("invalid snippet name %q", name)
	}
	return nil
}

// displayName is how the config names a template file.
func displayName(file string) string {
	if display, ok := strings.CutPrefix(file, entryPrefix); ok {
		return strings.ReplaceAll(display, "%2F", "/")
	}
	return "templateSnippets[" + file + "]"
}

// build builds one output with the transformations that give haptic's
// meaning to upstream's tree, repairing it build after build (repair.go).
func build(fsys textFS, file string, trims map[string]*prepared, learned *repairs, st *state) (*sg.Template, error) {
	globals := st.declarations()
	for {
		index := newNodeIndex()
		template, err := buildOnce(fsys, file, &sg.BuildOptions{
			Globals:         globals,
			TreeTransformer: func(tree *ast.Tree) error { return transform(tree, trims, learned, index) },
		})
		if err == nil {
			return template, nil
		}
		if !learned.learn(err, index) {
			return nil, repairError(err, learned)
		}
	}
}

func buildOnce(fsys textFS, file string, options *sg.BuildOptions) (template *sg.Template, err error) {
	defer func() {
		// Upstream's checker panics on some inputs instead of returning
		// an error (a top-level return in a built file): a config
		// author's template must not take the worker down with it.
		if p := recover(); p != nil {
			template, err = nil, fmt.Errorf("scriggo: internal error building the template: %v", p)
		}
	}()
	return sg.BuildTemplate(fsys, file, options)
}

// textFS serves the prepared templates, every one as text: a template
// file's format would otherwise follow its extension, and an output named
// index.html would be escaped as HTML.
type textFS struct{ fstest.MapFS }

func (textFS) Format(string) (sg.Format, error) { return sg.FormatText, nil }

// renderer renders a config's built outputs. Upstream fills a global
// declared to the template as a value only at the top level of a run, not
// in macros and function literals, so globals are declared as pointers
// into state, which each rendering sets: one rendering at a time.
type renderer struct {
	outputs []output
	built   []*sg.Template
	mu      sync.Mutex
	state   *state
}

// Render renders every output in order.
func (r *renderer) Render(ctx context.Context, data render.Data) (render.Output, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// first_seen's memory lasts one rendering, across its outputs.
	ctx = withRenderScope(ctx)
	data = render.RecordMisses(data)
	if err := r.state.reset(data); err != nil {
		return render.Output{}, err
	}
	out := render.Output{Maps: map[string]string{}, Files: map[string]string{}, Certs: map[string]string{}}
	for i, o := range r.outputs {
		text, err := run(ctx, r.built[i])
		if err != nil {
			return render.Output{}, &render.RenderError{Template: o.display, Err: err}
		}
		text = withOneTrailingNewline(text)
		switch o.kind {
		case haproxyConfigOutput:
			out.HAProxyConfig = text
		case mapOutput:
			out.Maps[o.name] = text
		case fileOutput:
			out.Files[o.name] = text
		case certOutput:
			out.Certs[o.name] = text
		}
	}
	if err := addRegisteredFiles(&out, r.state.fileRegistry); err != nil {
		return render.Output{}, err
	}
	return out, nil
}

// addRegisteredFiles adds the files templates registered to the outputs,
// by their file names: maps to maps, certificates to certificates, the
// rest (general files, crt-lists) to files. A registered file may not
// replace a configured output with other content.
func addRegisteredFiles(out *render.Output, registry *fileRegistry) error {
	for _, key := range slices.Sorted(maps.Keys(registry.files)) {
		file := registry.files[key]
		outputs, kind := out.Files, "files"
		switch file.fileType {
		case "map":
			outputs, kind = out.Maps, "maps"
		case "cert":
			outputs, kind = out.Certs, "sslCertificates"
		}
		name := path.Base(file.path)
		content := withOneTrailingNewline(file.content)
		if existing, ok := outputs[name]; ok && existing != content {
			return &render.RenderError{Template: kind + "[" + name + "]", Err: fmt.Errorf("fileRegistry.Register(%q, %q) gives other content than the output of that name", file.fileType, file.name)}
		}
		outputs[name] = content
	}
	return nil
}

// run runs one built template.
func run(ctx context.Context, template *sg.Template) (text string, err error) {
	defer func() {
		// Upstream re-panics a panic raised in a template called back
		// from native code instead of returning it.
		if p := recover(); p != nil {
			text, err = "", fmt.Errorf("scriggo: %v", p)
		}
	}()
	var b strings.Builder
	err = template.Run(&b, nil, &sg.RunOptions{Context: ctx})
	var failed *failError
	switch {
	case errors.As(err, &failed):
		return "", &render.FailError{Message: failed.message}
	case err != nil:
		return "", err
	}
	return b.String(), nil
}

// withOneTrailingNewline ends text with exactly one newline, as every
// output does.
func withOneTrailingNewline(text string) string {
	return strings.TrimRight(text, "\n") + "\n"
}

// failError is what fail stops a rendering with; native.Env's Stop ends
// the run and Run returns it as it is.
type failError struct{ message string }

func (e *failError) Error() string { return e.message }

// fail is haptic's fail(message): the rendering stops and the message is
// its error. It returns a string, never reached, so that {{ fail(…) }}
// type-checks as haptic's templates write it.
func fail(env native.Env, message string) string {
	// A plain panic here would, inside a template called back from
	// native code, make Run panic; Stop is how upstream ends a run.
	env.Stop(&failError{message: message})
	return ""
}
