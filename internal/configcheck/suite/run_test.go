package suite

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// ghostFixtures have an Ingress whose Service does not exist: the template
// calls fail.
func ghostFixtures(t testing.TB) map[string][]map[string]any {
	t.Helper()
	return map[string][]map[string]any{
		"ingresses": {ingress(t, "app", "web", "a.example", "ghost")},
	}
}

const ghostError = "ingress app/web: service ghost not found"

func TestRenderingError(t *testing.T) {
	tests := []struct {
		name       string
		fixtures   func(testing.TB) map[string][]map[string]any
		assertions []Assertion
		wantPassed bool
		// wantRenderError is Result.RenderError.
		wantRenderError string
		// wantFailures are the failure messages, in order.
		wantFailures []string
	}{
		{name: "a negative test passes on the fail() message",
			fixtures:        ghostFixtures,
			assertions:      []Assertion{{Type: TypeContains, Target: TargetRenderingError, Pattern: `service ghost not found`}},
			wantPassed:      true,
			wantRenderError: ghostError},
		{name: "equals sees the fail() message alone, not the template error around it",
			fixtures:        ghostFixtures,
			assertions:      []Assertion{{Type: TypeEquals, Target: TargetRenderingError, Expected: ghostError}},
			wantPassed:      true,
			wantRenderError: ghostError},
		{name: "match_count and not_contains on the error",
			fixtures: ghostFixtures,
			assertions: []Assertion{
				{Type: TypeMatchCount, Target: TargetRenderingError, Pattern: `ghost`, Expected: "1"},
				{Type: TypeNotContains, Target: TargetRenderingError, Pattern: `haproxy\.cfg|executing`},
			},
			wantPassed:      true,
			wantRenderError: ghostError},
		{name: "a negative test fails when the error is another",
			fixtures:        ghostFixtures,
			assertions:      []Assertion{{Type: TypeContains, Target: TargetRenderingError, Pattern: `service other not found`}},
			wantRenderError: ghostError,
			wantFailures:    []string{`pattern "service other not found" not found in rendering_error (40 bytes)`}},
		{name: "in a negative test, assertions needing the rendering fail; jsonpath still runs",
			fixtures: ghostFixtures,
			assertions: []Assertion{
				{Type: TypeContains, Target: TargetRenderingError, Pattern: `ghost`},
				{Type: TypeHAProxyValid},
				{Type: TypeContains, Pattern: `global`},
				{Type: TypeEquals, Target: "map:hosts.map", Expected: "x"},
				{Type: TypeDeterministic},
				{Type: TypeJSONPath, JSONPath: `{.resources.ingresses.List()[0].metadata.name}`, Expected: "web"},
			},
			wantRenderError: ghostError,
			wantFailures: []string{
				"rendering failed: " + ghostError,
				"rendering failed: " + ghostError,
				"rendering failed: " + ghostError,
				"rendering failed: " + ghostError,
			}},
		{name: "a test without a rendering_error assertion fails with the render error alone",
			fixtures: ghostFixtures,
			assertions: []Assertion{
				{Type: TypeHAProxyValid},
				{Type: TypeContains, Pattern: `global`},
			},
			wantRenderError: ghostError},
		{name: "rendering_error is empty when the rendering succeeded",
			fixtures: demoFixtures,
			assertions: []Assertion{
				{Type: TypeNotContains, Target: TargetRenderingError, Pattern: `.`},
				{Type: TypeEquals, Target: TargetRenderingError, Expected: ""},
				{Type: TypeMatchCount, Target: TargetRenderingError, Pattern: `not found`, Expected: "0"},
				{Type: TypeContains, Pattern: `backend be_app_api`},
			},
			wantPassed: true},
		{name: "a negative test whose rendering succeeded fails",
			fixtures:     demoFixtures,
			assertions:   []Assertion{{Type: TypeContains, Target: TargetRenderingError, Pattern: `not found`}},
			wantFailures: []string{`pattern "not found" not found in rendering_error (the rendering succeeded)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runner, checker := demoRunner(t)
			result := runOne(t, runner, Test{Fixtures: tt.fixtures(t), Assertions: tt.assertions})
			if result.Passed != tt.wantPassed || result.RenderError != tt.wantRenderError {
				t.Errorf("Passed %v, RenderError %q; want %v, %q", result.Passed, result.RenderError, tt.wantPassed, tt.wantRenderError)
			}
			var messages []string
			for _, failure := range result.Failures {
				messages = append(messages, failure.Message)
			}
			if !reflect.DeepEqual(messages, tt.wantFailures) {
				t.Errorf("failures\n got %q\nwant %q", messages, tt.wantFailures)
			}
			if tt.wantRenderError != "" && checker.calls != 0 {
				t.Errorf("the checker ran %d times on a failed rendering", checker.calls)
			}
		})
	}
}

func TestRenderErrorOtherThanFail(t *testing.T) {
	runner, _ := demoRunner(t)
	runner.Renderer = compile(t, render.Templates{HAProxyConfig: `{{ .resources.services.GetSingle "a" "b" "c" }}`})
	result := runOne(t, runner, Test{Assertions: []Assertion{{Type: TypeContains, Target: TargetRenderingError, Pattern: `3 keys given`}}})
	if !result.Passed || !strings.HasPrefix(result.RenderError, "render haproxyConfig: ") {
		t.Fatalf("result = %+v, want a pass and the whole error text", result)
	}
}

func TestGlobalFixtures(t *testing.T) {
	runner, checker := demoRunner(t)
	global := Test{
		Fixtures: map[string][]map[string]any{
			"services": {service(t, "app", "api", "10.0.0.10"), service(t, "app", "other", "10.0.0.20")},
		},
		// Never run: Validate refuses this, Run ignores it.
		Assertions: []Assertion{{Type: TypeContains, Pattern: `never there`}, {Type: TypeHAProxyValid}},
	}
	globalCopy := Test{Fixtures: map[string][]map[string]any{
		"services": {service(t, "app", "api", "10.0.0.10"), service(t, "app", "other", "10.0.0.20")},
	}}
	tests := map[string]Test{
		GlobalTest: global,
		"merged": {
			Fixtures: map[string][]map[string]any{"ingresses": {ingress(t, "app", "web", "a.example", "api")}},
			Assertions: []Assertion{
				{Type: TypeHAProxyValid},
				{Type: TypeContains, Pattern: `server s1 10\.0\.0\.10:80`},
				{Type: TypeMatchOrder, Patterns: []string{`# service app/api`, `# service app/other`}},
			},
		},
		"overridden": {
			Fixtures: map[string][]map[string]any{
				"services":  {service(t, "app", "api", "10.9.9.9")},
				"ingresses": {ingress(t, "app", "web", "a.example", "api")},
			},
			Assertions: []Assertion{
				{Type: TypeContains, Pattern: `server s1 10\.9\.9\.9:80`},
				{Type: TypeNotContains, Pattern: `10\.0\.0\.10`},
				{Type: TypeMatchCount, Pattern: `# service app/api\n`, Expected: "1"},
				{Type: TypeContains, Pattern: `# service app/other`},
				{Type: TypeJSONPath, JSONPath: `{.resources.services.List()[*].spec.clusterIP}`, Expected: "10.9.9.9 10.0.0.20"},
			},
		},
	}
	report, err := runner.Run(context.Background(), tests, "")
	if err != nil {
		t.Fatal(err)
	}
	if report.Total != 2 || report.Failed != 0 || len(report.Results) != 2 {
		t.Fatalf("report = %+v, want 2 passed tests and no _global", report)
	}
	if report.Results[0].Name != "merged" || report.Results[1].Name != "overridden" {
		t.Fatalf("results %q, %q; want merged, overridden", report.Results[0].Name, report.Results[1].Name)
	}
	if checker.calls != 1 {
		t.Errorf("the checker ran %d times, want once (_global's haproxy_valid must not run)", checker.calls)
	}
	if !reflect.DeepEqual(global.Fixtures, globalCopy.Fixtures) {
		t.Errorf("running changed _global's fixtures")
	}
}

