package scriggo

import (
	"context"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open2b/scriggo/native"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// hapticFunctionNames are the names haptic declares in
// registerScriggoCustomFunctions, registerScriggoBuiltinCore and
// registerScriggoBuiltinStrings (pkg/templating/filters_scriggo.go).
var hapticFunctionNames = []string{
	// registerScriggoCustomFunctions
	"sort_by", "glob_match", "strip", "trim", "b64decode", "debug", "fail",
	"merge", "keys", "sort_strings", "first_seen", "selectattr", "join_key",
	"strings_contains", "strings_split", "strings_trim", "strings_lower",
	"strings_replace", "strings_splitn", "indent", "tostring", "toint",
	"tofloat", "ceil", "seq", "regex_search", "isdigit", "sanitize_regex",
	"title", "dig", "isNil", "toStringSlice", "join", "replace", "namespace",
	"coalesce", "fallback", "toSlice", "append", "shard_slice", "basename",
	// registerScriggoBuiltinCore
	"hmacSHA1", "hmacSHA256", "sha1", "sha256", "base64", "hex",
	"marshalJSON", "marshalJSONIndent", "marshalYAML", "md5",
	"unmarshalJSON", "unmarshalYAML", "htmlEscape", "abs", "max", "min",
	"pow", "queryEscape", "regexp", "reverse", "group_by", "count_by",
	"index_by", "unique_by", "map_extract", "formatFloat", "formatInt",
	"parseFloat", "parseInt", "date", "now", "parseDuration", "parseTime",
	"unixTime",
	// registerScriggoBuiltinStrings
	"trimSpace", "strings_contains", "abbreviate", "capitalize",
	"capitalizeAll", "hasPrefix", "hasSuffix", "index", "indexAny", "join",
	"lastIndex", "replace", "replaceAll", "runeCount", "split", "splitAfter",
	"splitAfterN", "splitN", "sprint", "sprintf", "toKebab", "toLower",
	"toUpper", "trim", "trimLeft", "trimPrefix", "trimRight", "trimSuffix",
}

func TestEveryHapticFunctionIsDeclaredOrRefused(t *testing.T) {
	for _, name := range hapticFunctionNames {
		_, declared := functions[name]
		reason, refused := unavailable[name]
		switch {
		case declared && refused:
			t.Errorf("%s is both declared and unavailable", name)
		case refused && reason == "":
			t.Errorf("%s is unavailable without a reason", name)
		case !declared && !refused && name != "fail":
			t.Errorf("%s is neither declared nor unavailable", name)
		}
	}
	for name := range functions {
		if !slices.Contains(hapticFunctionNames, name) {
			t.Errorf("%s is declared but haptic has no such function", name)
		}
	}
	for _, clock := range []string{"now", "date", "unixTime", "parseTime"} {
		if _, ok := functions[clock]; ok {
			t.Errorf("%s reads the host's clock or time zone, and is declared", clock)
		}
	}
}

// stubEnv is the native.Env functions get when called directly: its
// context, and Stop recording the error (a real Stop ends the run).
type stubEnv struct {
	native.Env
	ctx     context.Context
	stopped error
}

func newStubEnv() *stubEnv { return &stubEnv{ctx: context.Background()} }

func (e *stubEnv) Context() context.Context { return e.ctx }

func (e *stubEnv) Stop(err error) { e.stopped = err }

// renderScoped compiles src as haproxy.cfg and renders it with a
// rendering scope, as the engine renders.
func renderScoped(t *testing.T, templates render.Templates, data render.Data) (render.Output, error) {
	t.Helper()
	r, err := Engine{}.Compile(templates)
	if err != nil {
		t.Fatal(err)
	}
	return r.Render(withRenderScope(context.Background()), data)
}

func TestFunctionsTypeCheckThroughPipes(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"name": "web", "namespace": "prod", "labels": map[string]string{"app": "shop"}},
		"spec":     map[string]any{"port": int64(8080), "weight": 2.5, "hosts": []any{"b.example", "a.example"}},
		"data":     map[string]any{"user": "YWRtaW4="},
	}
	src := `{%- var o = extraContext["obj"] -%}
{{ o | dig("metadata", "name") | fallback("x") | tostring() }}
{{ o | dig("metadata", "missing") | fallback("x") | tostring() }}
{{ o | dig("metadata", "labels", "app") | tostring() | toUpper() }}
{{ o | dig("spec", "port") | toint() + 1 }}
{{ (o | dig("spec", "weight") | tostring() | parseFloat()) * 2 }}
{{ o | dig("data", "user") | b64decode() | tostring() }}
{{ o | dig("spec", "hosts") | toSlice() | sort_strings() | join(",") }}
{{ join_key("_", o | dig("metadata", "namespace"), o | dig("metadata", "name"), 80) }}
{%- var hosts = append(append(nil, "h1"), "h2") %}
{{ len(hosts) }} {{ hosts | toStringSlice() | join("+") }}
{%- for _, i := range seq(3) %}{{ i }}{% end %}
{{ "a.b" | sanitize_regex() }} {{ "web-1" | regex_search("^web-[0-9]+$") }} {{ "  x " | strip() }}|
{{ "line1\nline2" | indent(2) }}
{%- var sorted = sort_by(o | dig("spec", "hosts") | toSlice(), []string{"$:desc"}) %}
{{ sorted | toStringSlice() | join(" ") }} {{ len(group_by(extraContext["items"] | toSlice(), "kind")) }}
{%- if first_seen("k", "a") %} first{% end %}{% if first_seen("k", "a") %} again{% end %}
{{ keys(merge(map[string]any{"b": 1}, map[string]any{"a": 2})) | join(",") }}
{{ sprintf("%s=%d", "n", 3) }} {{ formatInt(255, 16) }} {{ "hello world" | title() }} {{ "/etc/haproxy/x.pem" | basename() }}
{{ isNil(o | dig("nope")) }} {{ ceil(1.2) }} {{ shard_slice(o | dig("spec", "hosts"), 1, 2) | toStringSlice() | join("") }}
`
	data := render.Data{ExtraContext: map[string]any{
		"obj":   obj,
		"items": []any{map[string]any{"kind": "a"}, map[string]any{"kind": "b"}, map[string]any{"kind": "a"}},
	}}
	out, err := renderScoped(t, render.Templates{HAProxyConfig: src}, data)
	if err != nil {
		t.Fatal(err)
	}
	want := `web
x
SHOP
8081
5
admin
a.example,b.example
prod_web_80
2 h1+h2012
a\.b true x|
line1
  line2
b.example a.example 2 first
a,b
n=3 ff Hello World x.pem
true 2 a.example
`
	if out.HAProxyConfig != want {
		t.Fatalf("rendered\n%s\nwant\n%s", out.HAProxyConfig, want)
	}
}

