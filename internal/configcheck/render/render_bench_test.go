package render

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"text/template"
)

// The benchmark renders a realistic config for 1,000 Ingresses, each with one
// host and path routed to its own Service, three ways:
//
//   - stores: the config's template looks every backend Service up with
//     Fetch in the Service store (indexed by namespace and name);
//   - overlay: the same, with the Ingress store seen through an admission
//     overlay (CREATE of one more Ingress), as the webhook renders;
//   - baseline-prejoined: the same engine rendering the same text from one
//     store of rows already joined (no lookups), so the difference is the
//     cost of Fetch;
//   - baseline-text-template: plain text/template with sprig over the joined
//     rows as a slice, the floor of what text/template costs.
//
// TestBenchmarkVariantsRenderTheSame checks all of them produce the same
// haproxy.cfg.

const benchIngresses = 1000

const benchConfigTemplate = `global
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client {{ .extraContext.timeoutSeconds }}s
frontend http
  bind :80
  use_backend %[req.hdr(host),lower,map(maps/host.map)]
{{ range $ing := .resources.ingresses.List }}{{ range $rule := $ing.spec.rules }}{{ range $path := $rule.http.paths }}
{{- $name := $path.backend.service.name }}
{{- $services := $.resources.services.Fetch $ing.metadata.namespace $name }}
{{- if not $services }}{{ fail (printf "Service '%s' not found" $name) }}{{ end -}}
backend {{ $ing.metadata.namespace }}_{{ $name }}_{{ $path.backend.service.port.number }}
  balance roundrobin
{{- range $svc := $services }}
  server {{ $svc.metadata.name }} {{ $svc.spec.clusterIP }}:{{ (index $svc.spec.ports 0).port }} check
{{- end }}
{{ end }}{{ end }}{{ end }}`

// benchPrejoinedTemplate writes the same text from rows that already hold
// everything a backend needs.
const benchPrejoinedTemplate = `global
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client {{ .extraContext.timeoutSeconds }}s
frontend http
  bind :80
  use_backend %[req.hdr(host),lower,map(maps/host.map)]
{{ range $row := .rows }}backend {{ $row.namespace }}_{{ $row.service }}_{{ $row.port }}
  balance roundrobin
  server {{ $row.service }} {{ $row.clusterIP }}:{{ $row.port }} check
{{ end }}`

type benchFixture struct {
	ingresses, services []map[string]any
	rows                []map[string]any
}

// newBenchFixture builds the objects as JSON decoding would (numbers as
// float64), so the stores' normalization is exercised too.
func newBenchFixture(ingresses int) benchFixture {
	var fixture benchFixture
	for i := range ingresses {
		namespace := fmt.Sprintf("team-%02d", i%20)
		service := fmt.Sprintf("svc-%04d", i)
		clusterIP := fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)
		fixture.ingresses = append(fixture.ingresses, map[string]any{
			"metadata": map[string]any{"namespace": namespace, "name": fmt.Sprintf("ing-%04d", i)},
			"spec": map[string]any{"rules": []any{map[string]any{
				"host": fmt.Sprintf("app-%04d.example", i),
				"http": map[string]any{"paths": []any{map[string]any{
					"path": "/",
					"backend": map[string]any{"service": map[string]any{
						"name": service, "port": map[string]any{"number": 8080.0},
					}},
				}}},
			}}},
		})
		fixture.services = append(fixture.services, map[string]any{
			"metadata": map[string]any{"namespace": namespace, "name": service},
			"spec":     map[string]any{"clusterIP": clusterIP, "ports": []any{map[string]any{"port": 8080.0}}},
		})
		fixture.rows = append(fixture.rows, map[string]any{
			// metadata orders the rows as the Ingress store orders Ingresses.
			"metadata":  map[string]any{"namespace": namespace, "name": fmt.Sprintf("ing-%04d", i)},
			"namespace": namespace, "service": service, "clusterIP": clusterIP, "port": int64(8080),
		})
	}
	return fixture
}

