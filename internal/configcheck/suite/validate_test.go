package suite

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidate(t *testing.T) {
	obj := func(namespace, name string) map[string]any {
		return map[string]any{"metadata": map[string]any{"namespace": namespace, "name": name}}
	}
	good := func(assertions ...Assertion) Test {
		return Test{
			Fixtures:   map[string][]map[string]any{"services": {obj("app", "api")}},
			Assertions: assertions,
		}
	}
	contains := Assertion{Type: TypeContains, Pattern: `x`}
	const prefix = "spec.validationTests[t]"

	// problem is one error, by type and field.
	type problem struct {
		Type  field.ErrorType
		Field string
	}
	tests := []struct {
		name  string
		tests map[string]Test
		want  []problem
	}{
		{name: "every assertion type and target, well formed",
			tests: map[string]Test{
				GlobalTest: {Fixtures: map[string][]map[string]any{"ingresses": {obj("app", "web")}}},
				"t": good(
					Assertion{Type: TypeHAProxyValid},
					Assertion{Type: TypeHAProxyValid, Target: "haproxy.cfg"},
					Assertion{Type: TypeContains, Pattern: `backend be_\w+`},
					Assertion{Type: TypeNotContains, Target: "map:hosts.map", Pattern: `x`},
					Assertion{Type: TypeEquals, Target: "file:503.http", Expected: "x\n"},
					Assertion{Type: TypeMatchCount, Target: "cert:a.pem", Pattern: `x`, Expected: "0"},
					Assertion{Type: TypeMatchOrder, Target: TargetRenderingError, Patterns: []string{`a`, `b`}},
					Assertion{Type: TypeJSONPath, JSONPath: `{.resources.services.List()[0].metadata.name}`, Expected: "api"},
					Assertion{Type: TypeDeterministic},
				),
			}},
		{name: "an unknown fixture key",
			tests: map[string]Test{"t": {Fixtures: map[string][]map[string]any{"secrets": {obj("", "s")}}, Assertions: []Assertion{contains}}},
			want:  []problem{{field.ErrorTypeNotSupported, prefix + ".fixtures[secrets]"}}},
		{name: "a fixture object without a name",
			tests: map[string]Test{"t": {Fixtures: map[string][]map[string]any{"services": {obj("app", "api"), {"metadata": map[string]any{"namespace": "app"}}, {"spec": map[string]any{}}}}, Assertions: []Assertion{contains}}},
			want: []problem{
				{field.ErrorTypeRequired, prefix + ".fixtures[services][1].metadata.name"},
				{field.ErrorTypeRequired, prefix + ".fixtures[services][2].metadata.name"},
			}},
		{name: "a fixture object whose index field is not a scalar",
			tests: map[string]Test{"t": {Fixtures: map[string][]map[string]any{"services": {{"metadata": map[string]any{"name": "api", "namespace": map[string]any{"x": "y"}}}}}, Assertions: []Assertion{contains}}},
			want:  []problem{{field.ErrorTypeInvalid, prefix + ".fixtures[services][0]"}}},
		{name: "a test without assertions",
			tests: map[string]Test{"t": {Fixtures: map[string][]map[string]any{"services": {obj("app", "api")}}}},
			want:  []problem{{field.ErrorTypeRequired, prefix + ".assertions"}}},
		{name: "a test without fixtures is fine", tests: map[string]Test{"t": {Assertions: []Assertion{contains}}}},
		{name: "_global with assertions",
			tests: map[string]Test{GlobalTest: {Assertions: []Assertion{{Type: TypeHAProxyValid}}}},
			want:  []problem{{field.ErrorTypeForbidden, "spec.validationTests[_global].assertions"}}},
		{name: "a missing type", tests: map[string]Test{"t": good(Assertion{Pattern: `x`})},
			want: []problem{{field.ErrorTypeRequired, prefix + ".assertions[0].type"}}},
		{name: "an unknown type", tests: map[string]Test{"t": good(contains, Assertion{Type: "regex"})},
			want: []problem{{field.ErrorTypeNotSupported, prefix + ".assertions[1].type"}}},
		{name: "contains without a pattern", tests: map[string]Test{"t": good(Assertion{Type: TypeContains})},
			want: []problem{{field.ErrorTypeRequired, prefix + ".assertions[0].pattern"}}},
		{name: "not_contains with a bad regex", tests: map[string]Test{"t": good(Assertion{Type: TypeNotContains, Pattern: `a(b`})},
			want: []problem{{field.ErrorTypeInvalid, prefix + ".assertions[0].pattern"}}},
		{name: "equals without expected", tests: map[string]Test{"t": good(Assertion{Type: TypeEquals, Pattern: `x`})},
			want: []problem{{field.ErrorTypeRequired, prefix + ".assertions[0].expected"}}},
		{name: "match_count without pattern and expected", tests: map[string]Test{"t": good(Assertion{Type: TypeMatchCount})},
			want: []problem{
				{field.ErrorTypeRequired, prefix + ".assertions[0].pattern"},
				{field.ErrorTypeRequired, prefix + ".assertions[0].expected"},
			}},
		{name: "match_count with a non-integer count", tests: map[string]Test{"t": good(Assertion{Type: TypeMatchCount, Pattern: `x`, Expected: "two"})},
			want: []problem{{field.ErrorTypeInvalid, prefix + ".assertions[0].expected"}}},
		{name: "match_count with a negative count", tests: map[string]Test{"t": good(Assertion{Type: TypeMatchCount, Pattern: `x`, Expected: "-1"})},
			want: []problem{{field.ErrorTypeInvalid, prefix + ".assertions[0].expected"}}},
		{name: "match_count with a bad regex", tests: map[string]Test{"t": good(Assertion{Type: TypeMatchCount, Pattern: `*`, Expected: "1"})},
			want: []problem{{field.ErrorTypeInvalid, prefix + ".assertions[0].pattern"}}},
		{name: "match_order without patterns", tests: map[string]Test{"t": good(Assertion{Type: TypeMatchOrder, Pattern: `x`})},
			want: []problem{{field.ErrorTypeRequired, prefix + ".assertions[0].patterns"}}},
		{name: "match_order with an empty and a bad pattern", tests: map[string]Test{"t": good(Assertion{Type: TypeMatchOrder, Patterns: []string{"", `a`, `[`}})},
			want: []problem{
				{field.ErrorTypeRequired, prefix + ".assertions[0].patterns[0]"},
				{field.ErrorTypeInvalid, prefix + ".assertions[0].patterns[2]"},
			}},
		{name: "jsonpath without jsonpath and expected", tests: map[string]Test{"t": good(Assertion{Type: TypeJSONPath})},
			want: []problem{
				{field.ErrorTypeRequired, prefix + ".assertions[0].jsonpath"},
				{field.ErrorTypeRequired, prefix + ".assertions[0].expected"},
			}},
		{name: "jsonpath that does not parse", tests: map[string]Test{"t": good(Assertion{Type: TypeJSONPath, JSONPath: `{.resources[}`, Expected: "x"})},
			want: []problem{{field.ErrorTypeInvalid, prefix + ".assertions[0].jsonpath"}}},
		{name: "unknown target forms", tests: map[string]Test{"t": good(
			Assertion{Type: TypeContains, Target: "crt-list:x", Pattern: `x`},
			Assertion{Type: TypeContains, Target: "map:", Pattern: `x`},
			Assertion{Type: TypeContains, Target: "hosts.map", Pattern: `x`},
		)},
			want: []problem{
				{field.ErrorTypeInvalid, prefix + ".assertions[0].target"},
				{field.ErrorTypeInvalid, prefix + ".assertions[1].target"},
				{field.ErrorTypeInvalid, prefix + ".assertions[2].target"},
			}},
		{name: "a target on an assertion type without one", tests: map[string]Test{"t": good(
			Assertion{Type: TypeHAProxyValid, Target: TargetRenderingError},
			Assertion{Type: TypeDeterministic, Target: "map:a"},
			Assertion{Type: TypeJSONPath, Target: "file:a", JSONPath: "{.a}", Expected: "x"},
		)},
			want: []problem{
				{field.ErrorTypeInvalid, prefix + ".assertions[0].target"},
				{field.ErrorTypeInvalid, prefix + ".assertions[1].target"},
				{field.ErrorTypeInvalid, prefix + ".assertions[2].target"},
			}},
		{name: "errors of several tests, in name order",
			tests: map[string]Test{"b": {}, "a": {}},
			want: []problem{
				{field.ErrorTypeRequired, "spec.validationTests[a].assertions"},
				{field.ErrorTypeRequired, "spec.validationTests[b].assertions"},
			}},
	}
	watched := map[string][]string{
		"ingresses": {"metadata.namespace", "metadata.name"},
		"services":  {"metadata.namespace", "metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []problem
			for _, err := range Validate(tt.tests, watched) {
				got = append(got, problem{err.Type, err.Field})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %v\nwant %v\nerrors: %v", got, tt.want, Validate(tt.tests, watched).ToAggregate())
			}
		})
	}
}

func TestValidateMessages(t *testing.T) {
	watched := map[string][]string{"ingresses": nil, "services": nil}
	tests := map[string]Test{"t": {
		Fixtures:   map[string][]map[string]any{"secrets": {{"metadata": map[string]any{"name": "s"}}}},
		Assertions: []Assertion{{Type: "regex"}, {Type: TypeContains, Target: "crt-list:x", Pattern: "x"}},
	}}
	want := []string{
		`spec.validationTests[t].fixtures[secrets]: Unsupported value: "secrets": supported values: "ingresses", "services"`,
		`spec.validationTests[t].assertions[0].type: Unsupported value: "regex": supported values: "haproxy_valid", "contains", "not_contains", "equals", "match_count", "match_order", "jsonpath", "deterministic"`,
		`spec.validationTests[t].assertions[1].target: Invalid value: "crt-list:x": unknown target, want "haproxy.cfg" (the default), "rendering_error", "map:<name>", "file:<name>" or "cert:<name>"`,
	}
	errs := Validate(tests, watched)
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
