package scriggo

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

func renderWith(t *testing.T, templates render.Templates, data render.Data) render.Output {
	t.Helper()
	r, err := Engine{}.Compile(templates)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Render(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTrimMarkersCutAsJinjaDoes(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"no markers keep upstream's line rule", "global\n{% if true %}\n  daemon\n{% end if %}\nend\n", "global\n  daemon\nend\n"},
		{"left marker eats the line break before", "a\n{%- if true %} b{% end %}\n", "a b\n"},
		{"right marker eats what follows", "{% if true -%}\n\n   b\n{%- end %}\n", "b\n"},
		{"show tags trim", "x  {{- 1 -}}  y\n", "x1y\n"},
		{"comments trim", "a\n{#- note -#}\nb\n", "ab\n"},
		{"nothing but markers", "{{- \"\" -}}", "\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := renderWith(t, render.Templates{HAProxyConfig: c.src}, render.Data{})
			if out.HAProxyConfig != c.want {
				t.Fatalf("rendered %q, want %q", out.HAProxyConfig, c.want)
			}
		})
	}
}

func TestSnippetsRenderAndImportWithoutExtensions(t *testing.T) {
	templates := render.Templates{
		HAProxyConfig: `{%- import "util-macros" -%}
frontend fe
{{- render_glob "frontend-*" }}
{{ Backend("be1") }}
{{ render "plain" }}`,
		Snippets: map[string]string{
			"util-macros": `{% macro Backend(name string) %}backend {{ name }}{% end macro %}`,
			"frontend-a":  "\n  bind :80",
			"frontend-b":  "\n  bind :443",
			"plain":       `{{ "plain" }}`,
		},
		Maps: map[string]string{"host.map": `{{ render "plain" }} x`},
	}
	out := renderWith(t, templates, render.Data{})
	want := "frontend fe\n  bind :80\n  bind :443\nbackend be1\nplain\n"
	if out.HAProxyConfig != want {
		t.Fatalf("haproxy.cfg %q, want %q", out.HAProxyConfig, want)
	}
	if out.Maps["host.map"] != "plain x\n" {
		t.Fatalf("host.map %q", out.Maps["host.map"])
	}
}

