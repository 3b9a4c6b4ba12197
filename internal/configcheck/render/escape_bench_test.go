package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

// exampleTemplates reads the templates of examples/configcheck/config.yaml
// (only them: the config's other fields are configcheck's business).
func exampleTemplates(t testing.TB) Templates {
	t.Helper()
	data, err := os.ReadFile("../../../examples/configcheck/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type template struct{ Template string }
	var config struct {
		Spec struct {
			TemplateSnippets map[string]template
			HAProxyConfig    template
			Maps             map[string]template
		}
	}
	if err := yaml.Unmarshal(data, &config); err != nil {
		t.Fatal(err)
	}
	templates := Templates{HAProxyConfig: config.Spec.HAProxyConfig.Template, Snippets: map[string]string{}, Maps: map[string]string{}}
	for name, snippet := range config.Spec.TemplateSnippets {
		templates.Snippets[name] = snippet.Template
	}
	for name, m := range config.Spec.Maps {
		templates.Maps[name] = m.Template
	}
	return templates
}

// exampleData is 1,000 Ingresses, each to a Service of its own; one in
// ten names its backend with the annotation.
func exampleData(t testing.TB) Data {
	byNsName := mustIndexer(t, "metadata.namespace", "metadata.name")
	var ingresses, services []map[string]any
	for i := range 1000 {
		metadata := map[string]any{"namespace": "app", "name": fmt.Sprintf("ing-%04d", i)}
		if i%10 == 0 {
			metadata["annotations"] = map[string]any{tenantAnnotation: fmt.Sprintf("be_custom_%04d", i)}
		}
		services = append(services, map[string]any{
			"metadata": map[string]any{"namespace": "app", "name": fmt.Sprintf("svc-%04d", i)},
			"spec":     map[string]any{"clusterIP": fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), "ports": []any{map[string]any{"port": 80.0}}},
		})
		ingresses = append(ingresses, map[string]any{
			"metadata": metadata,
			"spec": map[string]any{"ingressClassName": "haproxy", "rules": []any{map[string]any{
				"host": fmt.Sprintf("h%04d.example", i),
				"http": map[string]any{"paths": []any{map[string]any{"path": "/", "pathType": "Prefix",
					"backend": map[string]any{"service": map[string]any{"name": fmt.Sprintf("svc-%04d", i), "port": map[string]any{"number": 80.0}}}}}},
			}}},
		})
	}
	return Data{Resources: map[string]Store{
		"ingresses": mustStore(t, byNsName, ingresses...),
		"services":  mustStore(t, byNsName, services...),
	}}
}

func compileWith(t testing.TB, engine goTemplateEngine, templates Templates) Renderer {
	t.Helper()
	renderer, err := engine.Compile(templates)
	if err != nil {
		t.Fatal(err)
	}
	return renderer
}

