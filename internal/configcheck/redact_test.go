package configcheck

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func TestRedactForKeepsOnlyTheCallersNames(t *testing.T) {
	ing := map[string]any{
		"metadata": map[string]any{"namespace": "tenant-a", "name": "web",
			"annotations": map[string]any{"haproxy.gatehouse.dev/backend-name": "shop_main"}},
		"spec": map[string]any{"rules": []any{map[string]any{"host": "a.example",
			"http": map[string]any{"paths": []any{map[string]any{"backend": map[string]any{"service": map[string]any{"name": "api", "port": map[string]any{"number": float64(80)}}}}}}}}},
	}
	w := wordsOf(admission.Request{}, ing)
	denial := haproxyRejects + "\n" +
		"[ALERT] config : Parsing [haproxy.cfg:40]: backend 'shop_main' has the same name as backend 'shop_main' declared at haproxy.cfg:12.\n" +
		"  line 40: backend shop_main\n" +
		"  line 12: backend shop_main\n" +
		"[ALERT] config : Proxy 'be_tenant-b_billing_8080': unable to find required use_backend: 'be_tenant-a_api_80'.\n" +
		"  line 51: server s1 10.96.4.7:8080 check\n" +
		"  line 52: use_backend be_tenant-b_billing_8080 if { hdr(host) -i billing.b.example }"
	want := haproxyRejects + "\n" +
		"[ALERT] config : Parsing [haproxy.cfg:40]: backend 'shop_main' has the same name as backend 'shop_main' declared at haproxy.cfg:12.\n" +
		"  line 40: backend shop_main\n" +
		"  line 12: backend shop_main\n" +
		"[ALERT] config : Proxy '…': unable to find required use_backend: 'be_tenant-a_api_80'.\n" +
		"  line 51: server s1 10.96.4.7:8080 …\n" +
		"  line 52: use_backend … if { … -i … }"
	if got := redactFor(denial, w); got != want {
		t.Fatalf("redacted:\n%s\nwant:\n%s", got, want)
	}
}

func TestForCallerRedactsHAProxyDenialsOnly(t *testing.T) {
	req := admission.Request{}
	req.Namespace = "tenant-a"
	req.Object.Raw = []byte(`{"metadata":{"namespace":"tenant-a","name":"web"}}`)
	deny := func(phase string) admission.Response {
		resp := admission.Denied("[ALERT] backend 'be_tenant-b_x' is broken")
		resp.AuditAnnotations = map[string]string{"reason": phase}
		return resp
	}
	if got := forCaller(deny(phaseHAProxy), req).Result.Message; got != "[ALERT] backend '…' is broken" {
		t.Fatalf("haproxy denial: %q", got)
	}
	// A template's own failure message is the config author's words.
	if got := forCaller(deny(phaseRender), req).Result.Message; got != "[ALERT] backend 'be_tenant-b_x' is broken" {
		t.Fatalf("render denial changed: %q", got)
	}
	// So are the warnings of a change admitted over a state whose render
	// fails; those quoting haproxy are redacted.
	admitted := admission.Allowed("").WithWarnings("the failure: Service 'missing' not found", "the failure: [ALERT] backend 'be_tenant-b_x' is broken")
	got := forCaller(admitted, req).Warnings
	if got[0] != "the failure: Service 'missing' not found" || got[1] != "the failure: [ALERT] backend '…' is broken" {
		t.Fatalf("warnings: %q", got)
	}
}
