package configcheck

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/haproxy"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

func TestCheckStructure(t *testing.T) {
	const required = "metadata.name or metadata.generateName is required"
	cases := []struct {
		name    string
		obj     string // "" for a nil object
		wantErr string
		// wantName is metadata.name after the check ("<absent>" when the
		// key is gone).
		wantName string
	}{
		{"no object", "", "failed to parse object: the request carries no object", ""},
		{"no metadata", `{"kind":"Ingress"}`, required, ""},
		{"metadata not an object", `{"metadata":"web"}`, required, ""},
		{"empty metadata", `{"metadata":{}}`, required, ""},
		{"empty name, no generateName", `{"metadata":{"name":""}}`, required, ""},
		{"empty name and generateName", `{"metadata":{"name":"","generateName":""}}`, required, ""},
		{"name not a string", `{"metadata":{"name":5}}`, required, ""},
		{"name", `{"metadata":{"name":"web"}}`, "", "web"},
		{"generateName alone", `{"metadata":{"generateName":"web-"}}`, "", "<absent>"},
		{"empty name dropped for generateName", `{"metadata":{"name":"","generateName":"web-"}}`, "", "<absent>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var obj map[string]any
			if tc.obj != "" {
				obj = object(t, tc.obj)
			}
			err := judge.CheckStructure(obj)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want exactly %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			meta := obj["metadata"].(map[string]any)
			name, ok := meta["name"]
			if !ok {
				name = "<absent>"
			}
			if name != tc.wantName {
				t.Fatalf("metadata.name %v, want %v", name, tc.wantName)
			}
		})
	}
}

// proposalSpec watches Ingresses of class haproxy and IngressClasses of
// namespaces labelled team=a (cluster-scoped: the namespace selector does
// not apply).
func proposalSpec() *gatehousev1alpha1.HAProxyTemplateConfigSpec {
	return &gatehousev1alpha1.HAProxyTemplateConfigSpec{
		WatchedResources: map[string]gatehousev1alpha1.WatchedResource{
			"ingresses": {APIVersion: "networking.k8s.io/v1", Resources: "ingresses",
				FieldSelector: "spec.ingressClassName=haproxy", EnableValidationWebhook: true},
			"classes": {APIVersion: "networking.k8s.io/v1", Resources: "ingressclasses",
				LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"lb": "edge"}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
		},
		HAProxyConfig: gatehousev1alpha1.Template{Template: "global\n"},
	}
}