// TestEscapingKeepsTheExamplesRendering: over valid objects, the escaping
// step and the limits change nothing in the example's rendering.
func TestEscapingKeepsTheExamplesRendering(t *testing.T) {
	templates, data := exampleTemplates(t), exampleData(t)
	escaped, err := compileWith(t, goTemplateEngine{}, templates).Render(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	unescaped, err := compileWith(t, goTemplateEngine{withoutEscaping: true}, templates).Render(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	if escaped.HAProxyConfig != unescaped.HAProxyConfig || escaped.Maps["hosts.map"] != unescaped.Maps["hosts.map"] {
		t.Fatal("the escaping step changed the rendering")
	}
	before, err := newPreChangeRenderer(t, templates).Render(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	if escaped.HAProxyConfig != before.HAProxyConfig || escaped.Maps["hosts.map"] != before.Maps["hosts.map"] {
		t.Fatal("the rendering differs from the engine's before the escaping step")
	}
	if want := "backend be_custom_0010\n  server s1 10.96.0.11:80\n"; !strings.Contains(escaped.HAProxyConfig, want) {
		t.Fatalf("haproxy.cfg lacks %q:\n%.800s", want, escaped.HAProxyConfig)
	}
}

// preChangeRenderer renders as the engine did before the escaping step and
// the limits, as the benchmark's baseline: sprig's functions as they are,
// printing actions ending in emptyWhenMissing only, no guards, the outputs
// in parallel.
type preChangeRenderer struct {
	set     *template.Template
	outputs []string
}

func newPreChangeRenderer(t testing.TB, templates Templates) *preChangeRenderer {
	set := template.New("").Funcs(sprig.TxtFuncMap()).Funcs(template.FuncMap{"fail": fail, emptyWhenMissingFunc: emptyWhenMissing})
	parse := func(name, text string) {
		if _, err := set.New(name).Parse(text); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range templates.Snippets {
		parse(name, text)
	}
	parse("haproxy.cfg", templates.HAProxyConfig)
	r := &preChangeRenderer{set: set, outputs: []string{"haproxy.cfg"}}
	for name, text := range templates.Maps {
		parse("map:"+name, text)
		r.outputs = append(r.outputs, "map:"+name)
	}
	for _, tmpl := range set.Templates() {
		if tmpl.Tree != nil {
			appendEmptyWhenMissing(tmpl.Tree.Root)
		}
	}
	return r
}

// appendEmptyWhenMissing is the rewrite the engine made before the
// escaping step.
func appendEmptyWhenMissing(list *parse.ListNode) {
	if list == nil {
		return
	}
	for _, node := range list.Nodes {
		switch n := node.(type) {
		case *parse.ActionNode:
			if len(n.Pipe.Decl) == 0 {
				n.Pipe.Cmds = append(n.Pipe.Cmds, callCommand(emptyWhenMissingFunc, n.Pos))
			}
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
}

func (r *preChangeRenderer) Render(_ context.Context, data Data) (Output, error) {
	texts := make([]string, len(r.outputs))
	errs := make([]error, len(r.outputs))
	var wg sync.WaitGroup
	for i, name := range r.outputs {
		wg.Go(func() {
			var out strings.Builder
			errs[i] = r.set.ExecuteTemplate(&out, name, map[string]any{"resources": data.Resources, "extraContext": Normalize(data.ExtraContext)})
			texts[i] = withOneTrailingNewline(out.String())
		})
	}
	wg.Wait()
	output := Output{HAProxyConfig: texts[0], Maps: map[string]string{}}
	for i, name := range r.outputs[1:] {
		output.Maps[strings.TrimPrefix(name, "map:")] = texts[i+1]
	}
	return output, errors.Join(errs...)
}

// BenchmarkExampleEscaping renders the example config over 1,000 Ingresses
// three ways, alternating within each iteration so that all see the same
// machine load: with the escaping step (the engine as it is), without it
// (the limits and guards only), and as before both (preChangeRenderer). It
// reports the ratios of their times, escaped/unescaped (the escaping step)
// and escaped/pre-change (the step, the limits and the guards), beside each
// one's time per rendering:
//
//	go test ./internal/configcheck/render -run '^$' -bench ExampleEscaping -benchtime 200x
func BenchmarkExampleEscaping(b *testing.B) {
	templates, data := exampleTemplates(b), exampleData(b)
	renderers := []Renderer{
		compileWith(b, goTemplateEngine{}, templates),
		compileWith(b, goTemplateEngine{withoutEscaping: true}, templates),
		newPreChangeRenderer(b, templates),
	}
	ctx := context.Background()
	times := make([]time.Duration, len(renderers))
	renders := 0
	for b.Loop() {
		for i, renderer := range renderers {
			start := time.Now()
			if _, err := renderer.Render(ctx, data); err != nil {
				b.Fatal(err)
			}
			times[i] += time.Since(start)
		}
		renders++
	}
	b.ReportMetric(float64(times[0])/float64(times[1]), "escaped/unescaped")
	b.ReportMetric(float64(times[0])/float64(times[2]), "escaped/pre-change")
	for i, name := range []string{"escaped", "unescaped", "pre-change"} {
		b.ReportMetric(float64(times[i].Microseconds())/float64(renders), "µs/"+name)
	}
}