func TestFunctionsThatRefuseStopTheRendering(t *testing.T) {
	cases := []struct{ src, says string }{
		{`{{ len(seq(100001)) }}`, "seq: 100001 is more than"},
		{`{{ regex_search("x", "(") }}`, "regex_search: invalid pattern"},
		{`{{ len(glob_match([]string{"a"}, "[")) }}`, "glob_match: invalid pattern"},
		{`{{ replace("aaaa", "a", extraContext["big"]) }}`, "replace: the result would add more than"},
		{`{{ sprintf("%1000000d%1000000d", 1, 2) }}`, "sprintf: the result would add more than"},
		{`{{ formatInt(3, 1) }}`, "formatInt: invalid base 1"},
	}
	data := render.Data{ExtraContext: map[string]any{"big": strings.Repeat("x", maxAddedText/2)}}
	for _, c := range cases {
		_, err := renderScoped(t, render.Templates{HAProxyConfig: c.src}, data)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one saying %q", c.src, err, c.says)
		}
	}
}

func TestFirstSeenIsPerRendering(t *testing.T) {
	templates := render.Templates{
		HAProxyConfig: `{% for _, x := range []any{"a", "b", "a", 1, "1", nil, ""} %}{% if first_seen("item", x) %}{{ x }};{% end %}{% end %}` +
			`{% if first_seen() %}e1{% end %}{% if first_seen() %}e2{% end %}`,
		Maps: map[string]string{"m.map": `{% if first_seen("item", "b") %}b{% else %}seen{% end %}`},
	}
	r, err := Engine{}.Compile(templates)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, err := r.Render(withRenderScope(context.Background()), render.Data{})
		if err != nil {
			t.Fatal(err)
		}
		// 1 and "1" are one key, as nil and "" are; no parts is always
		// a first time. The map is rendered after haproxy.cfg, in the
		// same rendering.
		if out.HAProxyConfig != "a;b;1;;e1e2\n" || out.Maps["m.map"] != "seen\n" {
			t.Fatalf("rendered %q and %q", out.HAProxyConfig, out.Maps["m.map"])
		}
	}
	unscoped := newStubEnv()
	first, again := firstSeen(unscoped, "k"), firstSeen(unscoped, "k")
	if !first || !again {
		t.Fatal("without a rendering scope, every call must be a first time")
	}
	env := &stubEnv{ctx: withRenderScope(context.Background())}
	if !firstSeen(env, "ns", "name") || firstSeen(env, "ns", "name") || firstSeen(env, "ns_name") || !firstSeen(env, "ns", "other") {
		t.Fatal("parts are joined with _ into one key per rendering")
	}
}

