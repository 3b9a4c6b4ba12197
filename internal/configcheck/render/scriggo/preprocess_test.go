package scriggo

import (
	"errors"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestScanTagsSkipsWhatLooksLikeADelimiter(t *testing.T) {
	cases := []struct {
		name  string
		src   string
		want  []string // the tags' bodies
		kinds []tagKind
	}{
		{"text only", "backend a\n  server b\n", nil, nil},
		{"a lone brace is text", "a { b } c {x}", nil, nil},
		{"each kind", "a{{ x }}b{% if y %}c{%% var z = 1 %%}d{# note #}", []string{" x ", " if y ", " var z = 1 ", " note "},
			[]tagKind{tagShow, tagStatement, tagStatements, tagComment}},
		{"closer in a string", `{{ "}}" + x }}{% if s == "%}" %}`, []string{` "}}" + x `, ` if s == "%}" `}, []tagKind{tagShow, tagStatement}},
		{"closer in a raw string and a rune", "{{ `}}` }}{{ '}' }}", []string{" `}}` ", " '}' "}, []tagKind{tagShow, tagShow}},
		{"composite literal ending in braces", `{{ map[string]any{"a": map[string]int{"b": 1}}}}`, []string{` map[string]any{"a": map[string]int{"b": 1}}`}, []tagKind{tagShow}},
		{"apostrophe in a line comment", "{%%\n  // we don't close here %%}\n  var a = 1\n%%}", []string{"\n  // we don't close here %%}\n  var a = 1\n"}, []tagKind{tagStatements}},
		{"block comment in code", "{% /* %} */ if x %}", []string{" /* %} */ if x "}, []tagKind{tagStatement}},
		{"nested comments", "{# a {# b #} c #}d", []string{" a {# b #} c "}, []tagKind{tagComment}},
		{"escaped quote", `{{ "a\"}}" }}`, []string{` "a\"}}" `}, []tagKind{tagShow}},
		{"raw block is text", "{% raw %}{{ not a tag {% end raw %}{{ y }}", []string{" raw ", " end raw ", " y "}, []tagKind{tagStatement, tagStatement, tagShow}},
		{"raw block with a marker", "{% raw m %}{% end %}{% end raw m %}", []string{" raw m ", " end raw m "}, []tagKind{tagStatement, tagStatement}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tags, err := scanTags(c.src)
			if err != nil {
				t.Fatal(err)
			}
			var bodies []string
			var kinds []tagKind
			for _, tg := range tags {
				bodies = append(bodies, tg.body(c.src))
				kinds = append(kinds, tg.kind)
			}
			if strings.Join(bodies, "|") != strings.Join(c.want, "|") || len(kinds) != len(c.kinds) {
				t.Fatalf("bodies %q kinds %v, want %q %v", bodies, kinds, c.want, c.kinds)
			}
			for i := range kinds {
				if kinds[i] != c.kinds[i] {
					t.Fatalf("kinds %v, want %v", kinds, c.kinds)
				}
			}
		})
	}
}

func TestScanTagsReadsTrimMarkers(t *testing.T) {
	src := "{%- if x -%}{{- y }}{# c -#}{%%- z -%%}"
	tags, err := scanTags(src)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]bool{{true, true}, {true, false}, {false, true}, {true, true}}
	if len(tags) != len(want) {
		t.Fatalf("%d tags, want %d", len(tags), len(want))
	}
	for i, tg := range tags {
		if [2]bool{tg.trimBefore, tg.trimAfter} != want[i] {
			t.Errorf("tag %d %q: trims %v %v, want %v", i, src[tg.start:tg.end], tg.trimBefore, tg.trimAfter, want[i])
		}
	}
}

