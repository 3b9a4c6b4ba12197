package configcheck

import (
	"strings"
	"testing"
)

// TestOfflineAsksAreConfigchecksOwn: a suite's configChecks entry asks
// configcheck for allowLua alone; any other key, or an allowLua that is no
// boolean, is refused naming it, so that a misspelt ask is never silently
// dropped.
func TestOfflineAsksAreConfigchecksOwn(t *testing.T) {
	if allow, err := offlineAsks(map[string]any{"allowLua": true}); err != nil || !allow {
		t.Fatalf("allowLua: true read as %v, %v", allow, err)
	}
	if allow, err := offlineAsks(nil); err != nil || allow {
		t.Fatalf("no asks read as %v, %v", allow, err)
	}
	for wantText, asks := range map[string]map[string]any{
		`not "allowlua"`:     {"allowlua": true},
		"want true or false": {"allowLua": "yes"},
	} {
		if _, err := offlineAsks(asks); err == nil || !strings.Contains(err.Error(), wantText) {
			t.Errorf("asks %v: error %v, want one saying %s", asks, err, wantText)
		}
	}
}