type benchVariant struct {
	name   string
	render func(ctx context.Context) (string, error)
}

func benchVariants(t testing.TB, fixture benchFixture) []benchVariant {
	byNsName := mustIndexer(t, "metadata.namespace", "metadata.name")
	extraContext := map[string]any{"timeoutSeconds": 30.0}
	ingresses := mustStore(t, byNsName, fixture.ingresses...)
	services := mustStore(t, byNsName, fixture.services...)
	rows := mustStore(t, mustIndexer(t), fixture.rows...)

	configRenderer := compile(t, Templates{HAProxyConfig: benchConfigTemplate})
	prejoinedRenderer := compile(t, Templates{
		HAProxyConfig: strings.ReplaceAll(benchPrejoinedTemplate, ".rows", ".resources.rows.List"),
	})
	plain := template.Must(template.New("haproxy.cfg").Funcs(baseFuncs).Parse(benchPrejoinedTemplate))
	plainRows := rows.List()

	// The overlay adds an Ingress for an existing Service, sorted last.
	proposed := NormalizeObject(fixture.ingresses[0])
	proposed["metadata"] = map[string]any{"namespace": "zz-new", "name": "ing-new"}
	if err := services.Upsert(map[string]any{
		"metadata": map[string]any{"namespace": "zz-new", "name": "svc-0000"},
		"spec":     map[string]any{"clusterIP": "10.0.0.1", "ports": []any{map[string]any{"port": 8080.0}}},
	}); err != nil {
		t.Fatal(err)
	}

	renderWith := func(renderer Renderer, stores map[string]Store) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			output, err := renderer.Render(ctx, Data{Resources: stores, ExtraContext: extraContext})
			return output.HAProxyConfig, err
		}
	}
	return []benchVariant{
		{"stores", renderWith(configRenderer, map[string]Store{"ingresses": ingresses, "services": services})},
		{"overlay", func(ctx context.Context) (string, error) {
			overlay, err := Overlay(ingresses, OperationCreate, proposed)
			if err != nil {
				return "", err
			}
			return renderWith(configRenderer, map[string]Store{"ingresses": overlay, "services": services})(ctx)
		}},
		{"baseline-prejoined", renderWith(prejoinedRenderer, map[string]Store{"rows": rows})},
		{"baseline-text-template", func(context.Context) (string, error) {
			var out strings.Builder
			err := plain.Execute(&out, map[string]any{
				"rows":         plainRows,
				"extraContext": map[string]any{"timeoutSeconds": int64(30)},
			})
			return withOneTrailingNewline(out.String()), err
		}},
	}
}

func TestBenchmarkVariantsRenderTheSame(t *testing.T) {
	variants := benchVariants(t, newBenchFixture(benchIngresses))
	want, err := variants[0].render(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(want, "\nbackend "); n != benchIngresses {
		t.Fatalf("%d backends rendered, want %d", n, benchIngresses)
	}
	if !strings.Contains(want, "backend team-00_svc-0000_8080\n  balance roundrobin\n  server svc-0000 10.0.0.1:8080 check\n") {
		t.Fatalf("unexpected rendering:\n%.600s", want)
	}
	for _, variant := range variants[1:] {
		got, err := variant.render(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", variant.name, err)
		}
		if variant.name == "overlay" {
			// The overlay's extra Ingress renders one more backend, at the end.
			got = strings.TrimSuffix(got, "backend zz-new_svc-0000_8080\n  balance roundrobin\n  server svc-0000 10.0.0.1:8080 check\n")
		}
		if got != want {
			t.Errorf("%s renders differently from stores (%d vs %d bytes)", variant.name, len(got), len(want))
		}
	}
}

// BenchmarkRender1000Ingresses: go test -run '^$' -bench Render1000 ./internal/configcheck/render
func BenchmarkRender1000Ingresses(b *testing.B) {
	for _, variant := range benchVariants(b, newBenchFixture(benchIngresses)) {
		b.Run(variant.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				if _, err := variant.render(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
