package configcheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/haproxy"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// TestAddsNoFailure judges a cluster state and the same state with a change,
// with the real haproxy, and asks whether the change fails for no reason
// of its own.
func TestAddsNoFailure(t *testing.T) {
	c, errs := spec.Compile(judgeSpec(), inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	const failedTests = "Validation tests failed: 1/1 tests failed\n\nFailed tests:\n\n- Test: t\n  Assertion failed: contains - no match"
	ok := func(name string) map[string]any { return ingressWithLine(name, "http-request set-header X-"+name+" v") }
	// long is an Ingress whose line haproxy rejects with an alert quoting
	// 1,500 characters: three of them say more than a denial message holds.
	long := func(name string) map[string]any {
		return ingressWithLine(name, "no_such_keyword_"+strings.Repeat("x", 1500))
	}
	inNamespace := func(obj map[string]any, ns string) map[string]any {
		obj["metadata"].(map[string]any)["namespace"] = ns
		return obj
	}
	cases := []struct {
		name             string
		current, changed []map[string]any
		failedTests      string
		want             bool
	}{
		{name: "a render failure the state has: the same",
			current: []map[string]any{ok("web"), ingressWithLine("refused", "")},
			changed: []map[string]any{ok("web"), ingressWithLine("refused", ""), ok("unrelated")}, want: true},
		{name: "a render failure of the change's own, rendered first: not the same",
			current: []map[string]any{ok("web"), ingressWithLine("refused", "")},
			changed: []map[string]any{ok("web"), ingressWithLine("refused", ""), inNamespace(ingressWithLine("refused", ""), "a-team")}},
		{name: "an alert the state has, moved down by a line the change adds: the same",
			current: []map[string]any{ingressWithLine("web", "no_such_keyword here")},
			changed: []map[string]any{ok("a-first"), ingressWithLine("web", "no_such_keyword here")}, want: true},
		{name: "a new alert beside the one the state has: not the same",
			current: []map[string]any{ingressWithLine("web", "no_such_keyword here")},
			changed: []map[string]any{ingressWithLine("web", "no_such_keyword here"), ingressWithLine("zed", "another_bad_keyword")}},
		{name: "a state that renders and passes: the change's failure is its own",
			current: []map[string]any{ok("web")},
			changed: []map[string]any{ok("web"), ingressWithLine("refused", "")}},
		{name: "a render failure where the state fails only haproxy -c: not the same",
			current: []map[string]any{ingressWithLine("web", "no_such_keyword here")},
			changed: []map[string]any{ingressWithLine("web", "no_such_keyword here"), ingressWithLine("refused", "")}},
		{name: "alerts longer together than any message bound, a change adding a good line: the same",
			current: []map[string]any{long("a"), long("b"), long("c")},
			changed: []map[string]any{long("a"), long("b"), long("c"), ok("tenant-b")}, want: true},
		{name: "one more alert exactly like the state's: not the same (alerts are counted)",
			current: []map[string]any{long("a"), long("b"), long("c")},
			changed: []map[string]any{long("a"), long("b"), long("c"), long("d")}},
		{name: "failed embedded tests, a change that renders and passes haproxy -c: the same",
			current: []map[string]any{ok("web")}, changed: []map[string]any{ok("web"), ok("unrelated")},
			failedTests: failedTests, want: true},
	}
	m := &Module{checker: testChecker(t, nil)}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			current := m.judge(ctx, c, judgeData(t, c, tc.current...), tc.failedTests)
			changed := m.judge(ctx, c, judgeData(t, c, tc.changed...), tc.failedTests)
			if changed.Denial == "" || current.Undecided != "" || changed.Undecided != "" {
				t.Fatalf("the case must have a refused change: current %+v, changed %+v", current, changed)
			}
			if got := judge.AddsNoFailure(changed, current); got != tc.want {
				t.Fatalf("addsNoFailure = %v, want %v\nchanged: %s\ncurrent: %s", got, tc.want, changed.Denial, current.Denial)
			}
		})
	}
}

func TestAddsNoFailureNeverMatchesIncompleteAlerts(t *testing.T) {
	alert := haproxy.KeyOf("config : parsing [haproxy.cfg:9] : bad")
	whole := judge.Verdict{Phase: judge.PhaseHAProxy, Denial: "haproxy -c rejects the rendered configuration:\n[ALERT] config : parsing [haproxy.cfg:9] : bad",
		Alerts: haproxy.Alerts{Keys: []haproxy.AlertKey{alert}}}
	if !judge.AddsNoFailure(whole, whole) {
		t.Fatal("the same whole alert list is the same failure")
	}
	for _, cut := range []haproxy.Alerts{{Keys: whole.Alerts.Keys, LeftOut: 1}, {Keys: whole.Alerts.Keys, Truncated: true}} {
		v := whole
		v.Alerts = cut
		if judge.AddsNoFailure(v, v) || judge.AddsNoFailure(v, whole) || judge.AddsNoFailure(whole, v) {
			t.Fatalf("an alert list %+v may hide alerts; it must not count as the same failure", cut)
		}
	}
}