func TestToString(t *testing.T) {
	cases := []struct {
		in   any
		want string
	}{
		{nil, ""}, {"s", "s"}, {42, "42"}, {int64(-7), "-7"}, {int32(5), "5"},
		{3.0, "3"}, {2.5, "2.5"}, {1e21, "1000000000000000000000"}, {true, "true"}, {false, "false"},
		{[]any{"a", 1}, "[a 1]"}, {map[string]any{"k": "v"}, "map[k:v]"},
	}
	for _, c := range cases {
		if got := toString(c.in); got != c.want {
			t.Errorf("tostring(%#v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestToInt(t *testing.T) {
	cases := []struct {
		in   any
		want int
	}{
		{nil, 0}, {7, 7}, {int64(8080), 8080}, {3.9, 3}, {-3.9, -3}, {"42", 42}, {" 42", 0},
		{"4.2", 0}, {"x", 0}, {"99999999999999999999", 0}, {int32(5), 0}, {true, 0},
	}
	for _, c := range cases {
		if got := toInt(c.in); got != c.want {
			t.Errorf("toint(%#v) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestToFloat(t *testing.T) {
	cases := []struct {
		in      any
		want    float64
		failing bool
	}{
		{nil, 0, false}, {1.5, 1.5, false}, {2, 2, false}, {int64(3), 3, false}, {"4.25", 4.25, false},
		{"x", 0, true}, {true, 0, true}, {int32(1), 0, true},
	}
	for _, c := range cases {
		got, err := toFloat(c.in)
		if got != c.want || (err != nil) != c.failing {
			t.Errorf("tofloat(%#v) = %v, %v; want %v, failing %v", c.in, got, err, c.want, c.failing)
		}
	}
}

func TestIsNil(t *testing.T) {
	var nilMap map[string]any
	var nilPointer *int
	cases := []struct {
		in   any
		want bool
	}{
		{nil, true}, {nilMap, true}, {nilPointer, true}, {[]any(nil), true}, {(func())(nil), true},
		{map[string]any{}, false}, {0, false}, {"", false}, {[]any{}, false},
	}
	for _, c := range cases {
		if got := isNil(c.in); got != c.want {
			t.Errorf("isNil(%#v) = %v", c.in, got)
		}
	}
}

func TestDig(t *testing.T) {
	var nilPointer *map[string]any
	obj := map[string]any{
		"metadata": map[string]any{"name": "web", "labels": map[string]string{"app": "shop"}, "empty": nil},
		"spec":     map[string]any{"port": int64(80), "rules": []any{"r"}},
	}
	cases := []struct {
		name string
		obj  any
		keys []string
		want any
	}{
		{"nested", obj, []string{"metadata", "name"}, "web"},
		{"a map value", obj, []string{"metadata"}, obj["metadata"]},
		{"int64 kept", obj, []string{"spec", "port"}, int64(80)},
		{"missing", obj, []string{"metadata", "nope"}, nil},
		{"missing parent", obj, []string{"nope", "name"}, nil},
		{"nil on the way", obj, []string{"metadata", "empty", "x"}, nil},
		{"through a list", obj, []string{"spec", "rules", "0"}, nil},
		{"past a string", obj, []string{"metadata", "name", "x"}, nil},
		{"map[string]string last", obj, []string{"metadata", "labels", "app"}, "shop"},
		{"map[string]string missing", obj, []string{"metadata", "labels", "nope"}, nil},
		{"map[string]string past its values", obj, []string{"metadata", "labels", "app", "x"}, nil},
		{"a map[string]string itself", map[string]string{"a": "b"}, []string{"a"}, "b"},
		{"no keys", obj, nil, obj},
		{"nil", nil, []string{"a"}, nil},
		{"typed nil", nilPointer, []string{"a"}, nil},
		{"typed nil without keys", nilPointer, nil, nilPointer},
		{"not a map", []any{1}, []string{"a"}, nil},
		{"a map of another type", map[string]int{"a": 1}, []string{"a"}, nil},
	}
	for _, c := range cases {
		if got := dig(c.obj, c.keys...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: dig = %#v, want %#v", c.name, got, c.want)
		}
	}
}

func TestFallback(t *testing.T) {
	var nilMap map[string]any
	if fallback(nil, "d") != "d" || fallback("", "d") != "" || fallback(0, 80) != 0 || fallback(false, true) != false {
		t.Fatal("only nil falls back")
	}
	if got := fallback(nilMap, "d"); !reflect.DeepEqual(got, nilMap) {
		t.Fatalf("a typed nil is a value, as in haptic: got %#v", got)
	}
}

func TestToSliceAndStringSlice(t *testing.T) {
	items := []any{"a", 1}
	if got := toSlice(items); &got[0] != &items[0] {
		t.Error("toSlice copied a []any")
	}
	cases := []struct {
		in   any
		want []any
	}{
		{nil, []any{}}, {[]string{"a", "b"}, []any{"a", "b"}}, {[]int{1}, []any{1}}, {[]string(nil), []any{}},
		{"not a list", nil}, {map[string]any{"a": 1}, nil}, {[2]int{1, 2}, nil},
	}
	for _, c := range cases {
		if got := toSlice(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("toSlice(%#v) = %#v, want %#v", c.in, got, c.want)
		}
	}
	strs := []struct {
		in   any
		want []string
	}{
		{nil, []string{}}, {[]string{"a"}, []string{"a"}}, {[]any{"a", 2, nil, 1.5}, []string{"a", "2", "<nil>", "1.5"}},
		{[]int{1}, []string{}}, {"a", []string{}},
	}
	for _, c := range strs {
		if got := toStringSlice(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("toStringSlice(%#v) = %#v, want %#v", c.in, got, c.want)
		}
	}
}

func TestAppendItem(t *testing.T) {
	cases := []struct {
		slice, item any
		want        []any
	}{
		{nil, "first", []any{"first"}},
		{[]any{}, "a", []any{"a"}},
		{[]any{"a"}, "b", []any{"a", "b"}},
		{[]any(nil), "a", []any{"a"}},
		{[]any{"a"}, nil, []any{"a", nil}},
		{[]string{"a"}, "b", []any{"b"}},
		{"not a slice", "b", []any{"b"}},
	}
	for _, c := range cases {
		if got := appendItem(c.slice, c.item); !reflect.DeepEqual(got, c.want) {
			t.Errorf("append(%#v, %#v) = %#v, want %#v", c.slice, c.item, got, c.want)
		}
	}
}

func TestShardSlice(t *testing.T) {
	ten := []any{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	cases := []struct {
		name          string
		items         any
		index, shards int
		want          []any
	}{
		{"first shard takes the remainder", ten, 0, 3, []any{0, 1, 2, 3}},
		{"middle shard", ten, 1, 3, []any{4, 5, 6}},
		{"last shard", ten, 2, 3, []any{7, 8, 9}},
		{"one shard", ten, 0, 1, ten},
		{"no shards", ten, 0, 0, ten},
		{"index past the shards", ten, 3, 3, ten},
		{"negative index", ten, -1, 3, ten},
		{"more shards than items", []any{"a"}, 1, 3, []any{}},
		{"typed slice", []string{"a", "b"}, 1, 2, []any{"b"}},
		{"nil", nil, 0, 2, []any{}},
		{"not a list", "x", 0, 2, []any{}},
	}
	for _, c := range cases {
		if got := shardSlice(c.items, c.index, c.shards); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: shard_slice = %#v, want %#v", c.name, got, c.want)
		}
	}
}

func TestSeq(t *testing.T) {
	env := newStubEnv()
	if got := seq(env, 3); !reflect.DeepEqual(got, []int{0, 1, 2}) {
		t.Errorf("seq(3) = %v", got)
	}
	if got := seq(env, 0); got == nil || len(got) != 0 {
		t.Errorf("seq(0) = %#v, want an empty slice", got)
	}
	if got := seq(env, -5); got == nil || len(got) != 0 {
		t.Errorf("seq(-5) = %#v, want an empty slice", got)
	}
	if len(seq(env, maxSeq)) != maxSeq || env.stopped != nil {
		t.Errorf("seq(%d) refused: %v", maxSeq, env.stopped)
	}
	if seq(env, maxSeq+1) != nil || env.stopped == nil {
		t.Error("seq above the bound was not refused")
	}
}

func TestMergeAndNamespace(t *testing.T) {
	dict, updates := map[string]any{"a": 1, "b": 2}, map[string]any{"b": 3, "c": 4}
	got := merge(dict, updates)
	if !reflect.DeepEqual(got, map[string]any{"a": 1, "b": 3, "c": 4}) {
		t.Errorf("merge = %v", got)
	}
	if !reflect.DeepEqual(dict, map[string]any{"a": 1, "b": 2}) || !reflect.DeepEqual(updates, map[string]any{"b": 3, "c": 4}) {
		t.Error("merge changed its arguments")
	}
	if got := merge(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("merge(nil, nil) = %#v", got)
	}
	if got := namespace(nil); got == nil || len(got) != 0 {
		t.Errorf("namespace(nil) = %#v", got)
	}
	init := map[string]any{"n": 1}
	namespace(init)["n"] = 2
	if init["n"] != 2 {
		t.Error("namespace must return the map it was given, to be updated in place")
	}
}

func TestSortedKeys(t *testing.T) {
	cases := []struct {
		in   any
		want []string
	}{
		{map[string]any{"c": 3, "a": 1, "b": 2}, []string{"a", "b", "c"}},
		{map[string][]any{"z": nil, "apple": nil, "apricot": nil}, []string{"apple", "apricot", "z"}},
		{map[string]int{}, []string{}},
		{nil, []string{}},
		{[]string{"a"}, []string{}},
		{map[int]string{1: "a"}, []string{"<int Value>"}},
	}
	for _, c := range cases {
		if got := sortedKeys(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("keys(%#v) = %#v, want %#v", c.in, got, c.want)
		}
	}
}

func TestSortStrings(t *testing.T) {
	got := sortStrings([]any{"c", "a", 10, 2, nil})
	if want := []string{"10", "2", "<nil>", "a", "c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("sort_strings = %v, want %v", got, want)
	}
	if got := sortStrings(nil); got == nil || len(got) != 0 {
		t.Errorf("sort_strings(nil) = %#v", got)
	}
}

func TestSelectAttr(t *testing.T) {
	items := []any{
		map[string]any{"name": "a", "http": map[string]any{"paths": []any{}}, "pathType": "Exact", "port": int64(80)},
		map[string]any{"name": "b", "pathType": "Prefix", "port": 443},
		nil,
		map[string]any{"name": "c", "http": map[string]any{}, "pathType": "Regex", "port": "80"},
	}
	cases := []struct {
		name  string
		items any
		attr  string
		args  []any
		want  []string
	}{
		{"defined, even empty", items, "http", nil, []string{"a", "c"}},
		{"eq", items, "pathType", []any{"eq", "Exact"}, []string{"a"}},
		{"eq compares texts", items, "port", []any{"eq", 80}, []string{"a", "c"}},
		{"ne", items, "pathType", []any{"ne", "Exact"}, []string{"b", "c"}},
		{"in []string", items, "pathType", []any{"in", []string{"Exact", "Prefix"}}, []string{"a", "b"}},
		{"in []any", items, "port", []any{"in", []any{443, "x"}}, []string{"b"}},
		{"in nil", items, "pathType", []any{"in", nil}, nil},
		{"in a non-list", items, "pathType", []any{"in", "Exact"}, nil},
		{"test without a value", items, "http", []any{"eq"}, []string{"a", "c"}},
		{"unknown test", items, "http", []any{"gt", 1}, []string{"a", "c"}},
		{"typed list", []map[string]any{{"name": "x", "k": 1}}, "k", nil, []string{"x"}},
		{"nil", nil, "http", nil, nil},
		{"not a list", "x", "http", nil, nil},
	}
	for _, c := range cases {
		got := selectAttr(c.items, c.attr, c.args...)
		if got == nil {
			t.Errorf("%s: selectattr returned nil", c.name)
			continue
		}
		var names []string
		for _, item := range got {
			names = append(names, item.(map[string]any)["name"].(string))
		}
		if !slices.Equal(names, c.want) {
			t.Errorf("%s: selectattr = %v, want %v", c.name, names, c.want)
		}
	}
}

func TestJoinKeyAndJoin(t *testing.T) {
	env := newStubEnv()
	keys := []struct {
		sep   string
		parts []any
		want  string
	}{
		{"_", []any{"default", "my-service", 80}, "default_my-service_80"},
		{"/", []any{"kube-system", int64(53), 1.5, true}, "kube-system/53/1.5/true"},
		{"_", []any{"a", nil, "b"}, "a__b"},
		{"_", []any{"only"}, "only"},
		{"_", nil, ""},
	}
	for _, c := range keys {
		if got := joinKey(env, c.sep, c.parts...); got != c.want {
			t.Errorf("join_key(%q, %v) = %q, want %q", c.sep, c.parts, got, c.want)
		}
	}
	joins := []struct {
		items any
		want  string
	}{
		{[]string{"a", "b"}, "a, b"}, {[]any{"a", 1, nil}, "a, 1, <nil>"}, {[]any{}, ""}, {[]int{1, 2}, ""}, {nil, ""},
	}
	for _, c := range joins {
		if got := join(env, c.items, ", "); got != c.want {
			t.Errorf("join(%#v) = %q, want %q", c.items, got, c.want)
		}
	}
	if env.stopped != nil {
		t.Fatal(env.stopped)
	}
	many := make([]string, 1000)
	if join(env, many, strings.Repeat("x", 2000)) != "" || env.stopped == nil {
		t.Error("join repeating a separator past the bound was not refused")
	}
	env = newStubEnv()
	if joinKey(env, strings.Repeat("x", maxAddedText), "a", "b", "c") != "" || env.stopped == nil {
		t.Error("join_key repeating a separator past the bound was not refused")
	}
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		name    string
		items   any
		pattern string
		want    []string
		refused bool
	}{
		{"strings in []any", []any{"backend-api", "backend-web", "frontend-ui"}, "backend-*", []string{"backend-api", "backend-web"}, false},
		{"[]string", []string{"a-1", "b-1", "a-2"}, "a-?", []string{"a-1", "a-2"}, false},
		{"maps with a name", []any{map[string]any{"name": "backend-api"}, map[string]any{"name": "frontend"}}, "backend-*", []string{"backend-api"}, false},
		{"items without a name", []any{map[string]any{"other": "x"}, map[string]any{"name": "valid"}, 123, ""}, "*", []string{"valid"}, false},
		{"no match", []any{"abc"}, "xyz*", []string{}, false},
		{"empty items", []any{}, "*", []string{}, false},
		{"empty pattern", []any{"a"}, "", []string{}, false},
		{"nil", nil, "*", []string{}, false},
		{"malformed pattern", []any{"test"}, "[", nil, true},
		{"not a list of names", []int{1}, "*", nil, true},
	}
	for _, c := range cases {
		env := newStubEnv()
		got := globMatch(env, c.items, c.pattern)
		if (env.stopped != nil) != c.refused {
			t.Errorf("%s: stopped %v, want refused %v", c.name, env.stopped, c.refused)
		}
		if !c.refused && (got == nil || !slices.Equal(got, c.want)) {
			t.Errorf("%s: glob_match = %#v, want %#v", c.name, got, c.want)
		}
	}
}

func TestTextFunctionsConvertLeniently(t *testing.T) {
	env := newStubEnv()
	cases := []struct {
		name      string
		got, want any
	}{
		{"strip", trimSpace("  hello world \n\t"), "hello world"},
		{"strip a number", trimSpace(123), "123"},
		{"strip nil", trimSpace(nil), ""},
		{"trim takes a cutset", functions["trim"].(func(string, string) string)("xxhixx", "x"), "hi"},
		{"strings_contains", containsText(12345, 234), true},
		{"strings_contains nil", containsText(nil, ""), true},
		{"strings_split", splitText("a/b/c", "/"), []string{"a", "b", "c"}},
		{"strings_split a number", splitText(1.5, "."), []string{"1", "5"}},
		{"strings_splitn", splitTextN("a b c", " ", 2), []string{"a", "b c"}},
		{"strings_lower", lowerText("GET"), "get"},
		{"replace", replaceText(env, "a.b.c", ".", "\\."), `a\.b\.c`},
		{"replace numbers", replaceText(env, 8080, 80, 90), "9090"},
		{"replace an empty old", replaceText(env, "ab", "", "-"), "-a-b-"},
		{"replaceAll", replaceAll(env, "aXbX", "X", "Y"), "aYbY"},
		{"sanitize_regex", sanitizeRegex("/api/v1.0/*"), `/api/v1\.0/\*`},
		{"isdigit", isDigit("0123"), true},
		{"isdigit a number", isDigit(42), true},
		{"isdigit empty", isDigit(""), false},
		{"isdigit signed", isDigit("-1"), false},
		{"isdigit other scripts", isDigit("٣"), true},
		{"title", title("hELLO wORLD-wide web_site"), "Hello World-Wide Web_site"},
		{"title nil", title(nil), ""},
		{"basename", functions["basename"].(func(string) string)("/etc/haproxy/ssl/a.pem"), "a.pem"},
		{"basename of a directory", functions["basename"].(func(string) string)("/etc/haproxy/"), "haproxy"},
	}
	for _, c := range cases {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	if env.stopped != nil {
		t.Fatal(env.stopped)
	}
	if replaceText(env, strings.Repeat("a", 1024), "a", strings.Repeat("b", 2048)) != "" || env.stopped == nil {
		t.Error("replace past the bound was not refused")
	}
	env = newStubEnv()
	if replaceAll(env, strings.Repeat("a", 1<<20), "", "bb") != "" || env.stopped == nil {
		t.Error("replaceAll of an empty old past the bound was not refused")
	}
}

func TestB64Decode(t *testing.T) {
	cases := []struct {
		in      any
		want    string
		failing bool
	}{
		{"SGVsbG8gV29ybGQ=", "Hello World", false},
		{"", "", false},
		{nil, "", false},
		{"not base64!", "", true},
		{"SGVsbG8", "", true},
		{123, "", true},
	}
	for _, c := range cases {
		got, err := b64decode(c.in)
		if got != c.want || (err != nil) != c.failing {
			t.Errorf("b64decode(%#v) = %q, %v", c.in, got, err)
		}
	}
}

func TestIndent(t *testing.T) {
	cases := []struct {
		name string
		in   any
		args []any
		want string
	}{
		{"default skips the first and blank lines", "first\nsecond\n\nfourth", nil, "first\n    second\n\n    fourth"},
		{"width", "first\nsecond", []any{8}, "first\n        second"},
		{"zero width", "first\nsecond", []any{0}, "first\nsecond"},
		{"nil width is the default", "a\nb", []any{nil}, "a\n    b"},
		{"prefix", "first\nsecond\nthird", []any{">>> "}, "first\n>>> second\n>>> third"},
		{"first line", "first\nsecond", []any{4, true}, "    first\n    second"},
		{"blank lines", "first\n\nthird", []any{4, false, true}, "first\n    \n    third"},
		{"first and blank", "first\n\nthird", []any{2, true, true}, "  first\n  \n  third"},
		{"white space only is blank", "first\n  \nthird", nil, "first\n  \n    third"},
		{"empty", "", []any{4, true}, ""},
		{"one line", "single", nil, "single"},
		{"a number", 42, []any{2, true}, "  42"},
		{"extra arguments are ignored", "a\nb", []any{1, false, false, "x"}, "a\n b"},
	}
	for _, c := range cases {
		got, err := indent(c.in, c.args...)
		if err != nil || got != c.want {
			t.Errorf("%s: indent = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	refusals := []struct {
		name string
		args []any
		says string
	}{
		{"float width", []any{3.14}, "indent width must be int or string"},
		{"int64 width", []any{int64(2)}, "indent width must be int or string"},
		{"negative width", []any{-5}, "indent width must be non-negative"},
		{"first not a bool", []any{4, "yes"}, "indent 'first' must be bool"},
		{"blank not a bool", []any{4, false, 1}, "indent 'blank' must be bool"},
		{"too wide", []any{maxAddedText + 1, true}, "indent: the result would add more than"},
	}
	for _, c := range refusals {
		if _, err := indent("a\nb", c.args...); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.says)
		}
	}
	if _, err := indent(strings.Repeat("x\n", 300_000), "    "); err == nil {
		t.Error("indenting past the bound was not refused")
	}
	if got, err := indent("one line", 1<<40); err != nil || got != "one line" {
		t.Errorf("a huge width for nothing to indent: %q, %v", got, err)
	}
}

func TestDebug(t *testing.T) {
	cases := []struct {
		name  string
		value any
		label []string
		want  string
	}{
		{"value", map[string]any{"a": 1}, nil, "# DEBUG:\n# {\n#   \"a\": 1\n# }\n"},
		{"label", []any{"x"}, []string{"routes"}, "# DEBUG routes:\n# [\n#   \"x\"\n# ]\n"},
		{"empty label", 1, []string{""}, "# DEBUG:\n# 1\n"},
		{"nil", nil, nil, "# DEBUG:\n# null\n"},
		{"no JSON form", map[string]any{"f": func() {}}, nil, "# DEBUG:\n# map[f:"},
	}
	for _, c := range cases {
		if got := debug(c.value, c.label...); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: debug = %q, want %q", c.name, got, c.want)
		}
	}
	if got := debug(deeplyNested(2000), "deep"); !strings.HasPrefix(got, "# DEBUG deep:\n# (not shown") || len(got) > 100 {
		t.Errorf("debug indenting past the bound gave %d bytes: %.100q", len(got), got)
	}
}

// deeplyNested is depth lists inside each other: indenting it costs the
// square of its size.
func deeplyNested(depth int) any {
	var v any = 1
	for range depth {
		v = []any{v}
	}
	return v
}

func TestRegexSearch(t *testing.T) {
	env := newStubEnv()
	cases := []struct {
		s, pattern any
		want       bool
	}{
		{"ssl-passthrough", "ssl.*passthrough", true},
		{"SSL-passthrough", "ssl.*passthrough", false},
		{"$2y$10$abc", `^\$2[aby]?\$`, true},
		{12345, "^[0-9]+$", true},
		{nil, "^$", true},
		{"anything", nil, true},
	}
	for _, c := range cases {
		if got := regexSearch(env, c.s, c.pattern); got != c.want || env.stopped != nil {
			t.Errorf("regex_search(%v, %v) = %v, %v", c.s, c.pattern, got, env.stopped)
		}
	}
	refusals := []struct{ pattern, says string }{
		{"(", "invalid pattern"},
		{strings.Repeat("a", maxPatternBytes+1), "longer than"},
		{strings.Repeat(`\pL{1000}`, 100), "instructions"},
	}
	for _, c := range refusals {
		env := newStubEnv()
		if regexSearch(env, "x", c.pattern) || env.stopped == nil || !strings.Contains(env.stopped.Error(), c.says) {
			t.Errorf("pattern %.20q: error %v, want one saying %q", c.pattern, env.stopped, c.says)
		}
	}
}

func TestPatternCacheStaysBounded(t *testing.T) {
	cache := newPatternCache(8, 20_000)
	for i := range 30 {
		if _, err := cache.compile(fmt.Sprintf("^p%d$", i)); err != nil {
			t.Fatal(err)
		}
		if len(cache.compiled) > 8 {
			t.Fatalf("%d patterns cached", len(cache.compiled))
		}
	}
	for i := range 10 {
		// About 5000 instructions each.
		if _, err := cache.compile(strings.Repeat(`\pL{1000}`, 5) + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		if cache.insts > 20_000 {
			t.Fatalf("%d instructions cached", cache.insts)
		}
	}
	total := 0
	for _, p := range cache.compiled {
		total += p.insts
	}
	if total != cache.insts {
		t.Fatalf("the cache counts %d instructions, holds %d", cache.insts, total)
	}
	first, _ := cache.compile("^again$")
	second, _ := cache.compile("^again$")
	if first != second {
		t.Fatal("a cached pattern was compiled again")
	}
	if searchPatterns.maxPatterns != maxCachedPatterns || searchPatterns.maxInsts != maxCachedInsts {
		t.Fatal("regex_search's cache is not bounded by maxCachedPatterns and maxCachedInsts")
	}
}

func TestSprintfBoundsPadding(t *testing.T) {
	env := newStubEnv()
	cases := []struct {
		format string
		args   []any
		want   string
	}{
		{"%s-%d", []any{"a", 1}, "a-1"},
		{"%5d|%-4s|%.2f|%05.1f", []any{42, "ab", 3.14159, 2.5}, "   42|ab  |3.14|002.5"},
		{"%*d", []any{4, 7}, "   7"},
		{"%[2]s %[1]s", []any{"b", "a"}, "a b"},
		{"100%%", nil, "100%"},
	}
	for _, c := range cases {
		if got := sprintf(env, c.format, c.args...); got != c.want || env.stopped != nil {
			t.Errorf("sprintf(%q) = %q, %v; want %q", c.format, got, env.stopped, c.want)
		}
	}
	for _, format := range []string{"%1000000d%1000000d", "%.999999f%.999999f", "%*d%*d%*d"} {
		env := newStubEnv()
		sprintf(env, format, 1_000_000, 1, 1_000_000, 1, 1_000_000, 1)
		if env.stopped == nil {
			t.Errorf("sprintf(%q) was not refused", format)
		}
	}
}

func TestUpstreamTextBuiltins(t *testing.T) {
	cases := []struct {
		name      string
		got, want string
	}{
		{"abbreviate to nothing", abbreviate("abc", 0), ""},
		{"abbreviate that fits", abbreviate("Lorem ipsum dolor sit amet.", 27), "Lorem ipsum dolor sit amet."},
		{"abbreviate at a word", abbreviate("Lorem ipsum dolor sit amet.", 26), "Lorem ipsum dolor sit..."},
		{"abbreviate to one word", abbreviate("Lorem ipsum dolor sit amet.", 10), "Lorem..."},
		{"abbreviate to the dots", abbreviate("Lorem ipsum dolor sit amet.", 7), "..."},
		{"abbreviate drops punctuation", abbreviate("Lorem, ipsum.", 9), "Lorem..."},
		{"abbreviate trailing space first", abbreviate("Lorem   \n", 5), "Lorem"},
		{"abbreviate counts runes", abbreviate("èèèè", 5), "èèèè"},
		{"capitalize", capitalize(" ab,cd"), " Ab,cd"},
		{"capitalize upper", capitalize("Ab"), "Ab"},
		{"capitalize a digit", capitalize("5a"), "5a"},
		{"capitalize a letter of another length", capitalize("ɐb"), "Ɐb"},
		{"capitalizeAll", capitalizeAll(" ab,cd ef"), " Ab,Cd Ef"},
		{"capitalizeAll after a symbol", capitalizeAll("€a"), "€a"},
		{"toKebab", toKebab("AaBbCc"), "aa-bb-cc"},
		{"toKebab a run of capitals", toKebab("aaBBBcc"), "aa-bb-bcc"},
		{"toKebab separators", toKebab("Aaa, Bb"), "aaa-bb"},
		{"toKebab digits", toKebab("5A"), "5a"},
		{"toKebab other letters", toKebab("eÈÈè"), "e-è-èè"},
		{"toKebab only separators", toKebab(" \t-"), ""},
		{"queryEscape", queryEscape("a/b+c?d# é"), "a%2fb%2bc%3fd%23%20%c3%a9"},
		{"queryEscape safe", queryEscape("A-z.0_9"), "A-z.0_9"},
		{"base64", encodeBase64("hello world!"), "aGVsbG8gd29ybGQh"},
		{"hex", encodeHex("hello world!"), "68656c6c6f20776f726c6421"},
		{"md5", md5Hex("hello world!"), "fc3ff98e8c6a0d3087d515c0473f8677"},
		{"sha1", sha1Hex("hello world!"), "430ce34d020724ed75a196dfc2ad67c77772d169"},
		{"sha256", sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"hmacSHA1", hmacSHA1("hello world!", "secret"), "pN9fnSN6sMoyQfBCvPYFmk70kcQ="},
		{"hmacSHA256", hmacSHA256("hello world!", "secret"), "cgaXMb8pG0Y67LIYvCJ6vOPUA9dtpn+u8tSNPLQ7L1Q="},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestUpstreamNumberBuiltins(t *testing.T) {
	if absInt(-22) != 22 || absInt(math.MinInt) != math.MinInt || maxInt(-7, 5) != 5 || minInt(7, -5) != -5 {
		t.Error("abs, max or min")
	}
	env := newStubEnv()
	if formatFloat(env, -5.90361e100, "g", 2) != "-5.9e+100" || formatFloat(env, 5.2307, "f", -1) != "5.2307" || formatInt(env, 334, 16) != "14e" {
		t.Error("formatFloat or formatInt")
	}
	for _, refused := range []func(){
		func() { formatFloat(env, 1, "x", 1) },
		func() { formatFloat(env, 1, "f", 1001) },
		func() { formatInt(env, 1, 37) },
	} {
		env.stopped = nil
		refused()
		if env.stopped == nil {
			t.Error("an invalid format, precision or base was not refused")
		}
	}
	floats := []struct {
		in   string
		want float64
		err  string
	}{
		{"23.903", 23.903, ""}, {"7.21e14", 7.21e14, ""},
		{"", 0, `parseFloat: parsing "": invalid syntax`},
		{"NaN", 0, `parseFloat: parsing "NaN": invalid syntax`},
		{"Inf", 0, `parseFloat: parsing "Inf": invalid syntax`},
		{"0x1p3", 0, `parseFloat: parsing "0x1p3": invalid syntax`},
		{"1e400", 0, `parseFloat: parsing "1e400": value out of range`},
	}
	for _, c := range floats {
		got, err := parseFloat(c.in)
		if got != c.want || errText(err) != c.err {
			t.Errorf("parseFloat(%q) = %v, %v", c.in, got, err)
		}
	}
	ints := []struct {
		in   string
		base int
		want int
		err  string
	}{
		{"-12", 10, -12, ""}, {"f6b", 16, 3947, ""},
		{"a", 10, 0, `parseInt: parsing "a": invalid syntax`},
		{"10", 0, 0, `parseInt: parsing "10": invalid base 0`},
		{"99999999999999999999", 10, 0, `parseInt: parsing "99999999999999999999": value out of range`},
	}
	for _, c := range ints {
		got, err := parseInt(c.in, c.base)
		if got != c.want || errText(err) != c.err {
			t.Errorf("parseInt(%q, %d) = %v, %v", c.in, c.base, got, err)
		}
	}
	if d, err := parseDuration("1h20m"); d != 80*time.Minute || err != nil {
		t.Errorf("parseDuration = %v, %v", d, err)
	}
	if _, err := parseDuration(" 1h"); errText(err) != `parseDuration: invalid duration " 1h"` {
		t.Errorf("parseDuration error %v", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestUpstreamJSONBuiltins(t *testing.T) {
	if s, err := marshalJSON([]string{"red", "green"}); s != `["red","green"]` || err != nil {
		t.Errorf("marshalJSON = %s, %v", s, err)
	}
	if _, err := marshalJSON(func() {}); err == nil || !strings.HasPrefix(err.Error(), "marshalJSON: ") {
		t.Errorf("marshalJSON error %v", err)
	}
	if s, err := marshalJSONIndent([]string{"red", "green"}, "\t", "  "); s != "[\n\t  \"red\",\n\t  \"green\"\n\t]" || err != nil {
		t.Errorf("marshalJSONIndent = %q, %v", s, err)
	}
	if _, err := marshalJSONIndent(1, "#", ""); errText(err) != "marshalJSONIndent: prefix does not contain only whitespace" {
		t.Errorf("marshalJSONIndent error %v", err)
	}
	if _, err := marshalJSONIndent(deeplyNested(2000), "", "    "); err == nil || !strings.Contains(err.Error(), "would add more than") {
		t.Errorf("marshalJSONIndent past the bound: %v", err)
	}
	var m map[string]any
	if err := unmarshalJSON(`{"a":"b"}`, &m); err != nil || m["a"] != "b" {
		t.Errorf("unmarshalJSON = %v, %v", m, err)
	}
	if err := unmarshalJSON(`{"a":`, &m); err == nil || m["a"] != "b" {
		t.Errorf("a failed unmarshalJSON must leave the value: %v, %v", m, err)
	}
	var n int
	refusals := []struct {
		v    any
		says string
	}{
		{nil, "unmarshalJSON: cannot unmarshal into nil"},
		{m, "unmarshalJSON: cannot unmarshal into non-pointer value of type map[string]interface {}"},
		{(*int)(nil), "unmarshalJSON: cannot unmarshal into a nil pointer of type *int"},
		{&n, "unmarshalJSON: cannot unmarshal string into value of type int"},
	}
	for _, c := range refusals {
		if err := unmarshalJSON(`"x"`, c.v); errText(err) != c.says {
			t.Errorf("unmarshalJSON(%T) error %v, want %q", c.v, err, c.says)
		}
	}
}

func TestReverse(t *testing.T) {
	env := newStubEnv()
	ints := []int{3, 1, 2}
	reverse(env, ints)
	items := []any{"a", "b"}
	reverse(env, items)
	reverse(env, nil)
	if !slices.Equal(ints, []int{2, 1, 3}) || !slices.Equal(items, []any{"b", "a"}) || env.stopped != nil {
		t.Errorf("reverse gave %v and %v, %v", ints, items, env.stopped)
	}
	reverse(env, "abc")
	if env.stopped == nil {
		t.Error("reversing a string was not refused")
	}
}

func TestEveryFunctionHasHapticsArity(t *testing.T) {
	// The template-visible parameter and result counts of the functions
	// whose signatures templates depend on (filters_*.go in haptic).
	signatures := map[string]string{
		"dig":          "func(interface {}, ...string) interface {}",
		"fallback":     "func(interface {}, interface {}) interface {}",
		"toint":        "func(interface {}) int",
		"tofloat":      "func(interface {}) (float64, error)",
		"append":       "func(interface {}, interface {}) []interface {}",
		"sort_by":      "func([]interface {}, []string) ([]interface {}, error)",
		"first_seen":   "func(...interface {}) bool",
		"seq":          "func(int) []int",
		"indent":       "func(interface {}, ...interface {}) (string, error)",
		"regex_search": "func(interface {}, interface {}) bool",
		"glob_match":   "func(interface {}, string) []string",
		"selectattr":   "func(interface {}, string, ...interface {}) []interface {}",
		"join":         "func(interface {}, string) string",
		"join_key":     "func(string, ...interface {}) string",
		"replace":      "func(interface {}, interface {}, interface {}) string",
		"keys":         "func(interface {}) []string",
		"merge":        "func(map[string]interface {}, map[string]interface {}) map[string]interface {}",
		"shard_slice":  "func(interface {}, int, int) []interface {}",
		"debug":        "func(interface {}, ...string) string",
		"b64decode":    "func(interface {}) (string, error)",
		"trim":         "func(string, string) string",
		"sprintf":      "func(string, ...interface {}) string",
		"reverse":      "func(interface {})",
		"formatFloat":  "func(float64, string, int) string",
		"marshalJSON":  "func(interface {}) (native.JSON, error)",
	}
	envType := reflect.TypeFor[native.Env]()
	for _, name := range slices.Sorted(maps.Keys(signatures)) {
		typ := reflect.TypeOf(functions[name])
		in := []reflect.Type{}
		for i := range typ.NumIn() {
			if i == 0 && typ.In(0) == envType {
				continue
			}
			in = append(in, typ.In(i))
		}
		out := make([]reflect.Type, typ.NumOut())
		for i := range out {
			out[i] = typ.Out(i)
		}
		if seen := reflect.FuncOf(in, out, typ.IsVariadic()).String(); seen != signatures[name] {
			t.Errorf("%s is %s to templates, haptic's is %s", name, seen, signatures[name])
		}
	}
}
