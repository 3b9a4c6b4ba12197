package webhookconfig

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// TestWithdrawDropsAModulesWebhooksButNotItsConversion: a withdrawn
// module's admission webhooks and run-time webhooks leave the desired
// configurations; another module's stay; a conversion stanza is kept as it
// was (strategy None would relabel stored objects without converting them).
func TestWithdrawDropsAModulesWebhooksButNotItsConversion(t *testing.T) {
	r := NewReconciler(ReconcilerOptions{Static: hooks(), Target: func() Target { return Target{URL: "https://gh.example:9443"} }})
	dynamic := hooks()[0]
	dynamic.Name, dynamic.Path = "run.test", module.RuntimePath("gone")+"x"
	r.SetDynamic("gone", []module.Webhook{dynamic})
	before := r.Desired()
	if len(before.Validating.Webhooks) != 2 || len(before.Mutating.Webhooks) != 1 || before.Conversions["things.example.com"] == nil {
		t.Fatalf("before: %d validating, %d mutating, conversions %v", len(before.Validating.Webhooks), len(before.Mutating.Webhooks), before.Conversions)
	}
	r.Withdraw("gone", []string{"/v", "/c"})
	after := r.Desired()
	if len(after.Validating.Webhooks) != 0 {
		t.Fatalf("validating webhooks after the withdrawal: %v", after.Validating.Webhooks)
	}
	if len(after.Mutating.Webhooks) != 1 || after.Mutating.Webhooks[0].Name != "m.test" {
		t.Fatalf("another module's mutating webhook: %v", after.Mutating.Webhooks)
	}
	if after.Conversions["things.example.com"] == nil {
		t.Fatal("the conversion stanza was dropped")
	}
	// Readiness waits for what is written, not for what was withdrawn.
	if got := r.staticLocked(); len(got) != 3 {
		t.Fatalf("static webhooks still written: %d, want 3 (empty.test, m.test, c.test)", len(got))
	}
}
