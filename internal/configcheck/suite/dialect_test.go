package suite

import (
	"context"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// hapticRunner is the demo runner under haptic's dialect.
func hapticRunner(t testing.TB) *Runner {
	t.Helper()
	r, _ := demoRunner(t)
	r.Dialect = DialectHaptic
	return r
}

// TestHapticGlobalIsRunAsATest: haptic's runner runs _global like any
// test, its assertions included, while its fixtures still go into every
// other test; Gatehouse's never runs it.
func TestHapticGlobalIsRunAsATest(t *testing.T) {
	tests := map[string]Test{
		GlobalTest: {Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeContains, Pattern: `backend be_app_api`}}},
		"other":    {Assertions: []Assertion{{Type: TypeContains, Pattern: `# service app/api`}}},
	}
	report, err := hapticRunner(t).Run(context.Background(), tests, "")
	if err != nil {
		t.Fatal(err)
	}
	if report.Total != 2 || report.Failed != 0 || report.Results[0].Name != GlobalTest || report.Results[1].Name != "other" {
		t.Fatalf("report %+v, want _global and other run, both passing", report)
	}
	if errs := ValidateDialect(tests, demoIndexBy, DialectHaptic); len(errs) != 0 {
		t.Errorf("haptic's _global with assertions refused: %v", errs)
	}
	if errs := Validate(tests, demoIndexBy); len(errs) == 0 {
		t.Error("Gatehouse's dialect accepted assertions on _global, which it never runs")
	}
	if _, err := hapticRunner(t).Run(context.Background(), tests, GlobalTest); err != nil {
		t.Errorf("haptic's _global cannot be run alone: %v", err)
	}
	// A failing _global assertion fails _global, not the other test.
	tests[GlobalTest] = Test{Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeContains, Pattern: `backend be_nowhere`}}}
	report, _ = hapticRunner(t).Run(context.Background(), tests, "")
	if report.Failed != 1 || report.Results[0].Passed || !report.Results[1].Passed {
		t.Fatalf("report %+v, want _global alone failing", report)
	}
}

// TestHapticTargets: a target naming no output, an empty one or an unknown
// form reads haproxy.cfg (haptic's runner does); crt-list: names a general
// file and cert: a certificate by base name.
func TestHapticTargets(t *testing.T) {
	out := render.Output{
		HAProxyConfig: "global\n  daemon\nbackend b\n",
		Maps:          map[string]string{"hosts.map": "a.example b\n", "empty.map": ""},
		Files:         map[string]string{"certificate-list.txt": "ssl/a.pem [ocsp-update on]\n"},
		Certs:         map[string]string{"ssl/default_example-tls.pem": "-----BEGIN CERTIFICATE-----\n"},
	}
	for _, c := range []struct {
		target, wantText string
	}{
		{"", out.HAProxyConfig},
		{"haproxy.cfg", out.HAProxyConfig},
		{"map:hosts.map", out.Maps["hosts.map"]},
		{"map:missing.map", out.HAProxyConfig},
		{"map:empty.map", out.HAProxyConfig},
		{"crt-list:certificate-list.txt", out.Files["certificate-list.txt"]},
		{"cert:default_example-tls.pem", out.Certs["ssl/default_example-tls.pem"]},
		{"file:certificate-list.txt", out.Files["certificate-list.txt"]},
		{"nonsense:x", out.HAProxyConfig},
	} {
		if got, _ := hapticTargetText(out, c.target); got != c.wantText {
			t.Errorf("target %q read %q, want %q", c.target, got, c.wantText)
		}
	}
	if errs := ValidateDialect(map[string]Test{"t": {Assertions: []Assertion{{Type: TypeContains, Target: "crt-list:x", Pattern: "a"}, {Type: TypeHAProxyValid, Target: "haproxy.cfg"}}}}, demoIndexBy, DialectHaptic); len(errs) != 0 {
		t.Errorf("haptic's targets refused: %v", errs)
	}

	// Through a run: a map the rendering lacks reads haproxy.cfg, so a
	// pattern of haproxy.cfg passes on it.
	tests := map[string]Test{"t": {Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeContains, Target: "map:absent.map", Pattern: `backend be_app_api`}}}}
	report, err := hapticRunner(t).Run(context.Background(), tests, "")
	if err != nil || report.Failed != 0 {
		t.Fatalf("haptic's fallback to haproxy.cfg: %+v %v", report, err)
	}
	gatehouse, _ := demoRunner(t)
	if report, _ := gatehouse.Run(context.Background(), tests, ""); report.Failed != 1 {
		t.Errorf("Gatehouse's dialect passed an assertion on a map that was not rendered: %+v", report)
	}
}

