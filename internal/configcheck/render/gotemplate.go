package render

import (
	"context"
	"fmt"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"
)

// maxRenderDepth bounds render calls nested in one another, so a snippet
// rendering itself fails with a clear error instead of exhausting the stack.
const maxRenderDepth = 100

type goTemplateEngine struct{}

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

func (goTemplateEngine) Compile(templates Templates) (Renderer, error) {
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
	for _, tree := range trees {
		appendEmptyWhenMissing(tree.Root)
	}

	renderer := &goTemplateRenderer{root: root}
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
		for _, name := range sortedKeys(byName) {
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

// appendEmptyWhenMissing makes every printing action ({{ pipeline }}, not
// {{ $x := pipeline }}) end in emptyWhenMissing, so a missing field prints
// nothing. Rewriting the parse tree once is exact where replacing
// "<no value>" in the output (Helm's way) would also erase that text when a
// template writes it on purpose.
func appendEmptyWhenMissing(node parse.Node) {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, child := range n.Nodes {
			appendEmptyWhenMissing(child)
		}
	case *parse.ActionNode:
		if len(n.Pipe.Decl) > 0 {
			return
		}
		identifier := parse.NewIdentifier(emptyWhenMissingFunc).SetPos(n.Pos)
		n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{
			NodeType: parse.NodeCommand,
			Pos:      n.Pos,
			Args:     []parse.Node{identifier},
		})
	case *parse.IfNode:
		appendEmptyWhenMissing(n.List)
		appendEmptyWhenMissing(n.ElseList)
	case *parse.RangeNode:
		appendEmptyWhenMissing(n.List)
		appendEmptyWhenMissing(n.ElseList)
	case *parse.WithNode:
		appendEmptyWhenMissing(n.List)
		appendEmptyWhenMissing(n.ElseList)
	}
}

type goTemplateRenderer struct {
	// root is the parsed set; it is never executed, only cloned.
	root *template.Template
	// snippetNames are sorted, the order renderGlob renders in.
	snippetNames []string
	// outputs are haproxy.cfg, then maps, files and certificates by name.
	outputs []templateSource
}

func (r *goTemplateRenderer) Render(ctx context.Context, data Data) (Output, error) {
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
				run, err := r.startRun(ctx, data)
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

// templateRun is one rendering: a clone of the template set whose render
// and renderGlob are bound to this rendering's data and context. Cloning
// shares the parse trees, so it costs a map of template headers, and lets
// concurrent renderings each have their own functions.
type templateRun struct {
	ctx          context.Context
	set          *template.Template
	data         map[string]any
	snippetNames []string
	depth        int
}

func (r *goTemplateRenderer) startRun(ctx context.Context, data Data) (*templateRun, error) {
	set, err := r.root.Clone()
	if err != nil {
		return nil, fmt.Errorf("clone the compiled templates: %w", err)
	}
	run := &templateRun{
		ctx: ctx,
		set: set,
		data: map[string]any{
			"resources":    data.Resources,
			"extraContext": Normalize(data.ExtraContext),
		},
		snippetNames: r.snippetNames,
	}
	set.Funcs(template.FuncMap{"render": run.render, "renderGlob": run.renderGlob})
	return run, nil
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
		out.WriteString(text)
	}
	return out.String(), nil
}

// execute renders the template internalName of the run's set.
func (run *templateRun) execute(internalName string) (string, error) {
	if err := run.ctx.Err(); err != nil {
		return "", err
	}
	if run.depth >= maxRenderDepth {
		return "", fmt.Errorf("render calls nested more than %d deep at %q (a snippet rendering itself?)", maxRenderDepth, internalName)
	}
	run.depth++
	defer func() { run.depth-- }()

	var out strings.Builder
	writer := &contextWriter{out: &out, ctx: run.ctx, done: run.ctx.Done()}
	if err := run.set.ExecuteTemplate(writer, internalName, run.data); err != nil {
		return "", err
	}
	return out.String(), nil
}

// contextWriter fails writes once ctx is done, which stops text/template
// (it has no context of its own) at its next output.
type contextWriter struct {
	out  *strings.Builder
	ctx  context.Context
	done <-chan struct{}
}

func (w *contextWriter) Write(p []byte) (int, error) {
	if w.done != nil {
		select {
		case <-w.done:
			return 0, w.ctx.Err()
		default:
		}
	}
	return w.out.Write(p)
}

// withOneTrailingNewline ends text with exactly one newline: HAProxy needs
// the last line terminated, and templates rarely agree on trailing blank
// lines.
func withOneTrailingNewline(text string) string {
	return strings.TrimRight(text, "\n") + "\n"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}
