package render

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

func compile(t testing.TB, templates Templates) Renderer {
	t.Helper()
	engine, err := NewEngine(EngineGoTemplate)
	if err != nil {
		t.Fatal(err)
	}
	renderer, err := engine.Compile(templates)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return renderer
}

// renderConfig renders a haproxyConfig template (plus snippets) and returns
// haproxy.cfg.
func renderConfig(t testing.TB, snippets map[string]string, config string, data Data) (string, error) {
	t.Helper()
	output, err := compile(t, Templates{Snippets: snippets, HAProxyConfig: config}).Render(context.Background(), data)
	return output.HAProxyConfig, err
}

// shopData holds an Ingress (decoded from JSON, so its numbers were floats)
// whose backend is the Service api, and that Service.
func shopData(t testing.TB) Data {
	t.Helper()
	ingress := decodeJSON(t, `{
		"metadata": {"namespace": "shop", "name": "main"},
		"spec": {"rules": [{"host": "shop.example", "http": {"paths": [
			{"path": "/", "backend": {"service": {"name": "api", "port": {"number": 8080}}}},
			{"path": "/static", "backend": {"service": {"name": "static", "port": {"number": 80}}}}
		]}}]}
	}`)
	service := decodeJSON(t, `{"metadata": {"namespace": "shop", "name": "api"}, "spec": {"ports": [{"port": 8080}]}}`)
	byNsName := mustIndexer(t, "metadata.namespace", "metadata.name")
	return Data{
		Resources: map[string]Store{
			"ingresses": mustStore(t, byNsName, ingress),
			"services":  mustStore(t, byNsName, service),
		},
		ExtraContext: map[string]any{"timeoutSeconds": 30.0, "mode": "http"},
	}
}

func TestRenderTemplateFunctionsAndData(t *testing.T) {
	tests := []struct {
		name     string
		snippets map[string]string
		config   string
		want     string
	}{
		{"sprig function", nil, `{{ "web" | upper }} {{ list 1 2 3 | len }}`, "WEB 3\n"},
		{"extraContext", nil, `mode {{ .extraContext.mode }} timeout {{ .extraContext.timeoutSeconds }}s`, "mode http timeout 30s\n"},
		{"List and field chains",
			nil,
			`{{ range $ing := .resources.ingresses.List }}{{ range $r := $ing.spec.rules }}{{ range $r.http.paths }}{{ $r.host }}{{ .path }} {{ end }}{{ end }}{{ end }}`,
			"shop.example/ shop.example/static \n"},
		{"whole numbers print without a decimal point, and stay integers for arithmetic",
			nil,
			`{{ $svc := .resources.services.GetSingle "shop" "api" }}{{ (index $svc.spec.ports 0).port }} {{ add (index $svc.spec.ports 0).port 1 }} {{ .extraContext.timeoutSeconds }}`,
			"8080 8081 30\n"},
		{"Fetch by a prefix of the keys", nil, `{{ range .resources.services.Fetch "shop" }}{{ .metadata.name }}{{ end }}`, "api\n"},
		{"Fetch with an integer key", nil, `[{{ range .resources.services.Fetch "shop" 8080 }}x{{ end }}]`, "[]\n"},
		{"missing fields print empty",
			nil,
			`[{{ $ing := .resources.ingresses.GetSingle "shop" "main" }}{{ $ing.spec.nothing }}|{{ $ing.spec.nothing.deeper.still }}|{{ .extraContext.absent }}|{{ .resources.unknown }}]`,
			"[|||]\n"},
		{"a missing field is falsy and defaultable",
			nil,
			`{{ if .extraContext.absent }}yes{{ else }}no{{ end }} {{ .extraContext.absent | default "fallback" }}`,
			"no fallback\n"},
		{"GetSingle without a match is nil", nil, `{{ if not (.resources.services.GetSingle "shop" "nope") }}none{{ end }}`, "none\n"},
		{"text the template writes on purpose stays", nil, `<no value> <nil>`, "<no value> <nil>\n"},
		{"render passes the same data",
			map[string]string{"defaults": `timeout {{ .extraContext.timeoutSeconds }}s`},
			`{{ render "defaults" }}|{{ render "defaults" | indent 2 }}`,
			"timeout 30s|  timeout 30s\n"},
		{"renderGlob renders matching snippets in name order",
			map[string]string{
				"backend-20-web": "web;", "backend-10-api": "api;", "backend-30-zz": "zz;",
				"frontend-main": "fe;",
			},
			`{{ renderGlob "backend-*" }}|{{ renderGlob "frontend-*" }}|{{ renderGlob "none-*" }}`,
			"api;web;zz;|fe;|\n"},
		{"template includes a snippet with another dot",
			map[string]string{"host": `{{ .spec.rules | len }} rule(s)`},
			`{{ range .resources.ingresses.List }}{{ template "host" . }}{{ end }}`,
			"1 rule(s)\n"},
		{"whitespace trimming", nil, "a\n{{- /* comment */ -}}\nb", "ab\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := renderConfig(t, tt.snippets, tt.config, shopData(t))
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tt.want {
				t.Errorf("haproxy.cfg = %q, want %q", got, tt.want)
			}
		})
	}
}