// TestHapticMatchOrder: haptic compares each pattern's first match, found
// on its own; Gatehouse requires each after the previous one's end.
func TestHapticMatchOrder(t *testing.T) {
	text := "frontend f\n  use_backend a if x\n  use_backend b if y\n"
	// Equal first positions pass in haptic's; Gatehouse's needs the
	// second after the first's end.
	patterns := []string{`use_backend`, `use_backend a`}
	if msg := hapticMatchOrder(patterns, text, "haproxy.cfg"); msg != "" {
		t.Errorf("haptic: %s", msg)
	}
	if msg := matchOrder(patterns, text, "haproxy.cfg"); msg == "" {
		t.Error("Gatehouse's match_order passed two patterns that match at the same place")
	}
	if msg := hapticMatchOrder([]string{`use_backend b`, `use_backend a`}, text, "haproxy.cfg"); !strings.Contains(msg, "out of order") {
		t.Errorf("haptic: patterns out of order passed: %q", msg)
	}
	if msg := hapticMatchOrder([]string{`use_backend a`, `nowhere`}, text, "haproxy.cfg"); !strings.Contains(msg, `"nowhere" (2 of 2) not found`) {
		t.Errorf("haptic: a missing pattern: %q", msg)
	}
}

// TestHapticRenderingErrors: haptic runs a failed rendering's assertions
// against empty outputs and words the error as its whole chain; the test
// fails unless it looks at rendering_error.
func TestHapticRenderingErrors(t *testing.T) {
	chain := "failed to render haproxy.cfg: failed to render template 'haproxy.cfg': " + ghostError
	tests := map[string]Test{
		"negative": {Fixtures: ghostFixtures(t), Assertions: []Assertion{
			{Type: TypeContains, Target: TargetRenderingError, Pattern: `^failed to render haproxy\.cfg: .*service ghost not found`},
			{Type: TypeNotContains, Pattern: `backend`}, // the empty haproxy.cfg
		}},
		"positive": {Fixtures: ghostFixtures(t), Assertions: []Assertion{{Type: TypeNotContains, Pattern: `backend`}}},
	}
	report, err := hapticRunner(t).Run(context.Background(), tests, "")
	if err != nil {
		t.Fatal(err)
	}
	negative, positive := report.Results[0], report.Results[1]
	if !negative.Passed || negative.RenderError != chain {
		t.Errorf("negative test: %+v, want it passing with RenderError %q", negative, chain)
	}
	if positive.Passed || len(positive.Failures) != 0 {
		t.Errorf("a test whose rendering failed passed, or its assertion did not run on the empty rendering: %+v", positive)
	}

	if got := hapticRenderErrorText(&render.RenderError{Template: "maps[host.map]", Err: &render.FailError{Message: "no host"}}); got !=
		"failed to render auxiliary files: failed to render map file host.map: failed to render template 'host.map': no host" {
		t.Errorf("a map's error: %q", got)
	}
}

// TestHapticExtraContextPerTest: a test's extraContext is merged over the
// config's, key by key, for that test only.
func TestHapticExtraContextPerTest(t *testing.T) {
	tests := map[string]Test{
		"tcp":     {Fixtures: demoFixtures(t), ExtraContext: map[string]any{"mode": "tcp"}, Assertions: []Assertion{{Type: TypeContains, Pattern: `mode tcp`}}},
		"default": {Fixtures: demoFixtures(t), Assertions: []Assertion{{Type: TypeContains, Pattern: `mode http`}, {Type: TypeContains, Target: "cert:default.pem", Pattern: `BEGIN CERTIFICATE`}}},
	}
	report, err := hapticRunner(t).Run(context.Background(), tests, "")
	if err != nil || report.Failed != 0 {
		t.Fatalf("%+v %v", report, err)
	}
}