func TestProposal(t *testing.T) {
	c, errs := spec.Compile(proposalSpec(), inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	key := spec.GatehouseKey(types.NamespacedName{Namespace: "lb-system", Name: "edge"})
	// A Module without a host or namespace cache: namespaceLabels would
	// panic, and must not be called for these watched resources.
	m := &Module{}
	st := &configState{key: key, scoped: map[string]bool{"ingresses": false, "classes": true}}
	st.setAccess(authz.HeldEverywhere("admin", "ingresses", "classes"))

	ing := func(name, class string) string {
		return `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"` + name +
			`","namespace":"app"},"spec":{"ingressClassName":"` + class + `"}}`
	}
	const (
		generated = `{"metadata":{"generateName":"web-","namespace":"app"},"spec":{"ingressClassName":"haproxy"}}`
		noMeta    = `{"spec":{"ingressClassName":"haproxy"}}`
		edgeClass = `{"metadata":{"name":"haproxy","labels":{"lb":"edge"}}}`
		bareClass = `{"metadata":{"name":"nginx"}}`
	)
	const notSelected = "not selected by lb-system/edge's watched resource ingresses"
	cases := []struct {
		name     string
		watched  string
		op       admissionv1.Operation
		obj, old string
		wantOp   render.Operation
		// wantName and wantClass identify the object returned with an
		// operation.
		wantName, wantClass string
		wantReason          string
		wantErr             string // a prefix of the error
	}{
		{name: "create selected", watched: "ingresses", op: admissionv1.Create, obj: ing("web", "haproxy"),
			wantOp: render.OperationCreate, wantName: "web", wantClass: "haproxy"},
		{name: "create of another class", watched: "ingresses", op: admissionv1.Create, obj: ing("web", "nginx"),
			wantReason: notSelected},
		{name: "update selected", watched: "ingresses", op: admissionv1.Update, obj: ing("web", "haproxy"), old: ing("web", "haproxy"),
			wantOp: render.OperationUpdate, wantName: "web", wantClass: "haproxy"},
		{name: "update into the class", watched: "ingresses", op: admissionv1.Update, obj: ing("web", "haproxy"), old: ing("web", "nginx"),
			wantOp: render.OperationUpdate, wantName: "web", wantClass: "haproxy"},
		{name: "update out of the class deletes the old object", watched: "ingresses", op: admissionv1.Update,
			obj: ing("web", "nginx"), old: ing("web", "haproxy"),
			wantOp: render.OperationDelete, wantName: "web", wantClass: "haproxy"},
		{name: "update never selected", watched: "ingresses", op: admissionv1.Update, obj: ing("web", "nginx"), old: ing("web", "traefik"),
			wantReason: notSelected},
		{name: "delete selected", watched: "ingresses", op: admissionv1.Delete, old: ing("web", "haproxy"),
			wantOp: render.OperationDelete, wantName: "web", wantClass: "haproxy"},
		{name: "delete of another class", watched: "ingresses", op: admissionv1.Delete, old: ing("web", "nginx"),
			wantReason: notSelected},
		{name: "delete without oldObject", watched: "ingresses", op: admissionv1.Delete,
			wantErr: "a DELETE request without oldObject cannot be validated"},
		{name: "connect", watched: "ingresses", op: admissionv1.Connect, obj: ing("web", "haproxy"),
			wantReason: "operation CONNECT is not validated"},
		{name: "malformed object", watched: "ingresses", op: admissionv1.Create, obj: `{"metadata":`,
			wantErr: "failed to parse object"},
		{name: "object not an object", watched: "ingresses", op: admissionv1.Create, obj: `["web"]`,
			wantErr: "failed to parse object"},
		{name: "malformed old object", watched: "ingresses", op: admissionv1.Update, obj: ing("web", "haproxy"), old: `{"metadata"`,
			wantErr: "failed to parse old object"},
		{name: "create without object", watched: "ingresses", op: admissionv1.Create,
			wantErr: "failed to parse object"},
		{name: "create without metadata", watched: "ingresses", op: admissionv1.Create, obj: noMeta,
			wantErr: "metadata.name or metadata.generateName is required"},
		{name: "generateName judged under its prefix", watched: "ingresses", op: admissionv1.Create, obj: generated,
			wantOp: render.OperationCreate, wantName: "web-", wantClass: "haproxy"},
		{name: "cluster-scoped selected by label, namespace selector ignored", watched: "classes", op: admissionv1.Create, obj: edgeClass,
			wantOp: render.OperationCreate, wantName: "haproxy"},
		{name: "cluster-scoped not selected by label", watched: "classes", op: admissionv1.Create, obj: bareClass,
			wantReason: "not selected by lb-system/edge's watched resource classes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "u", Operation: tc.op, Namespace: "app", Name: "web",
			}}
			if tc.obj != "" {
				req.Object = runtime.RawExtension{Raw: []byte(tc.obj)}
			}
			if tc.old != "" {
				req.OldObject = runtime.RawExtension{Raw: []byte(tc.old)}
			}
			op, obj, reason, err := m.proposal(st, c.Watched[tc.watched], req)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one starting with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if op != tc.wantOp {
				t.Fatalf("operation %q, want %q (reason %q)", op, tc.wantOp, reason)
			}
			if tc.wantOp == "" {
				if reason != tc.wantReason || obj != nil {
					t.Fatalf("reason %q object %v, want reason %q and no object", reason, obj, tc.wantReason)
				}
				return
			}
			meta, _ := obj["metadata"].(map[string]any)
			spec, _ := obj["spec"].(map[string]any)
			if meta["name"] != tc.wantName {
				t.Errorf("object name %v, want %s", meta["name"], tc.wantName)
			}
			if tc.wantClass != "" && spec["ingressClassName"] != tc.wantClass {
				t.Errorf("object class %v, want %s", spec["ingressClassName"], tc.wantClass)
			}
		})
	}
}

// judgeSpec renders one frontend line per Ingress from its spec.line, and
// fails the rendering for an Ingress named "refused". Its bind port comes
// from extraContext.
func judgeSpec() *gatehousev1alpha1.HAProxyTemplateConfigSpec {
	return &gatehousev1alpha1.HAProxyTemplateConfigSpec{
		WatchedResources: map[string]gatehousev1alpha1.WatchedResource{
			"ingresses": {APIVersion: "networking.k8s.io/v1", Resources: "ingresses", EnableValidationWebhook: true},
		},
		HAProxyConfig: gatehousev1alpha1.Template{Template: `global
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend fe_http
  bind :{{ .extraContext.port }}
{{- range $ing := .resources.ingresses.List }}
{{- if eq $ing.metadata.name "refused" }}{{ fail (printf "Ingress %s/%s is refused by the template" $ing.metadata.namespace $ing.metadata.name) }}{{ end }}
  {{ $ing.spec.line }}
{{- end }}
  http-request return status 404
`},
		TemplatingSettings: gatehousev1alpha1.TemplatingSettings{ExtraContext: rawJSON(`{"port": 8080}`)},
	}
}

func ingressWithLine(name, line string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"name": name, "namespace": "app"},
		"spec":     map[string]any{"line": line},
	}
}