func TestPreexistingWarnings(t *testing.T) {
	key := spec.GatehouseKey(types.NamespacedName{Namespace: "lb-system", Name: "edge"})
	for _, tc := range []struct{ denial, wantFailure string }{
		{"Service 'api' not found (Ingress app/web, host a.example)", "the failure: Service 'api' not found (Ingress app/web, host a.example)"},
		{"haproxy -c rejects the rendered configuration:\n[ALERT] config : parsing [haproxy.cfg:9] : bad\n  line 9: bad", "the failure: [ALERT] config : parsing [haproxy.cfg:9] : bad"},
		{strings.Repeat("x", 1000), "the failure: " + strings.Repeat("x", 200)},
		{haproxy.PolicyRefuses + "\nhaproxy.cfg:4: -f: -f \"/etc/x\" is an absolute path (rule file-inside)", "the failure: haproxy.cfg:4: -f: -f \"/etc/x\" is an absolute path"},
	} {
		w := judge.PreexistingWarnings(key, tc.denial)
		if len(w) != 2 || !strings.Contains(w[0], "HAProxyTemplateConfig lb-system/edge fails without this change too") || !strings.HasPrefix(w[1], tc.wantFailure) {
			t.Fatalf("warnings %q for %q", w, tc.denial)
		}
		for _, line := range w {
			if len(line) > 256 {
				t.Fatalf("warning of %d bytes: the API server's limit is 256", len(line))
			}
		}
	}
}

// TestWayOut judges changes out of a failing state with the real haproxy:
// every DELETE is let out, a fix of the object a render stops at is let
// out although the render then stops at the next failure, and a change
// adding a failure of its own is not.
func TestWayOut(t *testing.T) {
	c, errs := spec.Compile(judgeSpec(), inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	w := c.Watched["ingresses"]
	st := &configState{compiled: c}
	m := &Module{checker: testChecker(t, nil)}
	stores := func(objs ...map[string]any) map[string]render.IndexedStore {
		s, err := render.NewMemoryStore(w.Indexer, objs...)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]render.IndexedStore{"ingresses": s}
	}
	// A printed line break stops the render at the Ingress printing it.
	broken := func(name, value string) map[string]any { return ingressWithLine(name, value+"\nx") }
	fine := func(name string) map[string]any { return ingressWithLine(name, "http-request set-header X-"+name+" v") }
	cases := []struct {
		name    string
		current []map[string]any
		op      render.Operation
		obj     map[string]any
		want    bool
	}{
		{"a DELETE out of a failing state, another failure left", []map[string]any{broken("a", "1"), broken("b", "2")},
			render.OperationDelete, broken("a", "1"), true},
		// Without the backend section "a" opens, b's server line is in the
		// frontend, where haproxy refuses it.
		{"a DELETE out of a passing state is judged as any change",
			[]map[string]any{ingressWithLine("a", "backend be"), ingressWithLine("b", "server s1 127.0.0.1:80")},
			render.OperationDelete, ingressWithLine("a", "backend be"), false},
		{"a fix of the object the render stops at", []map[string]any{broken("a", "1"), broken("b", "2")},
			render.OperationUpdate, fine("a"), true},
		{"an UPDATE breaking the object the render stops at otherwise", []map[string]any{broken("a", "1"), broken("b", "2")},
			render.OperationUpdate, broken("a", "3"), false},
		{"a new object rendered before the failure, failing itself", []map[string]any{broken("b", "2")},
			render.OperationCreate, broken("a", "1"), false},
		{"a new object that renders, in a failing state", []map[string]any{broken("b", "2")},
			render.OperationCreate, fine("a"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			current := stores(tc.current...)
			data, err := judge.Overlaid(current, "ingresses", tc.op, w.Stored(tc.obj))
			if err != nil {
				t.Fatal(err)
			}
			proposed := m.judge(ctx, c, data, "")
			if proposed.Denial == "" {
				t.Fatalf("the case must have a refused change")
			}
			if _, got := m.wayOut(ctx, st, current, "ingresses", tc.op, w.Stored(tc.obj), proposed); got != tc.want {
				t.Fatalf("let out = %v, want %v (the change: %s)", got, tc.want, proposed.Denial)
			}
		})
	}
}