func TestOnly(t *testing.T) {
	runner, _ := demoRunner(t)
	pass := Test{Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeContains, Pattern: `global`}}}
	fail := Test{Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeContains, Pattern: `never`}}}
	tests := map[string]Test{"c": pass, "a": fail, "b": pass, GlobalTest: {}}

	report, err := runner.Run(context.Background(), tests, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, result := range report.Results {
		names = append(names, result.Name)
		if result.Duration <= 0 {
			t.Errorf("%s: no duration", result.Name)
		}
	}
	if !reflect.DeepEqual(names, []string{"a", "b", "c"}) || report.Total != 3 || report.Failed != 1 {
		t.Fatalf("ran %q (total %d, failed %d), want a, b, c in order, one failed", names, report.Total, report.Failed)
	}

	report, err = runner.Run(context.Background(), tests, "b")
	if err != nil {
		t.Fatal(err)
	}
	if report.Total != 1 || len(report.Results) != 1 || report.Results[0].Name != "b" || report.Failed != 0 {
		t.Fatalf("only b: report %+v", report)
	}

	_, err = runner.Run(context.Background(), tests, "zzz")
	if err == nil || err.Error() != `no validation test named "zzz" (tests: a, b, c)` {
		t.Errorf("unknown test: err %v", err)
	}
	_, err = runner.Run(context.Background(), tests, GlobalTest)
	if err == nil || !strings.Contains(err.Error(), "_global is not a test") {
		t.Errorf("only _global: err %v", err)
	}
}

