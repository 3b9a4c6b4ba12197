package redact

import (
	"strconv"
	"strings"
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
	w := WordsOf(admission.Request{}, ing)
	denial := "haproxy -c rejects the rendered configuration:\n" +
		"[ALERT] config : Parsing [haproxy.cfg:40]: backend 'shop_main' has the same name as backend 'shop_main' declared at haproxy.cfg:12.\n" +
		"  line 40: backend shop_main\n" +
		"  line 12: backend shop_main\n" +
		"[ALERT] config : Proxy 'be_tenant-b_billing_8080': unable to find required use_backend: 'be_tenant-a_api_80'.\n" +
		"  line 51: server s1 10.96.4.7:8080 check\n" +
		"  line 52: use_backend be_tenant-b_billing_8080 if { hdr(host) -i billing.b.example }"
	want := "haproxy -c rejects the rendered configuration:\n" +
		"[ALERT] config : Parsing [haproxy.cfg:40]: backend 'shop_main' has the same name as backend 'shop_main' declared at haproxy.cfg:12.\n" +
		"  line 40: backend shop_main\n" +
		"  line 12: backend shop_main\n" +
		"[ALERT] config : Proxy '…': unable to find required use_backend: '…'.\n" +
		"  line 51: server s1 10.96.4.7:8080 …\n" +
		"  line 52: use_backend … if { … -i … }"
	if got := Quoted(denial, w); got != want {
		t.Fatalf("redacted:\n%s\nwant:\n%s", got, want)
	}
	// Guesses in the request (an annotation) change nothing until they
	// name every name of a line: a tenant cannot read another tenant's
	// failure name by name.
	guessed := WordsOf(admission.Request{}, ing, map[string]any{"metadata": map[string]any{"annotations": map[string]any{"guess": "tenant-b 10.96.4.7 pay"}}})
	if got := Quoted(denial, guessed); got != want {
		t.Fatalf("redacted with guesses in the request:\n%s\nwant:\n%s", got, want)
	}
}

// TestRedactForReadsEscapedQuotes: the check policy quotes a line with
// strconv.Quote, so a line that holds quotes has them escaped; the quoted
// line is one name to redact, not pieces between its inner quotes.
func TestRedactForReadsEscapedQuotes(t *testing.T) {
	w := WordsOf(admission.Request{}, map[string]any{"metadata": map[string]any{"namespace": "tenant-a", "name": "web"}})
	line := `server s1 "${SECRET_B}" sni str("billing.b.example")`
	denial := "[POLICY] line 40: " + strconv.Quote(line) + " (rule no-environment)"
	got := Quoted(denial, w)
	for _, secret := range []string{"SECRET_B", "billing"} {
		if strings.Contains(got, secret) {
			t.Fatalf("redacted %q still quotes %q", got, secret)
		}
	}
	if want := `[POLICY] line 40: "…" (rule no-environment)`; got != want {
		t.Fatalf("redacted %q, want %q", got, want)
	}
}
