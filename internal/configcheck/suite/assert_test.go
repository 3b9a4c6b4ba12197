package suite

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// demoConfig is haproxy.cfg as rendered from demoFixtures; the assertion
// tests below check the runner against it.
const demoConfig = `global
  daemon
defaults
  mode http
# service app/api
frontend fe_http
  bind :8080
  use_backend %[req.hdr(host),lower,map(maps/hosts.map,be_default)]
backend be_default
  http-request return status 404
backend be_app_api
  server s1 10.0.0.10:80
`

func TestDemoRendering(t *testing.T) {
	runner, _ := demoRunner(t)
	result := runOne(t, runner, Test{
		Fixtures: demoFixtures(t),
		Assertions: []Assertion{
			{Type: TypeEquals, Expected: demoConfig},
			{Type: TypeEquals, Target: "map:hosts.map", Expected: "a.example be_app_api\n"},
			{Type: TypeEquals, Target: "map:paths.map", Expected: "/ web\n"},
		},
	})
	if !result.Passed {
		t.Fatalf("the demo rendering changed: %+v", result)
	}
}

func TestAssertions(t *testing.T) {
	cfgSize := strconv.Itoa(len(demoConfig))
	tests := []struct {
		name      string
		assertion Assertion
		// fixtures replace demoFixtures when set.
		fixtures func(t testing.TB) map[string][]map[string]any
		// want is the failure message, "" when the assertion passes; a
		// trailing "..." compares only the text before it.
		want string
	}{
		// haproxy_valid
		{name: "haproxy_valid passes", assertion: Assertion{Type: TypeHAProxyValid}},
		{name: "haproxy_valid fails with the checker's message",
			assertion: Assertion{Type: TypeHAProxyValid},
			fixtures: func(t testing.TB) map[string][]map[string]any {
				return map[string][]map[string]any{
					"services":  {service(t, "app", "api", "")},
					"ingresses": {ingress(t, "app", "web", "a.example", "api")},
				}
			},
			want: "HAProxy validation failed: [ALERT] parsing [haproxy.cfg:12] : 'server s1' : invalid address"},

		// contains, on every target
		{name: "contains, default target", assertion: Assertion{Type: TypeContains, Pattern: `backend be_app_api`}},
		{name: "contains, haproxy.cfg", assertion: Assertion{Type: TypeContains, Target: "haproxy.cfg", Pattern: `server s1 10\.0\.0\.10:80`}},
		{name: "contains, map", assertion: Assertion{Type: TypeContains, Target: "map:hosts.map", Pattern: `(?m)^a\.example be_app_api$`}},
		{name: "contains, file", assertion: Assertion{Type: TypeContains, Target: "file:503.http", Pattern: `^HTTP/1\.0 503`}},
		{name: "contains, cert", assertion: Assertion{Type: TypeContains, Target: "cert:default.pem", Pattern: `BEGIN CERTIFICATE`}},
		{name: "contains fails", assertion: Assertion{Type: TypeContains, Pattern: `be_ghost`},
			want: `pattern "be_ghost" not found in haproxy.cfg (` + cfgSize + ` bytes)`},
		{name: "contains fails on a map", assertion: Assertion{Type: TypeContains, Target: "map:hosts.map", Pattern: `b\.example`},
			want: `pattern "b\\.example" not found in map:hosts.map (21 bytes)`},
		{name: "contains fails on a file", assertion: Assertion{Type: TypeContains, Target: "file:503.http", Pattern: `404`},
			want: `pattern "404" not found in file:503.http (33 bytes)`},
		{name: "contains fails on a cert", assertion: Assertion{Type: TypeContains, Target: "cert:default.pem", Pattern: `PRIVATE KEY`},
			want: `pattern "PRIVATE KEY" not found in cert:default.pem (59 bytes)`},
		{name: "contains with an invalid pattern", assertion: Assertion{Type: TypeContains, Pattern: `(`},
			want: `invalid pattern "(": error parsing regexp: missing closing ): ` + "`(`"},

		// missing outputs
		{name: "a map that was not rendered", assertion: Assertion{Type: TypeContains, Target: "map:nope.map", Pattern: `x`},
			want: `map "nope.map" was not rendered (rendered maps: hosts.map, paths.map)`},
		{name: "a file that was not rendered", assertion: Assertion{Type: TypeContains, Target: "file:x", Pattern: `x`},
			want: `file "x" was not rendered (rendered files: 503.http)`},
		{name: "a cert that was not rendered", assertion: Assertion{Type: TypeNotContains, Target: "cert:x", Pattern: `x`},
			want: `cert "x" was not rendered (rendered certs: default.pem)`},
		{name: "an unknown target", assertion: Assertion{Type: TypeContains, Target: "crt-list:x", Pattern: `x`},
			want: `target "crt-list:x": unknown target, want "haproxy.cfg" (the default), ...`},

		// not_contains
		{name: "not_contains passes", assertion: Assertion{Type: TypeNotContains, Pattern: `be_ghost`}},
		{name: "not_contains fails, naming the line", assertion: Assertion{Type: TypeNotContains, Pattern: `server s1`},
			want: `pattern "server s1" found in haproxy.cfg at line 12: "  server s1 10.0.0.10:80"`},
		{name: "not_contains fails on a map", assertion: Assertion{Type: TypeNotContains, Target: "map:paths.map", Pattern: `web`},
			want: `pattern "web" found in map:paths.map at line 1: "/ web"`},

		// equals
		{name: "equals passes", assertion: Assertion{Type: TypeEquals, Target: "map:paths.map", Expected: "/ web\n"}},
		{name: "equals fails at a line", assertion: Assertion{Type: TypeEquals, Target: "map:paths.map", Expected: "/ api\n"},
			want: `map:paths.map (6 bytes) does not equal expected (6 bytes) at line 1: got "/ web", want "/ api"`},
		{name: "equals fails past the expected end", assertion: Assertion{Type: TypeEquals, Expected: "global\n  daemon\n"},
			want: `haproxy.cfg (` + cfgSize + ` bytes) does not equal expected (16 bytes) at line 3: got "defaults", want ""`},
		{name: "equals says when only the final newline differs", assertion: Assertion{Type: TypeEquals, Target: "map:paths.map", Expected: "/ web"},
			want: `map:paths.map differs from expected only by its final newline (every rendered output ends with one)`},

		// match_count
		{name: "match_count passes", assertion: Assertion{Type: TypeMatchCount, Pattern: `(?m)^backend `, Expected: "2"}},
		{name: "match_count of zero", assertion: Assertion{Type: TypeMatchCount, Pattern: `ghost`, Expected: "0"}},
		{name: "match_count counts non-overlapping matches", assertion: Assertion{Type: TypeMatchCount, Target: "file:503.http", Pattern: `[0-9]{2}`, Expected: "1"}}, // "503": 50, not also 03
		{name: "match_count fails", assertion: Assertion{Type: TypeMatchCount, Pattern: `(?m)^backend `, Expected: "3"},
			want: `expected 3 matches of "(?m)^backend " in haproxy.cfg, got 2`},
		{name: "match_count fails on a map", assertion: Assertion{Type: TypeMatchCount, Target: "map:hosts.map", Pattern: `be_`, Expected: "2"},
			want: `expected 2 matches of "be_" in map:hosts.map, got 1`},
		{name: "match_count with a non-integer count", assertion: Assertion{Type: TypeMatchCount, Pattern: `x`, Expected: "two"},
			want: `expected "two" is not a match count: ...`},

		// match_order
		{name: "match_order passes", assertion: Assertion{Type: TypeMatchOrder, Patterns: []string{`global`, `defaults`, `frontend fe_http`, `backend be_default`, `backend be_app_api`}}},
		{name: "match_order needs each match after the previous one's end", assertion: Assertion{Type: TypeMatchOrder, Target: "map:paths.map", Patterns: []string{`/ web`, `web`}},
			want: `patterns out of order in map:paths.map: "web" (2 of 2) not found after "/ web" (matched at line 1); it matches earlier, at line 1`},
		{name: "match_order fails on the order", assertion: Assertion{Type: TypeMatchOrder, Patterns: []string{`backend be_app_api`, `frontend`}},
			want: `patterns out of order in haproxy.cfg: "frontend" (2 of 2) not found after "backend be_app_api" (matched at line 11); it matches earlier, at line 6`},
		{name: "match_order fails on a missing pattern", assertion: Assertion{Type: TypeMatchOrder, Patterns: []string{`global`, `listen stats`}},
			want: `patterns out of order in haproxy.cfg: "listen stats" (2 of 2) not found after "global" (matched at line 1)`},
		{name: "match_order fails on a missing first pattern", assertion: Assertion{Type: TypeMatchOrder, Patterns: []string{`listen stats`, `global`}},
			want: `pattern "listen stats" (1 of 2) not found in haproxy.cfg`},

		// jsonpath (more in TestJSONPath)
		{name: "jsonpath passes", assertion: Assertion{Type: TypeJSONPath, JSONPath: `{.resources.services.List()[0].metadata.name}`, Expected: "api"}},
		{name: "jsonpath fails", assertion: Assertion{Type: TypeJSONPath, JSONPath: `{.resources.services.List()[0].metadata.name}`, Expected: "web"},
			want: `JSONPath "{.resources.services.List()[0].metadata.name}" returned "api", expected "web"`},
		{name: "jsonpath without results", assertion: Assertion{Type: TypeJSONPath, JSONPath: `{.resources.services.List()[0].metadata.labels}`, Expected: "x"},
			want: `JSONPath expression returned no results`},

		// deterministic (the failing case is TestDeterministicFails)
		{name: "deterministic passes", assertion: Assertion{Type: TypeDeterministic}},

		{name: "an unknown assertion type", assertion: Assertion{Type: "bogus"}, want: `unknown assertion type "bogus"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runner, _ := demoRunner(t)
			fixtures := demoFixtures(t)
			if tt.fixtures != nil {
				fixtures = tt.fixtures(t)
			}
			result := runOne(t, runner, Test{Fixtures: fixtures, Assertions: []Assertion{tt.assertion}})
			if result.RenderError != "" {
				t.Fatalf("render error: %s", result.RenderError)
			}
			if tt.want == "" {
				if !result.Passed || len(result.Failures) != 0 {
					t.Fatalf("want a pass, got %+v", result)
				}
				return
			}
			if result.Passed || len(result.Failures) != 1 {
				t.Fatalf("want one failure, got %+v", result)
			}
			failure := result.Failures[0]
			if failure.Assertion != tt.assertion.Type {
				t.Errorf("Failure.Assertion = %q, want the type %q", failure.Assertion, tt.assertion.Type)
			}
			if prefix, ok := strings.CutSuffix(tt.want, "..."); ok {
				if !strings.HasPrefix(failure.Message, prefix) {
					t.Errorf("message\n got %s\nwant %s", failure.Message, tt.want)
				}
			} else if failure.Message != tt.want {
				t.Errorf("message\n got %s\nwant %s", failure.Message, tt.want)
			}
		})
	}
}

func TestFailureNamesTheDescription(t *testing.T) {
	runner, _ := demoRunner(t)
	result := runOne(t, runner, Test{
		Fixtures: demoFixtures(t),
		Assertions: []Assertion{
			{Type: TypeContains, Description: "the ghost backend exists", Pattern: `be_ghost`},
			{Type: TypeContains, Description: "passes", Pattern: `be_app_api`},
			{Type: TypeNotContains, Pattern: `be_app_api`},
		},
	})
	if len(result.Failures) != 2 || result.Failures[0].Assertion != "the ghost backend exists" || result.Failures[1].Assertion != TypeNotContains {
		t.Fatalf("failures = %+v, want the description, then the type", result.Failures)
	}
}

func TestFailureMessagesAreBounded(t *testing.T) {
	runner, _ := demoRunner(t)
	long := strings.Repeat("é", 400) // 800 bytes, two per rune
	result := runOne(t, runner, Test{
		Fixtures:   demoFixtures(t),
		Assertions: []Assertion{{Type: TypeContains, Pattern: long}, {Type: TypeMatchCount, Pattern: long, Expected: "1"}},
	})
	if len(result.Failures) != 2 {
		t.Fatalf("failures = %+v", result.Failures)
	}
	for _, failure := range result.Failures {
		if len(failure.Message) > maxFailureMessage || !strings.HasSuffix(failure.Message, "…") {
			t.Errorf("message of %d bytes, want at most %d ending in …: %s", len(failure.Message), maxFailureMessage, failure.Message)
		}
		if !strings.Contains(failure.Message, "é") || strings.ContainsRune(failure.Message, '\uFFFD') {
			t.Errorf("message cut inside a rune: %q", failure.Message)
		}
	}
}

func TestHAProxyValidWithoutChecker(t *testing.T) {
	runner, _ := demoRunner(t)
	runner.Check = nil
	result := runOne(t, runner, Test{Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeHAProxyValid}}})
	if result.Passed || len(result.Failures) != 1 || result.Failures[0].Message != "no haproxy checker" {
		t.Fatalf("result = %+v, want the failure \"no haproxy checker\"", result)
	}
}

func TestHAProxyValidChecksTheRendering(t *testing.T) {
	runner, _ := demoRunner(t)
	var seen render.Output
	runner.Check = func(_ context.Context, out render.Output) (bool, string, error) {
		seen = out
		return true, "", nil
	}
	runOne(t, runner, Test{Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeHAProxyValid}}})
	if seen.HAProxyConfig != demoConfig || seen.Maps["hosts.map"] != "a.example be_app_api\n" || seen.Certs["default.pem"] == "" {
		t.Fatalf("the checker saw %+v, want the whole rendering", seen)
	}
}

func TestDeterministicFails(t *testing.T) {
	runner, _ := demoRunner(t)
	// Renderings are deterministic by construction (no clock, no random
	// function), so the second rendering differs by a renderer's doing.
	runner.Renderer = &tokenRenderer{inner: compile(t, render.Templates{
		HAProxyConfig: "global\n  daemon\n",
		Maps:          map[string]string{"stable.map": "a b\n"},
		Files:         map[string]string{"a-stable": "x", "b-token": "line one\n"},
	})}
	result := runOne(t, runner, Test{Assertions: []Assertion{{Type: TypeDeterministic}}})
	if result.Passed || len(result.Failures) != 1 {
		t.Fatalf("result = %+v, want one failure", result)
	}
	want := `rendering twice gave different file:b-token: first difference at line 2: first "token `
	if message := result.Failures[0].Message; !strings.HasPrefix(message, want) {
		t.Fatalf("message %q, want it to start with %q", message, want)
	}
}

// tokenRenderer appends a line different at every rendering to the file
// b-token.
type tokenRenderer struct {
	inner     render.Renderer
	rendering int
}

func (r *tokenRenderer) Render(ctx context.Context, data render.Data) (render.Output, error) {
	output, err := r.inner.Render(ctx, data)
	r.rendering++
	if err == nil {
		output.Files["b-token"] += fmt.Sprintf("token %d\n", r.rendering)
	}
	return output, err
}

func TestFirstDifference(t *testing.T) {
	base := render.Output{
		HAProxyConfig: "global\n",
		Maps:          map[string]string{"a.map": "a\n"},
		Files:         map[string]string{},
		Certs:         map[string]string{"c.pem": "c\n"},
	}
	with := func(change func(*render.Output)) render.Output {
		out := render.Output{HAProxyConfig: base.HAProxyConfig, Maps: map[string]string{}, Files: map[string]string{}, Certs: map[string]string{}}
		for k, v := range base.Maps {
			out.Maps[k] = v
		}
		for k, v := range base.Certs {
			out.Certs[k] = v
		}
		change(&out)
		return out
	}
	tests := []struct {
		name   string
		second render.Output
		want   string
	}{
		{"identical", with(func(*render.Output) {}), ""},
		{"haproxy.cfg", with(func(o *render.Output) { o.HAProxyConfig = "global\n  daemon\n" }),
			`rendering twice gave different haproxy.cfg: first difference at line 2: first "", second "  daemon"`},
		{"a map only the first has", with(func(o *render.Output) { delete(o.Maps, "a.map") }), `the second rendering has no map:a.map`},
		{"a file only the second has", with(func(o *render.Output) { o.Files["f"] = "f\n" }), `only the second rendering has file:f`},
		{"a cert", with(func(o *render.Output) { o.Certs["c.pem"] = "d\n" }),
			`rendering twice gave different cert:c.pem: first difference at line 1: first "c", second "d"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := firstDifference(base, tt.second); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestJSONPath(t *testing.T) {
	twoServices := func(t testing.TB) map[string][]map[string]any {
		return map[string][]map[string]any{
			// Listed in the order List returns them, whatever the
			// fixture order.
			"services":  {service(t, "app", "web", "10.0.0.11"), service(t, "app", "api", "10.0.0.10")},
			"ingresses": {ingress(t, "app", "web", "a.example", "api")},
		}
	}
	tests := []struct {
		name, path, expected string
		// want is the failure message, "" for a pass.
		want string
	}{
		{"haptic's List() syntax", `{.resources.services.List()[0].metadata.name}`, "api", ""},
		{"plain JSONPath", `{.resources.services[1].spec.clusterIP}`, "10.0.0.11", ""},
		{"without braces", `resources.services.List()[1].metadata.name`, "web", ""},
		{"several results joined with spaces", `{.resources.services.List()[*].metadata.name}`, "api web", ""},
		{"a map result as JSON", `{.resources.services[0].spec.ports[0]}`, `{"port":80}`, ""},
		{"a number normalized to an integer", `{.resources.ingresses[0].spec.rules[0].http.paths[0].backend.service.port.number}`, "80", ""},
		{"extraContext", `{.extraContext.replicas}`, "3", ""},
		{"a kind the fixture has", `{.resources.services[0].kind}`, "Service", ""},
		{"a kind the fixture lacks is not invented", `{.resources.ingresses[0].kind}`, "Ingress", "JSONPath expression returned no results"},
		{"an index past the end", `{.resources.ingresses.List()[1].metadata.name}`, "x", "JSONPath expression returned no results"},
		{"a watched resource without fixtures", `{.resources.empty.List()[0].metadata.name}`, "x", "JSONPath expression returned no results"},
		{"a mismatch", `{.resources.services.List()[0].metadata.namespace}`, "default", `JSONPath "{.resources.services.List()[0].metadata.namespace}" returned "app", expected "default"`},
		{"an invalid expression", `{.resources[}`, "x", `invalid JSONPath "{.resources[}": unterminated array`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runner, _ := demoRunner(t)
			runner.IndexBy = map[string][]string{"services": demoIndexBy["services"], "ingresses": demoIndexBy["ingresses"], "empty": nil}
			result := runOne(t, runner, Test{
				Fixtures:   twoServices(t),
				Assertions: []Assertion{{Type: TypeJSONPath, JSONPath: tt.path, Expected: tt.expected}},
			})
			var got string
			if len(result.Failures) > 0 {
				got = result.Failures[0].Message
			}
			if got != tt.want || result.Passed != (tt.want == "") {
				t.Errorf("got %+v, want failure %q", result, tt.want)
			}
		})
	}
}