// backendTemplate is the example: a missing Service fails the render.
const backendTemplate = `{{ range $ing := .resources.ingresses.List }}{{ range $ing.spec.rules }}{{ range .http.paths }}
{{- $name := .backend.service.name }}
{{- $svc := $.resources.services.GetSingle $ing.metadata.namespace $name }}
{{- if not $svc }}{{ fail (printf "Service '%s' not found" $name) }}{{ end -}}
backend {{ $ing.metadata.namespace }}-{{ $name }}
{{ end }}{{ end }}{{ end }}`

func TestRenderFail(t *testing.T) {
	tests := []struct {
		name         string
		templates    Templates
		wantTemplate string
		wantMessage  string
	}{
		{"in haproxyConfig", Templates{HAProxyConfig: backendTemplate}, "haproxyConfig", "Service 'static' not found"},
		{"in a rendered snippet",
			Templates{Snippets: map[string]string{"backends": backendTemplate}, HAProxyConfig: `{{ render "backends" }}`},
			"haproxyConfig", "Service 'static' not found"},
		{"in a snippet rendered by glob inside a map",
			Templates{
				Snippets:      map[string]string{"check-1": `{{ fail "exact: text, with 'quotes' and \"more\"" }}`},
				HAProxyConfig: "global",
				Maps:          map[string]string{"host.map": `{{ renderGlob "check-*" }}`},
			},
			"maps[host.map]", `exact: text, with 'quotes' and "more"`},
		{"in a certificate", Templates{HAProxyConfig: "global", SSLCertificates: map[string]string{"a.pem": `{{ fail "no key" }}`}},
			"sslCertificates[a.pem]", "no key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compile(t, tt.templates).Render(context.Background(), shopData(t))
			var renderErr *RenderError
			if !errors.As(err, &renderErr) || renderErr.Template != tt.wantTemplate {
				t.Fatalf("err = %v, want a *RenderError for %s", err, tt.wantTemplate)
			}
			var failErr *FailError
			if !errors.As(err, &failErr) {
				t.Fatalf("err = %v, want a *FailError inside", err)
			}
			if failErr.Message != tt.wantMessage {
				t.Errorf("FailError.Message = %q, want %q", failErr.Message, tt.wantMessage)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	duplicate := object("shop", "api", nil)
	sameLabel := func(name string) map[string]any { return object("shop", name, map[string]any{"app": "x"}) }
	data := Data{Resources: map[string]Store{
		"services": mustStore(t, mustIndexer(t, "metadata.labels.app"), duplicate, sameLabel("a"), sameLabel("b")),
	}}
	tests := []struct {
		name     string
		snippets map[string]string
		config   string
		want     string
	}{
		{"GetSingle with several matches names the keys", nil,
			`{{ .resources.services.GetSingle "x" }}`, `GetSingle "x": 2 objects match`},
		{"Fetch with too many keys", nil,
			`{{ .resources.services.Fetch "x" "y" }}`, "2 keys given, but the store is indexed by 1"},
		{"render of an unknown snippet", nil, `{{ render "nope" }}`, `no template snippet named "nope"`},
		{"recursive snippet", map[string]string{"loop": `{{ render "loop" }}`}, `{{ render "loop" }}`, "nested more than 100 deep"},
		{"bad glob", nil, `{{ renderGlob "[" }}`, "syntax error in pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderConfig(t, tt.snippets, tt.config, data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			var failErr *FailError
			if errors.As(err, &failErr) {
				t.Errorf("a non-fail error carries a *FailError: %v", failErr)
			}
		})
	}
}

// TestRenderErrorIsTheFirstOutputsInOrder: outputs render in parallel, but
// when several fail the error is always that of the first in output order
// (haproxy.cfg, then maps by name), whatever finished first.
func TestRenderErrorIsTheFirstOutputsInOrder(t *testing.T) {
	r, err := goTemplateEngine{}.Compile(Templates{
		HAProxyConfig: "global\n",
		Maps: map[string]string{
			"a.map": `{{ range until 20000 }}{{ end }}{{ fail "a fails, slowly" }}`,
			"b.map": `{{ fail "b fails at once" }}`,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		_, err := r.Render(context.Background(), Data{})
		var renderErr *RenderError
		if !errors.As(err, &renderErr) || renderErr.Template != "maps[a.map]" {
			t.Fatalf("err = %v, want maps[a.map]'s", err)
		}
	}
}

func TestRenderTrailingNewline(t *testing.T) {
	output, err := compile(t, Templates{
		HAProxyConfig: "global\n\n\n",
		Maps:          map[string]string{"none.map": "a b", "empty.map": "", "one.map": "a b\n"},
		Files:         map[string]string{"503.http": "HTTP/1.0 503\r\n\r\n"},
		SSLCertificates: map[string]string{
			"a.pem": "-----BEGIN-----\n{{ \"\" }}\n\n",
		},
	}).Render(context.Background(), Data{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"haproxy.cfg": "global\n",
		"none.map":    "a b\n",
		"empty.map":   "\n",
		"one.map":     "a b\n",
		"503.http":    "HTTP/1.0 503\r\n\r\n",
		"a.pem":       "-----BEGIN-----\n",
	}
	got := map[string]string{"haproxy.cfg": output.HAProxyConfig}
	for _, outputs := range []map[string]string{output.Maps, output.Files, output.Certs} {
		for name, text := range outputs {
			got[name] = text
		}
	}
	for name, text := range want {
		if got[name] != text {
			t.Errorf("%s = %q, want %q", name, got[name], text)
		}
	}
	if len(got) != len(want) {
		t.Errorf("outputs = %v, want %d of them", got, len(want))
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name         string
		templates    Templates
		wantTemplate string
		want         string
	}{
		{"syntax error names the map", Templates{Maps: map[string]string{"host.map": "{{ if }}"}}, "maps[host.map]", "missing value for if"},
		{"unknown function", Templates{HAProxyConfig: "{{ nosuch 1 }}"}, "haproxyConfig", `function "nosuch" not defined`},
		{"env is not available", Templates{Files: map[string]string{"f": `{{ env "HOME" }}`}}, "files[f]", `function "env" not defined`},
		{"getHostByName is not available", Templates{HAProxyConfig: `{{ getHostByName "x" }}`}, "haproxyConfig", `function "getHostByName" not defined`},
		{"snippet named like an output", Templates{Snippets: map[string]string{"haproxy.cfg": "x"}}, "haproxyConfig",
			`the name "haproxy.cfg" is already taken by templateSnippets[haproxy.cfg]`},
		{"define redefining a snippet",
			Templates{Snippets: map[string]string{"a": "A", "b": `{{ define "a" }}other{{ end }}`}},
			"templateSnippets[b]", `{{define "a"}} redefines the template of that name from templateSnippets[a]`},
		{"snippet named like an earlier define",
			Templates{Snippets: map[string]string{"a": `{{ define "b" }}B{{ end }}`, "b": "x"}},
			"templateSnippets[b]", `already taken by templateSnippets[a]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := goTemplateEngine{}.Compile(tt.templates)
			var compileErr *CompileError
			if !errors.As(err, &compileErr) || compileErr.Template != tt.wantTemplate || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a *CompileError for %s containing %q", err, tt.wantTemplate, tt.want)
			}
		})
	}
}

func TestNewEngine(t *testing.T) {
	for _, name := range []string{"", "gotemplate"} {
		if engine, err := NewEngine(name); err != nil || engine.Name() != EngineGoTemplate {
			t.Errorf("NewEngine(%q) = %v, %v", name, engine, err)
		}
	}
	if _, err := NewEngine("scriggo"); err == nil || !strings.Contains(err.Error(), `unknown template engine "scriggo" (supported: gotemplate)`) {
		t.Errorf("NewEngine(scriggo) err = %v", err)
	}
}

func TestRenderStopsWhenContextEnds(t *testing.T) {
	renderer := compile(t, Templates{HAProxyConfig: `{{ range $i := until 100000 }}line {{ $i }}{{ end }}`})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := renderer.Render(ctx, Data{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}

	// Cancelled while rendering (here by a store call): the next write stops it.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	cancelling := compile(t, Templates{
		HAProxyConfig: `before {{ range .resources.slow.List }}line{{ end }}`,
	})
	data := Data{Resources: map[string]Store{"slow": cancellingStore{cancel: cancel}}}
	if _, err := cancelling.Render(ctx, data); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// cancellingStore ends the rendering's context when listed, standing in for
// a render that runs past its deadline.
type cancellingStore struct {
	cancel context.CancelFunc
}

func (s cancellingStore) List() []map[string]any {
	s.cancel()
	return []map[string]any{object("", "a", nil)}
}

func (s cancellingStore) Fetch(...any) ([]map[string]any, error) { return nil, nil }

func (s cancellingStore) GetSingle(...any) (map[string]any, error) { return nil, nil }

func TestRenderConcurrently(t *testing.T) {
	renderer := compile(t, Templates{
		Snippets:      map[string]string{"backends": backendTemplate},
		HAProxyConfig: `{{ render "backends" }}`,
	})
	data := shopData(t)
	services := data.Resources["services"].(*MemoryStore)
	if err := services.Upsert(object("shop", "static", nil)); err != nil {
		t.Fatal(err)
	}
	want := "backend shop-api\nbackend shop-static\n"
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				output, err := renderer.Render(context.Background(), data)
				if err != nil || output.HAProxyConfig != want {
					t.Errorf("Render = %q, %v; want %q", output.HAProxyConfig, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestRenderThroughOverlay(t *testing.T) {
	renderer := compile(t, Templates{HAProxyConfig: backendTemplate})
	data := shopData(t)
	services := data.Resources["services"].(IndexedStore)
	if _, err := renderer.Render(context.Background(), data); err == nil {
		t.Fatal("want Service 'static' not found before the overlay")
	}
	withStatic, err := Overlay(services, OperationCreate, object("shop", "static", nil))
	if err != nil {
		t.Fatal(err)
	}
	data.Resources = map[string]Store{"ingresses": data.Resources["ingresses"], "services": withStatic}
	output, err := renderer.Render(context.Background(), data)
	if err != nil {
		t.Fatalf("Render through the overlay: %v", err)
	}
	if output.HAProxyConfig != "backend shop-api\nbackend shop-static\n" {
		t.Errorf("haproxy.cfg = %q", output.HAProxyConfig)
	}
}
