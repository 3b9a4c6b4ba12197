package scriggo

import (
	"math"
	"reflect"
	"slices"
	"testing"
)

// names are the "name" fields of items, in order.
func names(items []any) []string {
	var out []string
	for _, item := range items {
		out = append(out, item.(map[string]any)["name"].(string))
	}
	return out
}

func item(name string, fields ...any) map[string]any {
	m := map[string]any{"name": name}
	for i := 0; i+1 < len(fields); i += 2 {
		m[fields[i].(string)] = fields[i+1]
	}
	return m
}

func TestSortBy(t *testing.T) {
	cases := []struct {
		name     string
		items    []any
		criteria []string
		want     []string
	}{
		{"by a field", []any{item("charlie"), item("alice"), item("bob")}, []string{"$.name"}, []string{"alice", "bob", "charlie"}},
		{"without $.", []any{item("b"), item("a")}, []string{"name"}, []string{"a", "b"}},
		{"no criteria keeps the order", []any{item("b"), item("a")}, nil, []string{"b", "a"}},
		{"descending numbers", []any{item("one", "p", 1), item("three", "p", 3), item("two", "p", 2)}, []string{"$.p:desc"}, []string{"three", "two", "one"}},
		{"int, int64 and float64 as numbers", []any{item("a", "p", int64(10)), item("b", "p", 9.5), item("c", "p", 2)}, []string{"$.p"}, []string{"c", "b", "a"}},
		{"numbers, not their text", []any{item("ten", "p", 10), item("nine", "p", 9)}, []string{"$.p"}, []string{"nine", "ten"}},
		{"a number beside a string as text", []any{item("s", "p", "10"), item("n", "p", 9)}, []string{"$.p"}, []string{"s", "n"}},
		{"criteria in turn", []any{item("b1", "t", "b", "p", 1), item("a2", "t", "a", "p", 2), item("a1", "t", "a", "p", 1)}, []string{"$.t", "$.p"}, []string{"a1", "a2", "b1"}},
		{"missing sorts last", []any{item("none"), item("z", "p", "z"), item("a", "p", "a")}, []string{"$.p"}, []string{"a", "z", "none"}},
		{"missing sorts first descending", []any{item("z", "p", "z"), item("none"), item("a", "p", "a")}, []string{"$.p:desc"}, []string{"none", "z", "a"}},
		{"exists descending", []any{item("without"), item("with", "method", "GET"), item("also-without")}, []string{"$.method:exists:desc"}, []string{"with", "without", "also-without"}},
		{"exists ascending", []any{item("with", "method", "GET"), item("without")}, []string{"$.method:exists"}, []string{"without", "with"}},
		{"exists counts an empty value", []any{item("none"), item("empty", "m", map[string]any{})}, []string{"$.m:exists:desc"}, []string{"empty", "none"}},
		{"length descending", []any{item("two", "l", []any{1, 2}), item("three", "l", []string{"a", "b", "c"}), item("one", "l", []any{1})}, []string{"$.l | length:desc"}, []string{"three", "two", "one"}},
		{"length of text and maps", []any{item("long", "l", "abcd"), item("map", "l", map[string]string{"a": "b"}), item("none")}, []string{"$.l | length"}, []string{"none", "map", "long"}},
		{"exists wins over length", []any{item("long", "l", "abcd"), item("none"), item("short", "l", "a")}, []string{"$.l | length:exists:desc"}, []string{"long", "short", "none"}},
		{"nested paths", []any{item("b", "m", map[string]any{"n": map[string]any{"v": 2}}), item("a", "m", map[string]any{"n": map[string]any{"v": 1}})}, []string{"$.m.n.v"}, []string{"a", "b"}},
		{"through map[string]string", []any{item("b", "labels", map[string]string{"app": "y"}), item("a", "labels", map[string]string{"app": "x"})}, []string{"$.labels.app"}, []string{"a", "b"}},
		{"list elements", []any{item("b", "l", []any{"y"}), item("a", "l", []any{"x"}), item("none", "l", []any{})}, []string{"$.l.[0]"}, []string{"a", "b", "none"}},
		{"the item itself", []any{"b", "c", "a"}, []string{"$"}, nil},
		{"operators read as a field name: all equal", []any{item("b", "n", "1"), item("a", "n", "2")}, []string{"$.n ~ '/' ~ $.name"}, []string{"b", "a"}},
		{"unknown modifiers are ignored", []any{item("b"), item("a")}, []string{"$.name:loud"}, []string{"a", "b"}},
		{"stable", []any{item("x", "k", 1), item("y", "k", 0), item("z", "k", 1), item("w", "k", 0)}, []string{"$.k"}, []string{"y", "w", "x", "z"}},
		{"booleans as text", []any{item("t", "b", true), item("f", "b", false)}, []string{"$.b"}, []string{"f", "t"}},
		{"NaN is equal to every number", []any{item("x", "p", 2), item("nan", "p", math.NaN()), item("y", "p", 1)}, []string{"$.p"}, []string{"x", "nan", "y"}},
	}
	for _, c := range cases {
		got, err := sortBy(c.items, c.criteria)
		if err != nil {
			t.Fatal(err)
		}
		if c.want == nil {
			continue
		}
		if !slices.Equal(names(got), c.want) {
			t.Errorf("%s: sort_by = %v, want %v", c.name, names(got), c.want)
		}
	}
	plain, _ := sortBy([]any{"b", "c", "a"}, []string{"$"})
	if !slices.Equal(plain, []any{"a", "b", "c"}) {
		t.Errorf("sort_by $ = %v", plain)
	}
}

