package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

type named string

func (n named) Name() string                           { return string(n) }
func (named) AddToScheme(*runtime.Scheme) error        { return nil }
func (named) Webhooks() []module.Webhook               { return nil }
func (named) Setup(context.Context, module.Host) error { return nil }

func TestModuleSelection(t *testing.T) {
	catalogue := []module.Module{named("pvsafe"), named("nodegroup")}
	enabled, modes, err := resolveModules(catalogue, map[string]ModuleConfig{
		"pvsafe":    {Enabled: true, Enforcement: module.Warn},
		"nodegroup": {Enabled: false},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(enabled) != 1 || enabled[0].Name() != "pvsafe" || modes["pvsafe"] != module.Warn {
		t.Fatalf("enabled %v modes %v", enabled, modes)
	}
	_, _, err = resolveModules(catalogue, map[string]ModuleConfig{"pvsafe": {Enabled: true}, "pvsave": {Enabled: true}})
	if err == nil || !strings.Contains(err.Error(), "unknown module(s) pvsave; available: nodegroup, pvsafe") {
		t.Fatalf("typo not reported: %v", err)
	}
	_, _, err = resolveModules(catalogue, map[string]ModuleConfig{"pvsafe": {Enabled: true, Enforcement: "audit"}})
	if err == nil || !strings.Contains(err.Error(), `enforcement mode "audit"`) {
		t.Fatalf("bad mode not reported: %v", err)
	}
}

func TestEnforcementFlag(t *testing.T) {
	got, err := ParseEnforcementList("pvsafe=warn, nodegroup=enforce")
	if err != nil || got["pvsafe"] != module.Warn || got["nodegroup"] != module.Enforce {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"pvsafe", "pvsafe=deny"} {
		if _, err := ParseEnforcementList(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

func TestConfigFileRefusesUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	_ = os.WriteFile(good, []byte("modules:\n  pvsafe:\n    enabled: true\n    enforcement: warn\n"), 0o600)
	cfg, err := LoadFile(good)
	if err != nil || !cfg.Modules["pvsafe"].Enabled || cfg.Modules["pvsafe"].Enforcement != module.Warn {
		t.Fatalf("%+v %v", cfg, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte("modules:\n  pvsafe:\n    enable: true\n"), 0o600)
	if _, err := LoadFile(bad); err == nil || !strings.Contains(err.Error(), "enable") {
		t.Fatalf("typo accepted: %v", err)
	}
}

// Metrics leave the pod only when told: the default address is loopback.
func TestMetricsBindToLoopbackByDefault(t *testing.T) {
	var o Options
	o.SetDefaults()
	if o.MetricsAddr != "127.0.0.1:8080" {
		t.Fatalf("default metrics address %q, want 127.0.0.1:8080", o.MetricsAddr)
	}
}