func TestScanTagsNamesWhereATagIsNotClosed(t *testing.T) {
	cases := map[string]string{
		"a\n  {{ x ":                "2:3: {{ not closed by }}",
		"{% if x }}":                "1:1: {% not closed by %}",
		"{# a {# b #}":              "1:1: comment not terminated",
		"a {{ \"x }}\n":             `1:6: " literal not terminated`,
		"{{ `x }}":                  "1:4: raw string not terminated",
		"{% raw %}{{ x }}":          "1:1: raw block not ended",
		"{%%\n// comment %%}":       "1:1: {%% not closed by %%}",
		"ok\n\n{{ /* not closed }}": "3:4: comment not terminated",
	}
	for src, want := range cases {
		_, err := scanTags(src)
		var scanErr *ScanError
		if !errors.As(err, &scanErr) || err.Error() != want {
			t.Errorf("%q: error %v, want %s", src, err, want)
		}
	}
}

func TestPrepareBlanksMarkersInPlace(t *testing.T) {
	p := newPreparer(nil)
	src := "a\n{%- if x -%}\n  {{- y -}}\n{%- end -%}\n{{ go M(1) }}{#- c -#}"
	prep, err := p.prepare("haproxy.cfg", src)
	if err != nil {
		t.Fatal(err)
	}
	want := "a\n{%  if x  %}\n  {{  y  }}\n{%  end  %}\n{{    M(1) }}{#  c  #}"
	if prep.text != want {
		t.Fatalf("prepared\n%q, want\n%q", prep.text, want)
	}
	for _, at := range []int{2, 17, 27, 52} {
		if !prep.trimLeft[at] {
			t.Errorf("no trimLeft at %d (%q): %v", at, src[at:], prep.trimLeft)
		}
	}
	if len(prep.trimLeft) != 4 || len(prep.trimRight) != 4 {
		t.Errorf("trims left %v right %v, want 4 each", prep.trimLeft, prep.trimRight)
	}
	for at := range prep.trimRight {
		if src[at-2:at] != "}}" && src[at-2:at] != "%}" && src[at-2:at] != "#}" {
			t.Errorf("trimRight at %d does not follow a tag: %q", at, src[:at])
		}
	}
}

func TestPrepareLeavesAGoWordThatIsNotTheKeyword(t *testing.T) {
	prep, err := newPreparer(nil).prepare("t", "{{ gopher }}{{ go_x }}{% go %}")
	if err != nil {
		t.Fatal(err)
	}
	if prep.text != "{{ gopher }}{{ go_x }}{% go %}" {
		t.Fatalf("prepared %q", prep.text)
	}
}