func TestFailStopsWithItsMessage(t *testing.T) {
	r, err := Engine{}.Compile(render.Templates{
		HAProxyConfig: `{% import "m" %}a{{ M() }}`,
		Snippets:      map[string]string{"m": `{% macro M %}{% fail("Bcrypt hashes not allowed") %}{% end %}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Render(context.Background(), render.Data{})
	var failed *render.FailError
	var rendering *render.RenderError
	if !errors.As(err, &failed) || failed.Message != "Bcrypt hashes not allowed" || !errors.As(err, &rendering) || rendering.Template != "haproxyConfig" {
		t.Fatalf("error %v, want the fail message from haproxyConfig", err)
	}
}

func TestCompileNamesTheTemplateThatFails(t *testing.T) {
	cases := []struct {
		templates render.Templates
		template  string
		says      string
	}{
		{render.Templates{HAProxyConfig: "{{ nope }}"}, "haproxyConfig", "undefined: nope"},
		{render.Templates{HAProxyConfig: "ok", Maps: map[string]string{"a.map": "{% if %}"}}, "maps[a.map]", "a.map"},
		{render.Templates{HAProxyConfig: "ok", Snippets: map[string]string{"a/b": "x"}}, "templateSnippets[a/b]", "without a slash"},
		{render.Templates{HAProxyConfig: "ok", Snippets: map[string]string{"@haproxyConfig": "x"}}, "templateSnippets[@haproxyConfig]", "must not start"},
		{render.Templates{HAProxyConfig: `{{ render_glob "x" y }}`}, "haproxyConfig", "unexpected y"},
		{render.Templates{HAProxyConfig: "{% return %}"}, "haproxyConfig", ""},
	}
	for _, c := range cases {
		_, err := Engine{}.Compile(c.templates)
		var compileErr *render.CompileError
		if !errors.As(err, &compileErr) || compileErr.Template != c.template || !strings.Contains(err.Error(), c.says) {
			t.Errorf("error %v, want one naming %s and saying %q", err, c.template, c.says)
		}
	}
}

func TestOutputsAreTextWhateverTheirExtension(t *testing.T) {
	out := renderWith(t, render.Templates{HAProxyConfig: "x", Files: map[string]string{"page.html": `{{ "<b>&" }}`}}, render.Data{})
	if out.Files["page.html"] != "<b>&\n" {
		t.Fatalf("page.html %q: escaped as HTML", out.Files["page.html"])
	}
}

func TestPipesBecomeCalls(t *testing.T) {
	functions["tstUpper"] = strings.ToUpper
	functions["tstJoin"] = func(a, sep, b string) string { return a + sep + b }
	functions["tstEmpty"] = func(s string) bool { return s == "" }
	t.Cleanup(func() { delete(functions, "tstUpper"); delete(functions, "tstJoin"); delete(functions, "tstEmpty") })
	cases := []struct{ src, want string }{
		{`{{ "a" | tstUpper }}`, "A"},
		{`{{ "a" | tstJoin("-", "b") | tstUpper() }}`, "A-B"},
		{`{{ !("" | tstEmpty) }}`, "false"},
		{`{{ 1 | 2 }}`, "3"},
		{`{{ ("a" + "b") | tstUpper }}`, "AB"},
		{`{% if !"x" | tstEmpty %}not empty{% end %}`, "not empty"},
	}
	for _, c := range cases {
		out := renderWith(t, render.Templates{HAProxyConfig: c.src}, render.Data{})
		if out.HAProxyConfig != c.want+"\n" {
			t.Errorf("%s: rendered %q, want %q", c.src, out.HAProxyConfig, c.want)
		}
	}
	_, err := Engine{}.Compile(render.Templates{HAProxyConfig: `{{ "a" + "b" | tstUpper }}`})
	if err == nil || !strings.Contains(err.Error(), "put the pipe's subject in parentheses") {
		t.Fatalf("unparenthesized operator before a pipe: error %v", err)
	}
}

func TestOrderingComparesNumbersAsNumbers(t *testing.T) {
	store := newStore(t, map[string]any{"metadata": map[string]any{"name": "a", "namespace": "n"}, "spec": map[string]any{"weight": int64(3)}})
	src := `{% for _, o := range resources.things.List() %}{% var w = o.(map[string]any)["spec"].(map[string]any)["weight"] %}` +
		`{% for i := 0; i < w; i++ %}{{ i }}{% end %}{% if w >= 3 %} heavy{% end %}{% if "b" > "a" %} text{% end %}{% end %}`
	out := renderWith(t, render.Templates{HAProxyConfig: src}, render.Data{Resources: map[string]render.Store{"things": store}})
	if out.HAProxyConfig != "012 heavy text\n" {
		t.Fatalf("rendered %q", out.HAProxyConfig)
	}
}

func TestVariadicMethodsGetTheirArguments(t *testing.T) {
	store := newStore(t,
		map[string]any{"metadata": map[string]any{"name": "a", "namespace": "n1"}},
		map[string]any{"metadata": map[string]any{"name": "b", "namespace": "n1"}},
		map[string]any{"metadata": map[string]any{"name": "c", "namespace": "n2"}})
	src := `{{ len(resources.things.Fetch("n1")) }} {{ len(resources.things.Fetch("n1", "b")) }} ` +
		`{{ resources.things.GetSingle("n2", "c") != nil }} {{ resources.things.GetSingle("n1") == nil }}`
	out := renderWith(t, render.Templates{HAProxyConfig: src}, render.Data{Resources: map[string]render.Store{"things": store}})
	if out.HAProxyConfig != "2 1 true true\n" {
		t.Fatalf("rendered %q", out.HAProxyConfig)
	}
}

func newStore(t *testing.T, objs ...map[string]any) render.Store {
	t.Helper()
	indexer, err := render.NewIndexer([]string{"metadata.namespace", "metadata.name"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := render.NewMemoryStore(indexer, objs...)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// haptic's templates treat what dig returns as whatever it holds; the
// repairs (repair.go) give upstream's checker that reading.
func TestLooselyTypedExpressionsAreRepaired(t *testing.T) {
	src := `{% var route = extraContext | dig("route") %}` +
		// an index whose result is then assigned to a typed variable:
		// two repairs of one node (index, then conversion)
		`{% var filters []any = route["filters"] %}{{ len(filters) }}` +
		` {% for _, f := range route["filters"] %}{{ f }},{% end %}` +
		` {{ "w=" + route["weight"] }} {{ route["weight"] + 1 }}` +
		` {{ len(filters) + " filters" }}` +
		`{% var m map[string]any = route["meta"] %} {{ m["k"] }}` +
		// debug names haptic's function: in a snippet rendered without
		// inherit_context, "debug | fallback(false)" is that function,
		// which is not nil (haptic's gateway filters test it so)
		`{% if debug | fallback(false) %} function{% end %}{% if undefinedName | fallback(false) %} undefined{% end %}`
	data := render.Data{ExtraContext: map[string]any{"route": map[string]any{
		"filters": []any{"a", "b"}, "weight": int64(2), "meta": map[string]any{"k": "v"},
	}}}
	out := renderWith(t, render.Templates{HAProxyConfig: src}, data)
	if want := "2 a,b, w=2 3 2 filters v function\n"; out.HAProxyConfig != want {
		t.Fatalf("rendered %q, want %q", out.HAProxyConfig, want)
	}
}

func TestRepairsAreBounded(t *testing.T) {
	defer func(bound int) { maxRepairs = bound }(maxRepairs)
	maxRepairs = 20 // each repair is a build: 2,000 would take half a minute
	var src strings.Builder
	src.WriteString(`{% var x = extraContext | dig("x") %}`)
	for range maxRepairs + 1 {
		src.WriteString(`{{ x["k"] }}`)
	}
	_, err := Engine{}.Compile(render.Templates{HAProxyConfig: src.String()})
	if err == nil || !strings.Contains(err.Error(), "the most a config may need") {
		t.Fatalf("compiled with %d loosely typed indexes: %v", maxRepairs+1, err)
	}
}

func TestLearnedRepairsSaveTheBuilds(t *testing.T) {
	templates := render.Templates{HAProxyConfig: `{% var route = extraContext | dig("route") %}` +
		`{% var filters []any = route["filters"] %}{{ len(filters) }} {{ route["weight"] + 1 }}` +
		`{% for _, f := range route["filters"] %} {{ f }}{% end %}`}
	data := render.Data{ExtraContext: map[string]any{"route": map[string]any{"filters": []any{"a"}, "weight": int64(2)}}}
	var repaired int
	traceRepair = func(spanKey, repair, string) { repaired++ }
	defer func() { traceRepair = nil }()

	first, learned, err := Engine{}.CompileLearned(templates, nil)
	if err != nil {
		t.Fatal(err)
	}
	if repaired == 0 || len(learned) == 0 {
		t.Fatalf("the first compile repaired %d expressions and passed on %q", repaired, learned)
	}
	want, err := first.Render(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}

	for name, given := range map[string][]byte{
		"what it learned": learned,
		"nothing":         nil,
		"nonsense":        []byte(`{"not":"a list"}`),
		"an unknown helper, as a corrupt value would name": []byte(`[{"f":"@haproxyConfig","s":0,"e":3,"w":"os_exec"}]`),
	} {
		repaired = 0
		again, relearned, err := Engine{}.CompileLearned(templates, given)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "what it learned" && repaired != 0 {
			t.Errorf("given what it learned, the compile still repaired %d expressions", repaired)
		}
		if name != "what it learned" && repaired == 0 {
			t.Errorf("given %s, the compile repaired nothing", name)
		}
		if !bytes.Equal(relearned, learned) {
			t.Errorf("given %s, passed on %s, want %s", name, relearned, learned)
		}
		got, err := again.Render(t.Context(), data)
		if err != nil || got.HAProxyConfig != want.HAProxyConfig {
			t.Errorf("given %s, rendered %q, %v; want %q", name, got.HAProxyConfig, err, want.HAProxyConfig)
		}
	}
}
