package configcheck

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/redact"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

func TestForCallerRedactsWhatTheRenderingRead(t *testing.T) {
	req := admission.Request{}
	req.Namespace = "tenant-a"
	req.Object.Raw = []byte(`{"metadata":{"namespace":"tenant-a","name":"web"},"spec":{"rules":[{"host":"a.example"}]}}`)
	deny := func(phase, message string) admission.Response {
		resp := admission.Denied(message)
		resp.AuditAnnotations = map[string]string{"reason": phase}
		return resp
	}
	// What the rendering read: tenant A's Ingress and tenant B's, whose
	// words A did not send; the config's own words are its author's.
	indexer, err := render.NewIndexer([]string{"metadata.namespace", "metadata.name"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := render.NewMemoryStore(indexer,
		map[string]any{"kind": "Ingress", "metadata": map[string]any{"namespace": "tenant-a", "name": "web"}, "spec": map[string]any{"rules": []any{map[string]any{"host": "a.example"}}}},
		map[string]any{"kind": "Ingress", "metadata": map[string]any{"namespace": "tenant-a", "name": "shopfront"}, "spec": map[string]any{"rules": []any{map[string]any{"host": "shop.a-only.example"}}}},
		map[string]any{"kind": "Ingress", "metadata": map[string]any{"namespace": "tenant-b", "name": "billing"},
			"spec": map[string]any{"rules": []any{map[string]any{"host": "pay.b.example", "http": map[string]any{"paths": []any{map[string]any{"backend": map[string]any{"service": map[string]any{"name": "ledger"}}}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	judged := map[string]render.IndexedStore{"ingresses": store}
	c := &spec.Compiled{Words: redact.Words{}}
	c.Words.AddWordsOf(`{{ fail (printf "Service '%s' not found (Ingress %s/%s, host %s)" ...) }}`)

	if got := forCaller(deny(judge.PhaseHAProxy, "[ALERT] backend 'be_tenant-b_x' is broken"), req, c, judged).Result.Message; got != "[ALERT] backend '…' is broken" {
		t.Fatalf("haproxy denial: %q", got)
	}
	// A render failure about B's objects keeps the template's words and
	// A's, and loses B's.
	got := forCaller(deny(judge.PhaseRender, "Service 'ledger' not found (Ingress tenant-b/billing, host pay.b.example)"), req, c, judged).Result.Message
	want := "Service '…' not found (Ingress …/…, host ….b.…)"
	if got != want {
		t.Fatalf("render denial about another tenant's objects: %q, want %q", got, want)
	}
	// A tenant who puts guesses of B's words in its request learns
	// nothing from them: the line goes whole while one word is B's alone.
	guessing := req
	guessing.Object.Raw = []byte(`{"metadata":{"namespace":"tenant-a","name":"web","annotations":{"guess":"ledger tenant-b billing"}},"spec":{"rules":[{"host":"a.example"}]}}`)
	if got := forCaller(deny(judge.PhaseRender, "Service 'ledger' not found (Ingress tenant-b/billing, host pay.b.example)"), guessing, c, judged).Result.Message; got != want {
		t.Fatalf("render denial with guesses in the request: %q, want %q", got, want)
	}
	// About A's own, it is quoted whole.
	own := "Service 'api' not found (Ingress tenant-a/web, host a.example)"
	if got := forCaller(deny(judge.PhaseRender, own), req, c, judged).Result.Message; got != own {
		t.Fatalf("render denial about the caller's objects changed: %q", got)
	}
	// About another object of A's namespace (a Service's DELETE refused
	// for an Ingress beside it), too: A reads its own namespace.
	beside := "Service 'api' not found (Ingress tenant-a/shopfront, host shop.a-only.example)"
	if got := forCaller(deny(judge.PhaseRender, beside), req, c, judged).Result.Message; got != beside {
		t.Fatalf("render denial about the caller's namespace changed: %q", got)
	}
	// The warnings of a change admitted over a failing state, likewise;
	// the first, Gatehouse's own, stays.
	admitted := admission.Allowed("").WithWarnings("HAProxyTemplateConfig lb/edge fails without this change too", judge.FailureWarningPrefix+"Service 'ledger' not found", judge.FailureWarningPrefix+"[ALERT] backend 'be_tenant-b_x' is broken")
	warnings := forCaller(admitted, req, c, judged).Warnings
	if warnings[0] != "HAProxyTemplateConfig lb/edge fails without this change too" || warnings[1] != judge.FailureWarningPrefix+"Service '…' not found" || warnings[2] != judge.FailureWarningPrefix+"[ALERT] backend '…' is broken" {
		t.Fatalf("warnings: %q", warnings)
	}
}