// testChecker is the real haproxy behind the policy, or runner when set.
func testChecker(t *testing.T, runner haproxy.Runner) *haproxy.Checker {
	t.Helper()
	if runner == nil {
		real, err := haproxy.NewRunner(haproxy.RunnerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		runner = real
	}
	checker, err := haproxy.New(haproxy.Options{Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	return checker
}

// hangingRunner is a haproxy that never answers before its context ends.
type hangingRunner struct{}

func (hangingRunner) Run(ctx context.Context, _ render.Output) (haproxy.RunResult, error) {
	<-ctx.Done()
	return haproxy.RunResult{}, ctx.Err()
}

func judgeData(t *testing.T, c *spec.Compiled, objs ...map[string]any) render.Data {
	t.Helper()
	store, err := render.NewMemoryStore(c.Watched["ingresses"].Indexer, objs...)
	if err != nil {
		t.Fatal(err)
	}
	return render.Data{Resources: map[string]render.Store{"ingresses": store}}
}

func TestJudge(t *testing.T) {
	c, errs := spec.Compile(judgeSpec(), inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	const failedTests = "Validation tests failed: 1/1 tests failed\n\nFailed tests:\n\n- Test: t\n  Assertion failed: contains - no match"
	cases := []struct {
		name        string
		objs        []map[string]any
		failedTests string
		expired     bool
		wantDenial  string // exact; "" to admit
		wantPrefix  string // a prefix of the denial instead
		wantContent string // also contained in the denial
		wantPhase   string
		wantUndec   bool
	}{
		{name: "admitted", objs: []map[string]any{ingressWithLine("web", "http-request set-header X-A a")}},
		{name: "empty store admitted"},
		{name: "fail() is the denial", objs: []map[string]any{ingressWithLine("web", "http-request set-header X-A a"), ingressWithLine("refused", "")},
			wantDenial: "Ingress app/refused is refused by the template", wantPhase: judge.PhaseRender},
		{name: "haproxy rejects", objs: []map[string]any{ingressWithLine("web", "no_such_keyword here")},
			wantPrefix: "haproxy -c rejects the rendered configuration:\n", wantContent: "[ALERT]", wantPhase: judge.PhaseHAProxy},
		{name: "failed tests deny a valid rendering", objs: []map[string]any{ingressWithLine("web", "http-request set-header X-B b")},
			failedTests: failedTests, wantDenial: failedTests, wantPhase: judge.PhaseTests},
		{name: "haproxy's denial comes before the tests'", objs: []map[string]any{ingressWithLine("web", "no_such_keyword there")},
			failedTests: failedTests, wantPrefix: "haproxy -c rejects the rendered configuration:\n", wantPhase: judge.PhaseHAProxy},
		{name: "expired context is undecided", objs: []map[string]any{ingressWithLine("web", "http-request set-header X-C c")},
			expired: true, wantUndec: true},
		{name: "expired context is undecided, not a fail() denial", objs: []map[string]any{ingressWithLine("refused", "")},
			expired: true, wantUndec: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &Module{checker: testChecker(t, nil)}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if tc.expired {
				var expire context.CancelFunc
				ctx, expire = context.WithDeadline(ctx, time.Now().Add(-time.Second))
				defer expire()
			}
			v := m.judge(ctx, c, judgeData(t, c, tc.objs...), tc.failedTests)
			if tc.wantUndec {
				if v.Undecided == "" || v.Denial != "" {
					t.Fatalf("verdict %+v, want undecided and no denial", v)
				}
				return
			}
			if v.Undecided != "" {
				t.Fatalf("undecided: %s", v.Undecided)
			}
			switch {
			case tc.wantPrefix != "":
				if !strings.HasPrefix(v.Denial, tc.wantPrefix) {
					t.Fatalf("denial %q, want one starting with %q", v.Denial, tc.wantPrefix)
				}
			case v.Denial != tc.wantDenial:
				t.Fatalf("denial %q, want %q", v.Denial, tc.wantDenial)
			}
			if !strings.Contains(v.Denial, tc.wantContent) {
				t.Fatalf("denial %q does not contain %q", v.Denial, tc.wantContent)
			}
			if v.Phase != tc.wantPhase {
				t.Fatalf("phase %q, want %q", v.Phase, tc.wantPhase)
			}
			if v.Cached {
				t.Fatalf("first verdict of a new checker is cached")
			}
		})
	}
}

func TestJudgeSecondVerdictIsCached(t *testing.T) {
	c, errs := spec.Compile(judgeSpec(), inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	for _, tc := range []struct {
		name       string
		line       string
		wantDenial bool
	}{
		{"valid", "http-request set-header X-D d", false},
		{"invalid", "no_such_keyword cached", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Module{checker: testChecker(t, nil)}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var verdicts []judge.Verdict
			for range 2 {
				// New stores each time: the cache is keyed by the
				// rendering, not by the data's identity.
				verdicts = append(verdicts, m.judge(ctx, c, judgeData(t, c, ingressWithLine("web", tc.line)), ""))
			}
			first, second := verdicts[0], verdicts[1]
			if first.Undecided != "" || second.Undecided != "" {
				t.Fatalf("undecided: %+v %+v", first, second)
			}
			if (first.Denial != "") != tc.wantDenial || first.Denial != second.Denial || first.Phase != second.Phase {
				t.Fatalf("verdicts differ or are wrong: %+v then %+v", first, second)
			}
			if first.Cached || !second.Cached {
				t.Fatalf("cached %v then %v, want false then true", first.Cached, second.Cached)
			}
		})
	}
}

func TestJudgeSlowHAProxyIsUndecidedAtTheDeadline(t *testing.T) {
	c, errs := spec.Compile(judgeSpec(), inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	m := &Module{checker: testChecker(t, hangingRunner{})}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	v := m.judge(ctx, c, judgeData(t, c, ingressWithLine("web", "http-request set-header X-E e")), "")
	// A bound against a hang, not a performance assertion.
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("judge took %v with a 300ms deadline", elapsed)
	}
	if v.Undecided == "" || v.Denial != "" {
		t.Fatalf("verdict %+v, want undecided and no denial", v)
	}
}

func TestBounded(t *testing.T) {
	const more = "... (cut)"
	fixed := []struct {
		s    string
		n    int
		want string
	}{
		{"", 10, ""},
		{"short", 10, "short"},
		{"exactly-10", 10, "exactly-10"},
		{strings.Repeat("a", 100), 20, strings.Repeat("a", 11) + more},
		{strings.Repeat("a", 100), 9, more},
		// Trailing blanks before the cut are dropped.
		{"abc   \n defghijklmnop", 15, "abc" + more},
		// é is two bytes: the cut at byte 11 would split the sixth.
		{strings.Repeat("é", 50), 20, strings.Repeat("é", 5) + more},
	}
	for _, tc := range fixed {
		if got := guard.Bounded(tc.s, tc.n); got != tc.want {
			t.Errorf("bounded(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
	for _, s := range []string{
		strings.Repeat("é", 60), strings.Repeat("€", 40), strings.Repeat("𝄞", 30),
		"ascii then " + strings.Repeat("日本語", 20), strings.Repeat("a€𝄞é", 15),
	} {
		for n := len(more); n < len(s)+2; n++ {
			got := guard.Bounded(s, n)
			if len(s) <= n {
				if got != s {
					t.Fatalf("bounded(%q, %d) changed a string that fits: %q", s, n, got)
				}
				continue
			}
			kept, ok := strings.CutSuffix(got, more)
			if !ok || len(got) > n || !utf8.ValidString(got) || !strings.HasPrefix(s, kept) || len(got) < n-utf8.UTFMax+1 {
				t.Fatalf("bounded(%q, %d) = %q (%d bytes)", s, n, got, len(got))
			}
		}
	}
}

func TestSpecChanged(t *testing.T) {
	cfg := func(template string, labels map[string]string) *gatehousev1alpha1.HAProxyTemplateConfig {
		c := &gatehousev1alpha1.HAProxyTemplateConfig{ObjectMeta: metav1.ObjectMeta{Name: "edge", Labels: labels, Finalizers: nil}}
		c.Spec = *minimalSpec()
		c.Spec.HAProxyConfig.Template = template
		return c
	}
	request := func(op admissionv1.Operation, old *gatehousev1alpha1.HAProxyTemplateConfig) admission.Request {
		req := admission.Request{}
		req.Operation = op
		if old != nil {
			raw, err := json.Marshal(old)
			if err != nil {
				t.Fatal(err)
			}
			req.OldObject = runtime.RawExtension{Raw: raw}
		}
		return req
	}
	cases := []struct {
		name string
		req  admission.Request
		want bool
	}{
		{"a CREATE writes the spec", request(admissionv1.Create, nil), true},
		{"an UPDATE of the template", request(admissionv1.Update, cfg("global\n  maxconn 10\n", nil)), true},
		// The garbage collector, the namespace controller, a label
		// change: nothing the config reaches changes.
		{"an UPDATE of the metadata only", request(admissionv1.Update, cfg("global\n", map[string]string{"team": "a"})), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := specChanged(tc.req, spec.GatehouseConfig{HAProxyTemplateConfig: cfg("global\n", nil)})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("specChanged = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := specChanged(admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update}}, spec.GatehouseConfig{HAProxyTemplateConfig: cfg("global\n", nil)}); err == nil {
		t.Fatal("an UPDATE without its old object was read as unchanged")
	}
}
