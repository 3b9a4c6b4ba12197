package render

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

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
// step changes nothing in the example's rendering.
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
	if want := "backend be_custom_0010\n  server s1 10.96.0.11:80\n"; !strings.Contains(escaped.HAProxyConfig, want) {
		t.Fatalf("haproxy.cfg lacks %q:\n%.800s", want, escaped.HAProxyConfig)
	}
}

// BenchmarkExampleEscaping renders the example config over 1,000 Ingresses
// with and without the escaping step, alternating within each iteration so
// that both see the same machine load, and reports the ratio of their times
// (escaped/unescaped) beside each one's ns/render:
//
//	go test ./internal/configcheck/render -run '^$' -bench ExampleEscaping -benchtime 200x
func BenchmarkExampleEscaping(b *testing.B) {
	templates, data := exampleTemplates(b), exampleData(b)
	escaped := compileWith(b, goTemplateEngine{}, templates)
	unescaped := compileWith(b, goTemplateEngine{withoutEscaping: true}, templates)
	ctx := context.Background()
	var escapedTime, unescapedTime time.Duration
	renders := 0
	for b.Loop() {
		start := time.Now()
		if _, err := unescaped.Render(ctx, data); err != nil {
			b.Fatal(err)
		}
		middle := time.Now()
		if _, err := escaped.Render(ctx, data); err != nil {
			b.Fatal(err)
		}
		escapedTime += time.Since(middle)
		unescapedTime += middle.Sub(start)
		renders++
	}
	b.ReportMetric(float64(escapedTime)/float64(unescapedTime), "escaped/unescaped")
	b.ReportMetric(float64(escapedTime.Nanoseconds())/float64(renders), "ns/escaped-render")
	b.ReportMetric(float64(unescapedTime.Nanoseconds())/float64(renders), "ns/unescaped-render")
}