func TestSortByCopies(t *testing.T) {
	items := []any{item("c"), item("a"), item("b")}
	sorted, _ := sortBy(items, []string{"$.name"})
	if names(items)[0] != "c" || names(sorted)[0] != "a" {
		t.Fatal("sort_by must sort a copy")
	}
	for _, in := range [][]any{nil, {}} {
		if got, err := sortBy(in, []string{"$.name"}); got == nil || len(got) != 0 || err != nil {
			t.Errorf("sort_by(%#v) = %#v, %v", in, got, err)
		}
	}
	one := []any{item("a")}
	if got, _ := sortBy(one, nil); &got[0] == &one[0] {
		t.Error("sort_by without criteria must still copy")
	}
}

// The chart's route ordering (haproxytemplateconfig.yaml), on routes
// shaped as its libraries build them.
func TestSortByTheChartsRouteCriteria(t *testing.T) {
	route := func(name, pathType, value string, method any, headers []any, created string) map[string]any {
		match := map[string]any{"headers": headers, "queryParams": []any{}}
		if method != nil {
			match["method"] = method
		}
		return map[string]any{
			"name":  name,
			"path":  map[string]any{"type": pathType, "value": value},
			"match": match,
			"route": map[string]any{"metadata": map[string]any{"creationTimestamp": created, "namespace": "ns", "name": name}},
			// ruleIdx as an int, as the template's counter is.
			"ruleIdx": 0,
		}
	}
	routes := []any{
		route("prefix-short", "PathPrefix", "/", nil, []any{}, "2024-01-01T00:00:00Z"),
		route("exact", "Exact", "/a", nil, []any{}, "2024-01-03T00:00:00Z"),
		route("prefix-long", "PathPrefix", "/api", nil, []any{}, "2024-01-02T00:00:00Z"),
		route("prefix-long-get", "PathPrefix", "/api", "GET", []any{}, "2024-01-05T00:00:00Z"),
		route("prefix-long-header", "PathPrefix", "/api", nil, []any{map[string]any{"name": "x"}}, "2024-01-04T00:00:00Z"),
		route("prefix-long-older", "PathPrefix", "/api", nil, []any{}, "2023-12-31T00:00:00Z"),
	}
	sorted, err := sortBy(routes, []string{
		"$.path.type",
		"$.path.value | length:desc",
		"$.match.method:exists:desc",
		"$.match.headers | length:desc",
		"$.match.queryParams | length:desc",
		"$.route.metadata.creationTimestamp",
		"$.route.metadata.namespace ~ '/' ~ $.route.metadata.name",
		"$.ruleIdx",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"exact", "prefix-long-get", "prefix-long-header", "prefix-long-older", "prefix-long", "prefix-short"}
	if !slices.Equal(names(sorted), want) {
		t.Fatalf("sorted %v, want %v", names(sorted), want)
	}
}

func TestReadPath(t *testing.T) {
	type spec struct {
		Port    int
		private string
	}
	obj := map[string]any{
		"spec":    &spec{Port: 80, private: "x"},
		"byInt":   map[int]string{7: "seven"},
		"ptrMap":  &map[string]any{"k": "v"},
		"list":    []string{"a", "b"},
		"array":   [2]int{1, 2},
		"dotted":  map[string]any{"a.b": 1},
		"missing": nil,
	}
	cases := []struct {
		path string
		want any
	}{
		{"$.spec.Port", 80},
		{"spec.Port", 80},
		{"$.spec.private", nil},
		{"$.spec.Nope", nil},
		{"$.byInt.7", "seven"},
		{"$.ptrMap.k", "v"},
		{"$.list.[1]", "b"},
		{"$.list.[2]", nil},
		{"$.list.[-1]", nil},
		{"$.list.[x]", nil},
		{"$.list[1]", nil},
		{"$.array.[0]", 1},
		{"$.dotted.a.b", nil},
		{"$.missing.x", nil},
		{"  $.list.[0]  ", "a"},
		{"", nil},
		{"$.", obj},
	}
	for _, c := range cases {
		if got := readPath(obj, c.path); !reflect.DeepEqual(got, c.want) {
			t.Errorf("readPath(%q) = %#v, want %#v", c.path, got, c.want)
		}
	}
}

func TestBatchFunctions(t *testing.T) {
	routes := []any{
		map[string]any{"pathKey": "h|/a", "routeId": "r1", "meta": map[string]any{"ns": "x"}},
		map[string]any{"pathKey": "h|/b", "routeId": "r2", "meta": map[string]any{"ns": "y"}},
		map[string]any{"pathKey": "h|/a", "routeId": "r3", "meta": map[string]any{"ns": "x"}},
		map[string]any{"routeId": "r4"},
		"not a map",
	}
	groups := groupBy(routes, "pathKey")
	if !reflect.DeepEqual(groups, map[string][]any{"h|/a": {routes[0], routes[2]}, "h|/b": {routes[1]}}) {
		t.Errorf("group_by = %v", groups)
	}
	if got := groupBy(routes, "$.meta.ns"); len(got["x"]) != 2 || len(got["y"]) != 1 || len(got) != 2 {
		t.Errorf("group_by a path = %v", got)
	}
	if got := countBy(routes, "pathKey"); !reflect.DeepEqual(got, map[string]int{"h|/a": 2, "h|/b": 1}) {
		t.Errorf("count_by = %v", got)
	}
	if got := indexBy(routes, "pathKey"); !reflect.DeepEqual(got, map[string]any{"h|/a": routes[2], "h|/b": routes[1]}) {
		t.Errorf("index_by = %v", got)
	}
	if got := uniqueBy(routes, "pathKey"); !reflect.DeepEqual(got, []any{routes[0], routes[1]}) {
		t.Errorf("unique_by = %v", got)
	}
	if got := mapExtract(routes, "routeId"); !reflect.DeepEqual(got, []any{"r1", "r2", "r3", "r4"}) {
		t.Errorf("map_extract = %v", got)
	}
	numbers := []map[string]any{{"port": int64(80)}, {"port": 80}, {"port": 443.0}}
	if got := countBy(numbers, "port"); !reflect.DeepEqual(got, map[string]int{"80": 2, "443": 1}) {
		t.Errorf("count_by numbers = %v", got)
	}
	for _, empty := range []any{nil, []any{}, "not a list"} {
		if groupBy(empty, "k") == nil || countBy(empty, "k") == nil || indexBy(empty, "k") == nil ||
			uniqueBy(empty, "k") == nil || mapExtract(empty, "k") == nil {
			t.Errorf("a batch function returned nil for %#v", empty)
		}
	}
}
