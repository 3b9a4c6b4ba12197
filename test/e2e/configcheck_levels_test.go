package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// TestConfigcheckAttacksAtEveryLandlockLevel plays a config author, a user
// who may edit one namespace, through kube-apiserver, against replicas
// confined as the nodes platforms run would confine them (Landlock ABI 0:
// the LSM not enabled, as on many managed nodes; 1: Ubuntu 22.04; 4: Ubuntu
// 24.04; simulated with sandbox.LimitLandlockABI on this kernel, whose ABI 6
// the rest of the suite uses). The platform runs configcheck with
// --configcheck-confinement=bestEffort, the one way it starts without
// Landlock, and allows Lua where Landlock is (configcheck refuses to start
// with Lua allowed and no Landlock: module_test.go). At every level the module serves (a plain config is admitted,
// its checks run), the gauge says the level in force, a config naming
// /etc/passwd is refused by the check policy without a byte of it shown,
// and a config whose Lua reads /etc/passwd, writes outside its directory
// and starts a shell is refused: without Landlock by the check policy
// before anything runs, at ABI 1 and 4 after its Lua ran with every
// attempt refused.
func TestConfigcheckAttacksAtEveryLandlockLevel(t *testing.T) {
	e := newAuthzEnv(t)
	ctx := context.Background()
	marker := filepath.Join(os.TempDir(), "gatehouse-e2e-level-"+randSuffix())
	t.Cleanup(func() { _ = os.Remove(marker); _ = os.Remove(marker + "-exec") })
	data, err := os.ReadFile("../../internal/configcheck/testdata/lua-attack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	attack := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if err := yaml.UnmarshalStrict([]byte(strings.ReplaceAll(string(data), "MARKER", marker)), attack); err != nil {
		t.Fatal(err)
	}
	const fileTemplate = "defaults\n  mode http\n  timeout client 5s\n  timeout server 5s\n  timeout connect 5s\n" +
		"frontend f\n  bind :8080\n  errorfile 400 /etc/passwd\n  http-request return status 200\n"
	tests := attack.Spec.ValidationTests

	for _, level := range []int{0, 1, 4} {
		t.Run(fmt.Sprintf("landlock-abi-%d", level), func(t *testing.T) {
			// Registered before Gatehouse starts, so undone after it
			// stopped.
			sandbox.LimitLandlockABI(level)
			t.Cleanup(func() { sandbox.LimitLandlockABI(-1) })
			startGatehouse(t, app.Options{
				Catalogue: []module.Module{configcheck.New(configcheck.Options{
					Confinement: configcheck.ConfinementBestEffort, AllowLua: level > 0})},
				Modules: map[string]app.ModuleConfig{"configcheck": {Enabled: true}},
			})
			e.waitServed(t)
			if got := labelledGaugeValue("gatehouse_configcheck_confinement", "layer", "landlock_abi"); got != float64(level) {
				t.Errorf("gatehouse_configcheck_confinement{layer=landlock_abi} = %v, want %d", got, level)
			}

			plain := e.config(fmt.Sprintf("plain-%d", level), nil)
			plain.Spec.ValidationTests = tests
			if err := e.user.Create(ctx, plain, client.DryRunAll); err != nil {
				t.Errorf("a plain config with a test running haproxy -c: %v", err)
			}

			reads := e.config(fmt.Sprintf("reads-%d", level), nil)
			reads.Spec.HAProxyConfig.Template = fileTemplate
			err := e.user.Create(ctx, reads, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), "errorfile") || !strings.Contains(err.Error(), "/etc/passwd") {
				t.Errorf("a config naming /etc/passwd: %v; want the policy's refusal naming the line", err)
			}
			if err != nil && strings.Contains(err.Error(), "root:") {
				t.Errorf("the refusal shows /etc/passwd: %v", err)
			}

			withLua := e.config(fmt.Sprintf("lua-%d", level), nil)
			withLua.Spec.HAProxyConfig = attack.Spec.HAProxyConfig
			withLua.Spec.Files = attack.Spec.Files
			withLua.Spec.ValidationTests = tests
			err = e.user.Create(ctx, withLua, client.DryRunAll)
			switch {
			case err == nil:
				t.Errorf("a config whose Lua attacks was admitted")
			case strings.Contains(err.Error(), "READ:") || strings.Contains(err.Error(), "root:") || strings.Contains(err.Error(), "ENVIRON:"):
				t.Errorf("the config's Lua read /etc/passwd: %v", err)
			case level == 0 && !strings.Contains(err.Error(), "lua-load"):
				t.Errorf("Lua without Landlock: %v; want the check policy's refusal naming lua-load", err)
			case level > 0 && !strings.Contains(err.Error(), "LUA-RAN"):
				t.Errorf("Lua at Landlock ABI %d: %v; want the Lua's own error (it ran, confined)", level, err)
			}
			for _, path := range []string{marker, marker + "-exec"} {
				if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the config's Lua wrote outside its directory or ran a process: %s exists (%v)", path, err)
				}
			}
		})
	}
}

// labelledGaugeValue is the value of the gauge name whose label has value
// in this process, -1 if there is none.
func labelledGaugeValue(name, label, value string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
