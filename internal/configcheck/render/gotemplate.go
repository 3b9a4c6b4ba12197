package render

import (
	"context"
	"fmt"
	"maps"
	"path"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"text/template/parse"
)

// goTemplateEngine compiles text/template + sprig templates. The zero
// value is the engine NewEngine returns; the fields exist for tests.
type goTemplateEngine struct {
	// withoutEscaping leaves the escaping step out of printing actions, for
	// the benchmark that measures its cost only.
	withoutEscaping bool
	// maxIterations replaces MaxIterations when positive, for tests that
	// exhaust the budget without running ten million iterations.
	maxIterations int64
}

func (goTemplateEngine) Name() string { return EngineGoTemplate }

// outputKind says which Output field a template's text goes to.
type outputKind int

const (
	snippetTemplate outputKind = iota
	haproxyConfigOutput
	mapOutput
	fileOutput
	certOutput
)

// templateSource is one template of a config: its text and its names.
type templateSource struct {
	kind outputKind
	// name is the config's key (snippet name, map file name, ...).
	name string
	// display names the template in errors as the config does.
	display string
	// internal is its name in the text/template set, unique across kinds.
	internal string
	text     string
}

func (e goTemplateEngine) Compile(templates Templates) (Renderer, error) {
	sources := templateSources(templates)
	root := template.New("").Funcs(baseFuncs)
	definedBy := make(map[string]string) // template name → display name of its source
	trees := make(map[string]*parse.Tree)
	for _, source := range sources {
		if owner, taken := definedBy[source.internal]; taken {
			return nil, &CompileError{Template: source.display,
				Err: fmt.Errorf("the name %q is already taken by %s", source.internal, owner)}
		}
		if _, err := root.New(source.internal).Parse(source.text); err != nil {
			return nil, &CompileError{Template: source.display, Err: err}
		}
		if err := recordDefinitions(root, source, definedBy, trees); err != nil {
			return nil, &CompileError{Template: source.display, Err: err}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(definedBy)) { // in a fixed order, for a stable error
		if err := checkFunctionNames(trees[name]); err != nil {
			return nil, &CompileError{Template: definedBy[name], Err: err}
		}
	}
	in := newInclusions(trees)
	executeWeights := make(map[string]int64, len(trees))
	for name, tree := range trees {
		hardenTree(name, tree, !e.withoutEscaping, in)
		executeWeights[name] = in.executeWeight(name)
	}

	renderer := &goTemplateRenderer{root: root, maxIterations: MaxIterations, executeWeights: executeWeights}
	if e.maxIterations > 0 {
		renderer.maxIterations = e.maxIterations
	}
	for _, source := range sources {
		if source.kind == snippetTemplate {
			renderer.snippetNames = append(renderer.snippetNames, source.name)
		} else {
			renderer.outputs = append(renderer.outputs, source)
		}
	}
	return renderer, nil
}

// templateSources lists a config's templates in a fixed order: snippets,
// haproxy.cfg, maps, files, certificates, each by name.
func templateSources(templates Templates) []templateSource {
	var sources []templateSource
	add := func(kind outputKind, field, internalPrefix string, byName map[string]string) {
		for _, name := range slices.Sorted(maps.Keys(byName)) {
			sources = append(sources, templateSource{
				kind:     kind,
				name:     name,
				display:  fmt.Sprintf("%s[%s]", field, name),
				internal: internalPrefix + name,
				text:     byName[name],
			})
		}
	}
	// Snippets keep their own names, so {{ template "name" . }} works too.
	add(snippetTemplate, "templateSnippets", "", templates.Snippets)
	sources = append(sources, templateSource{
		kind:     haproxyConfigOutput,
		name:     "haproxy.cfg",
		display:  "haproxyConfig",
		internal: "haproxy.cfg",
		text:     templates.HAProxyConfig,
	})
	add(mapOutput, "maps", "map:", templates.Maps)
	add(fileOutput, "files", "file:", templates.Files)
	add(certOutput, "sslCertificates", "cert:", templates.SSLCertificates)
	return sources
}

// recordDefinitions notes the templates source defined (itself and its
// {{define}}s) and refuses a {{define}} replacing a template defined
// elsewhere: text/template would silently let the last definition win.
func recordDefinitions(root *template.Template, source templateSource, definedBy map[string]string, trees map[string]*parse.Tree) error {
	for _, tmpl := range root.Templates() {
		if tmpl.Tree == nil {
			continue
		}
		name := tmpl.Name()
		previous, seen := trees[name]
		switch {
		case !seen:
			trees[name] = tmpl.Tree
			definedBy[name] = source.display
		case previous != tmpl.Tree:
			return fmt.Errorf("{{define %q}} redefines the template of that name from %s", name, definedBy[name])
		}
	}
	return nil
}

type goTemplateRenderer struct {
	// root is the parsed set; it is never executed, only cloned.
	root *template.Template
	// snippetNames are sorted, the order renderGlob renders in.
	snippetNames []string
	// outputs are haproxy.cfg, then maps, files and certificates by name.
	outputs       []templateSource
	maxIterations int64
	// executeWeights are what executing each template charges the budget
	// (inclusions.go).
	executeWeights map[string]int64
}

func (r *goTemplateRenderer) Render(ctx context.Context, data Data) (Output, error) {
	data = RecordMisses(data)
	texts, err := r.renderOutputs(ctx, data)
	if err != nil {
		return Output{}, err
	}
	output := Output{
		Maps:  make(map[string]string),
		Files: make(map[string]string),
		Certs: make(map[string]string),
	}
	for i, source := range r.outputs {
		text := withOneTrailingNewline(texts[i])
		switch source.kind {
		case haproxyConfigOutput:
			output.HAProxyConfig = text
		case mapOutput:
			output.Maps[source.name] = text
		case fileOutput:
			output.Files[source.name] = text
		case certOutput:
			output.Certs[source.name] = text
		}
	}
	return output, nil
}

// renderOutputs renders every output, in parallel up to GOMAXPROCS (each in
// a run of its own: a run's render depth is not shared), and returns the
// texts in output order. The error is that of the first failing output in
// that order, so it does not depend on scheduling.
func (r *goTemplateRenderer) renderOutputs(ctx context.Context, data Data) ([]string, error) {
	texts := make([]string, len(r.outputs))
	errs := make([]error, len(r.outputs))
	budget := newRenderingBudget(ctx, r.maxIterations)
	workers := min(runtime.GOMAXPROCS(0), len(r.outputs))
	next := make(chan int, len(r.outputs))
	for i := range r.outputs {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				run, err := r.startRun(budget, data)
				if err == nil {
					texts[i], err = run.execute(r.outputs[i].internal)
				}
				if err != nil {
					errs[i] = &RenderError{Template: r.outputs[i].display, Err: err}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return texts, nil
}

// renderingBudget is what one Render may spend, shared by its outputs'
// runs: iterations (range iterations and template inclusions) and bytes
// written. It also carries the context, checked at each iteration,
// inclusion and write, since text/template has no context of its own.
type renderingBudget struct {
	ctx           context.Context
	done          <-chan struct{}
	maxIterations int64
	iterations    atomic.Int64
	written       atomic.Int64
}

func newRenderingBudget(ctx context.Context, maxIterations int64) *renderingBudget {
	return &renderingBudget{ctx: ctx, done: ctx.Done(), maxIterations: maxIterations}
}

// alive is the context's error once it is done.
func (b *renderingBudget) alive() error {
	if b.done == nil {
		return nil
	}
	select {
	case <-b.done:
		return b.ctx.Err()
	default:
		return nil
	}
}

// spendIterations counts n range iterations or template inclusions.
func (b *renderingBudget) spendIterations(n uint64) error {
	if err := b.alive(); err != nil {
		return err
	}
	if n > uint64(b.maxIterations) || b.iterations.Add(int64(n)) > b.maxIterations {
		return limitErrorf("MaxIterations", "the rendering would run more than %d range iterations and template inclusions", b.maxIterations)
	}
	return nil
}

// templateRun is one output's rendering: a clone of the template set whose
// render, renderGlob and guards are bound to this run's data, depth and
// budget. Cloning shares the parse trees, so it costs a map of template
// headers, and lets concurrent renderings each have their own functions.
type templateRun struct {
	budget       *renderingBudget
	set          *template.Template
	data         map[string]any
	snippetNames []string
	// depth is how many rendered snippets and recursive templates are
	// executing, one inside the other.
	depth          int
	executeWeights map[string]int64
}

func (r *goTemplateRenderer) startRun(budget *renderingBudget, data Data) (*templateRun, error) {
	set, err := r.root.Clone()
	if err != nil {
		return nil, fmt.Errorf("clone the compiled templates: %w", err)
	}
	run := &templateRun{
		budget: budget,
		set:    set,
		data: map[string]any{
			"resources":    data.Resources,
			"extraContext": Normalize(data.ExtraContext),
		},
		snippetNames:   r.snippetNames,
		executeWeights: r.executeWeights,
	}
	set.Funcs(template.FuncMap{
		"render":          run.render,
		"renderGlob":      run.renderGlob,
		enterTemplateFunc: run.enterTemplate,
		leaveTemplateFunc: run.leaveTemplate,
		rangeCheckFunc:    run.checkRange,
	})
	return run, nil
}

// enterTemplate is the guard starting a recursive template: it charges
// the template's weight and counts the nesting.
func (run *templateRun) enterTemplate(weight int64) (string, error) {
	if err := run.budget.spendIterations(uint64(weight)); err != nil {
		return "", err
	}
	return "", run.nest()
}

func (run *templateRun) nest() error {
	if run.depth >= MaxTemplateDepth {
		return limitErrorf("MaxTemplateDepth", "templates nested more than %d deep (a template or snippet including itself?)", MaxTemplateDepth)
	}
	run.depth++
	return nil
}

func (run *templateRun) leaveTemplate() (string, error) {
	run.depth--
	return "", nil
}

// checkRange charges the items a range is about to iterate over, times
// the weight of its body (inclusions.go), to the budget, so that
// {{ range 1000000000 }} fails before its first iteration and nested ranges
// fail once their product exceeds it. (A per-iteration count would be exact
// for a range left early by break, but costs a function call per
// iteration; this is one per range.)
func (run *templateRun) checkRange(itemWeight int64, value any) (any, error) {
	var items uint64
	switch v := reflect.ValueOf(value); v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		items = uint64(max(v.Int(), 0))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		items = v.Uint()
	case reflect.Slice, reflect.Array, reflect.Map:
		items = uint64(v.Len())
	}
	if err := run.budget.spendIterations(saturatingMul(items, uint64(itemWeight))); err != nil {
		return nil, err
	}
	return value, nil
}

// render is the template function render "snippet".
func (run *templateRun) render(name string) (string, error) {
	if _, found := slices.BinarySearch(run.snippetNames, name); !found {
		return "", fmt.Errorf("no template snippet named %q", name)
	}
	return run.execute(name)
}

// renderGlob is the template function renderGlob "pattern".
func (run *templateRun) renderGlob(pattern string) (string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return "", fmt.Errorf("pattern %q: %w", pattern, err)
	}
	var out strings.Builder
	for _, name := range run.snippetNames {
		if matched, _ := path.Match(pattern, name); !matched {
			continue
		}
		text, err := run.execute(name)
		if err != nil {
			return "", err
		}
		if err := checkValueBytes("renderGlob", int64(out.Len()+len(text))); err != nil {
			return "", err
		}
		out.WriteString(text)
	}
	return out.String(), nil
}

// execute renders the template internalName of the run's set, charging
// its weight and counting the nesting.
func (run *templateRun) execute(internalName string) (string, error) {
	if err := run.budget.spendIterations(uint64(run.executeWeights[internalName])); err != nil {
		return "", err
	}
	if err := run.nest(); err != nil {
		return "", err
	}
	defer func() { run.depth-- }()
	writer := &boundedWriter{budget: run.budget}
	if err := run.set.ExecuteTemplate(writer, internalName, run.data); err != nil {
		return "", err
	}
	return writer.out.String(), nil
}

// boundedWriter collects one template execution's output, up to
// MaxFileBytes, and counts it against the rendering's MaxRenderingBytes.
// Its write errors (and the context's, once done) stop text/template at
// its next output.
type boundedWriter struct {
	out    strings.Builder
	budget *renderingBudget
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if err := w.budget.alive(); err != nil {
		return 0, err
	}
	if w.out.Len()+len(p) > MaxFileBytes {
		return 0, limitErrorf("MaxFileBytes", "the output would be larger than %d bytes", MaxFileBytes)
	}
	if w.budget.written.Add(int64(len(p))) > MaxRenderingBytes {
		return 0, limitErrorf("MaxRenderingBytes", "the rendering would write more than %d bytes in all", MaxRenderingBytes)
	}
	return w.out.Write(p)
}

// withOneTrailingNewline ends text with exactly one newline: HAProxy needs
// the last line terminated, and templates rarely agree on trailing blank
// lines.
func withOneTrailingNewline(text string) string {
	return strings.TrimRight(text, "\n") + "\n"
}