func TestPrepareExpandsRenderGlob(t *testing.T) {
	snippets := map[string]string{
		"backends-b":   "B",
		"backends-a":   "A",
		"backends-all": `{{ render_glob "backends-*" }}`,
		"frontend-x":   "X",
		"dir-set":      `{% serverOpts = append(serverOpts, "check") %}`,
		"dir-weight":   `{%- serverOpts = append(serverOpts, "weight 1") -%}`,
	}
	cases := []struct {
		name, src, want string
	}{
		{"in name order, self excluded", `x{{ render_glob "backends-*" }}y`,
			`x{{ render "backends-a" }}{{ render "backends-b" }}y`},
		{"trim markers on the ends", `{{- render_glob "backends-?" -}}`,
			`{{- render "backends-a" }}{{ render "backends-b" -}}`},
		{"no match renders nothing", `a {{- render_glob "none-*" }} b`, `a {{- "" }} b`},
		{"render's default is accepted", `{{ render_glob "frontend-*" default "" }}`, `{{ render "frontend-x" }}`},
		{"inherit_context inlines each in a block", `{%- var serverOpts []string -%}{{- render_glob "dir-*" inherit_context }}`,
			`{%- var serverOpts []string -%}{%- if true %}{% serverOpts = append(serverOpts, "check") %}{% end if %}{% if true %}{%- serverOpts = append(serverOpts, "weight 1") -%}{% end if %}{{ "" }}`},
	}
	p := newPreparer(snippets)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := p.expand("backends-all", c.src, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("expanded\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestPrepareRefusesWhatItCannotExpand(t *testing.T) {
	snippets := map[string]string{
		"loop-a": `{{ render_glob "loop-b" inherit_context }}`,
		"loop-b": `{{ render_glob "loop-a" inherit_context }}`,
	}
	cases := map[string]string{
		`{{ render_glob }}`:                          "render_glob needs a quoted pattern",
		`{{ render_glob backends }}`:                 "render_glob needs a quoted pattern without blanks, got backends",
		`{{ render_glob "[" }}`:                      "syntax error in pattern",
		`{{ render_glob "a-*" indent(2) }}`:          "unexpected indent(2)",
		`{{ x + render_glob "a-*" }}`:                "render_glob is supported only as a tag of its own",
		`{%% show render_glob "a-*" %%}`:             "render_glob is supported only as a tag of its own",
		`{{ render_glob "loop-*" inherit_context }}`: `snippet "loop-a" inlines itself`,
	}
	p := newPreparer(snippets)
	for src, want := range cases {
		if _, err := p.prepare("haproxy.cfg", src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to say %q", src, err, want)
		}
	}
	// A glob naming render_glob in a string or comment is no use of it.
	for _, src := range []string{`{{ "render_glob" }}`, `{# render_glob "x" #}`} {
		if _, err := p.prepare("haproxy.cfg", src); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
}

// TestPrepareReadsHapticsLibraries prepares every template of haptic's own
// chart config (six libraries): no construct of it is refused, and where no
// render_glob was expanded the text keeps its length and lines.
func TestPrepareReadsHapticsLibraries(t *testing.T) {
	spec := hapticSpec(t)
	snippets := map[string]string{}
	for name, s := range spec.TemplateSnippets {
		snippets[name] = s.Template
	}
	p := newPreparer(snippets)
	all := map[string]string{"haproxy.cfg": spec.HAProxyConfig.Template}
	for name, s := range snippets {
		all[name] = s
	}
	for kind, templates := range map[string]map[string]hapticTemplate{"map": spec.Maps, "file": spec.Files, "cert": spec.SSLCertificates} {
		for name, tmpl := range templates {
			all[kind+":"+name] = tmpl.Template
		}
	}
	var markers, expanded int
	for name, src := range all {
		prep, err := p.prepare(name, src)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		markers += len(prep.trimLeft) + len(prep.trimRight)
		if !strings.Contains(src, "render_glob \"") {
			if len(prep.text) != len(src) || strings.Count(prep.text, "\n") != strings.Count(src, "\n") {
				t.Errorf("%s: length %d lines %d, want %d and %d", name, len(prep.text), strings.Count(prep.text, "\n"), len(src), strings.Count(src, "\n"))
			}
			continue
		}
		expanded++
	}
	if markers < 2000 || expanded == 0 {
		t.Fatalf("%d trim markers, %d templates expanded: the libraries were not read", markers, expanded)
	}
}

// hapticTemplate and hapticTemplates are the parts of haptic's spec this
// package's tests read (the API package is the config's full type; the
// tests stay clear of its Kubernetes dependencies).
type hapticTemplate struct {
	Template string `json:"template"`
}

type hapticTemplates struct {
	TemplateSnippets map[string]hapticTemplate `json:"templateSnippets"`
	HAProxyConfig    hapticTemplate            `json:"haproxyConfig"`
	Maps             map[string]hapticTemplate `json:"maps"`
	Files            map[string]hapticTemplate `json:"files"`
	SSLCertificates  map[string]hapticTemplate `json:"sslCertificates"`
}

func hapticSpec(t testing.TB) hapticTemplates {
	t.Helper()
	data, err := os.ReadFile("../../testdata/haptic/haproxytemplateconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var config struct {
		Spec hapticTemplates `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &config); err != nil {
		t.Fatal(err)
	}
	return config.Spec
}