func TestFixtureProblemsFailTheTest(t *testing.T) {
	runner, _ := demoRunner(t)
	fixtures := demoFixtures(t)
	fixtures["secrets"] = []map[string]any{{"metadata": map[string]any{"name": "s"}}}
	result := runOne(t, runner, Test{Fixtures: fixtures, Assertions: []Assertion{{Type: TypeContains, Pattern: `global`}}})
	want := []Failure{{Assertion: "fixtures", Message: `fixtures for "secrets", which is not a watched resource (watched: ingresses, services)`}}
	if result.Passed || !reflect.DeepEqual(result.Failures, want) {
		t.Fatalf("result %+v, want failures %+v", result, want)
	}
}

func TestFixturesAreNotChanged(t *testing.T) {
	runner, _ := demoRunner(t)
	fixtures := demoFixtures(t)
	before := demoFixtures(t)
	runOne(t, runner, Test{Fixtures: fixtures, Assertions: []Assertion{{Type: TypeContains, Pattern: `global`}}})
	if !reflect.DeepEqual(fixtures, before) {
		t.Fatalf("Run changed the fixtures (normalizing them in place?)")
	}
}

func TestBadIndexBy(t *testing.T) {
	runner, _ := demoRunner(t)
	runner.IndexBy = map[string][]string{"services": {"metadata..name"}}
	_, err := runner.Run(context.Background(), map[string]Test{"t": {}}, "")
	if err == nil || !strings.Contains(err.Error(), `watched resource "services"`) {
		t.Fatalf("err %v, want the bad indexBy named", err)
	}
}

func TestCheckerInfrastructureErrorStopsTheRun(t *testing.T) {
	runner, _ := demoRunner(t)
	runner.Check = func(context.Context, render.Output) (bool, string, error) {
		return false, "", errors.New("haproxy checker busy")
	}
	tests := map[string]Test{
		"a": {Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeContains, Pattern: `global`}}},
		"b": {Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeHAProxyValid}}},
		"c": {Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeContains, Pattern: `global`}}},
	}
	report, err := runner.Run(context.Background(), tests, "")
	if err == nil || err.Error() != `validation test "b": haproxy check: haproxy checker busy` {
		t.Fatalf("err %v", err)
	}
	if len(report.Results) != 1 || report.Results[0].Name != "a" {
		t.Fatalf("report %+v, want a's result only", report)
	}
}

// cancellingRenderer cancels the run's context on its nth rendering, before
// rendering.
type cancellingRenderer struct {
	inner  render.Renderer
	cancel context.CancelFunc
	n      int
}

func (c *cancellingRenderer) Render(ctx context.Context, data render.Data) (render.Output, error) {
	c.n--
	if c.n == 0 {
		c.cancel()
	}
	return c.inner.Render(ctx, data)
}

func TestContextEnds(t *testing.T) {
	passing := Test{Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeContains, Pattern: `global`}}}
	tests := map[string]Test{"a": passing, "b": passing, "c": passing}
	const prefix = "validation tests did not finish in time: "

	t.Run("cancelled before", func(t *testing.T) {
		runner, _ := demoRunner(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		report, err := runner.Run(ctx, tests, "")
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), prefix) || len(report.Results) != 0 {
			t.Fatalf("err %v, report %+v", err, report)
		}
	})
	t.Run("deadline passed", func(t *testing.T) {
		runner, _ := demoRunner(t)
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		_, err := runner.Run(ctx, tests, "")
		if !errors.Is(err, context.DeadlineExceeded) || err.Error() != prefix+"context deadline exceeded" {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("during a rendering", func(t *testing.T) {
		runner, _ := demoRunner(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		runner.Renderer = &cancellingRenderer{inner: runner.Renderer, cancel: cancel, n: 2}
		report, err := runner.Run(ctx, tests, "")
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), prefix) {
			t.Fatalf("err %v", err)
		}
		if len(report.Results) != 1 || report.Results[0].Name != "a" || !report.Results[0].Passed {
			t.Fatalf("report %+v, want a's result only", report)
		}
	})
	t.Run("during the haproxy check", func(t *testing.T) {
		runner, _ := demoRunner(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		runner.Check = func(ctx context.Context, _ render.Output) (bool, string, error) {
			cancel()
			return false, "", ctx.Err()
		}
		checked := map[string]Test{"a": passing, "b": {Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeHAProxyValid}}}, "c": passing}
		report, err := runner.Run(ctx, checked, "")
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), prefix) || len(report.Results) != 1 {
			t.Fatalf("err %v, report %+v", err, report)
		}
	})
}

func TestNoRenderer(t *testing.T) {
	if _, err := (&Runner{}).Run(context.Background(), nil, ""); err == nil {
		t.Fatal("want an error without a renderer")
	}
}
