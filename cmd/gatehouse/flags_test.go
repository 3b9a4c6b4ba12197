package main

import (
	"encoding/json"
	"flag"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// TestServerFlagDefaultsAreTheOptionsDefaults: a flag's default is what
// app.Options takes when the flag is not given (SetDefaults, the server's
// included), so that --help never shows one default while the server runs
// with another. Before, main.go wrote the defaults a second time: the
// leader election durations (15s, 10s, 2s) and the pprof address ("0")
// were the flags' alone, the Options' zero values meaning whatever
// controller-runtime chose.
func TestServerFlagDefaultsAreTheOptionsDefaults(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	fs := flag.NewFlagSet("gatehouse", flag.ContinueOnError)
	serveFlags(fs, catalogue.All())
	var want app.Options
	want.SetDefaults()
	for name, def := range map[string]string{
		"webhook-bind-address":        want.Server.Addr,
		"tls-min-version":             server.TLSVersionName(want.Server.TLSMinVersion),
		"enable-http2":                strconv.FormatBool(want.Server.EnableHTTP2),
		"cert-dir":                    want.CertDir,
		"metrics-bind-address":        want.MetricsAddr,
		"metrics-secure":              strconv.FormatBool(want.MetricsSecure),
		"namespace":                   want.Namespace,
		"pprof-bind-address":          want.PprofAddr,
		"shutdown-delay":              want.Server.ShutdownDelay.String(),
		"in-flight-wait":              want.Server.InFlightWait.String(),
		"leader-elect":                strconv.FormatBool(want.LeaderElection),
		"leader-elect-lease-duration": want.LeaseDuration.String(),
		"leader-elect-renew-deadline": want.RenewDeadline.String(),
		"leader-elect-retry-period":   want.RetryPeriod.String(),
		"instance-name":               want.Instance,
	} {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("no flag --%s", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s defaults to %q, the options to %q", name, f.DefValue, def)
		}
	}
	// The budgets are quantities: their usage names the default.
	for name, bytes := range map[string]int64{
		"max-in-flight-bytes":          want.Server.MaxInFlightBytes,
		"max-in-flight-decision-bytes": want.Server.MaxInFlightDecisionBytes,
	} {
		if f := fs.Lookup(name); f == nil || !strings.Contains(f.Usage, "Default "+quantity(bytes)) {
			t.Errorf("--%s does not name the options' default %s", name, quantity(bytes))
		}
	}
}

// TestModuleFlagsAreAliasesOfTheSettings: the flags the modules declare
// (module.Configurable) are the server's flags as they always were, and
// each sets its module's setting, as modules.<name>.settings does. The
// names are this test's alone: cmd names no module.
func TestModuleFlagsAreAliasesOfTheSettings(t *testing.T) {
	mods := catalogue.All()
	fs := flag.NewFlagSet("gatehouse", flag.ContinueOnError)
	_, hidden := serveFlags(fs, mods)
	if !slices.Equal(hidden, []string{"configcheck-simulate-no-landlock"}) {
		t.Errorf("hidden flags %v, want configcheck-simulate-no-landlock alone", hidden)
	}
	for _, name := range []string{"sandbox-landlock-abi", "configcheck-simulate-no-landlock", "configcheck-allow-unconfined"} {
		if fs.Lookup(name) == nil {
			t.Errorf("no flag --%s", name)
		}
	}
	if err := fs.Parse([]string{
		"--pvsafe-bypass=label",
		"--placement-platform-users=u1,u2", "--placement-platform-groups=", "--placement-lineage-labels",
		"--configcheck-allow-lua", "--configcheck-confinement=bestEffort",
		"--sandbox-runner-dir=/run/x", "--sandbox-runner-user=1000:1000",
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"pvsafe":      `{"bypass":"label"}`,
		"placement":   `{"platformUsers":["u1","u2"],"platformGroups":[],"lineageLabels":true}`,
		"configcheck": `{"allowLua":true,"confinement":"bestEffort"}`,
	}
	for _, m := range mods {
		c, ok := m.(module.Configurable)
		if !ok {
			continue
		}
		// Flags alone, no settings: where the sandbox runner is.
		if v := reflect.ValueOf(c.Settings()).Elem(); v.FieldByName("RunnerDir").IsValid() &&
			(v.FieldByName("RunnerDir").String() != "/run/x" || v.FieldByName("RunnerUser").String() != "1000:1000") {
			t.Errorf("%s: --sandbox-runner-dir/-user did not reach the module: %+v", m.Name(), v.Interface())
		}
		got, err := json.Marshal(c.Settings())
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want[m.Name()] {
			t.Errorf("%s settings %s, want %s", m.Name(), got, want[m.Name()])
		}
		delete(want, m.Name())
	}
	if len(want) > 0 {
		t.Errorf("modules without settings: %v", want)
	}
	// A mode pvsafe does not know is refused while parsing.
	fs = flag.NewFlagSet("gatehouse", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	serveFlags(fs, catalogue.All())
	if err := fs.Parse([]string{"--pvsafe-bypass=anyone"}); err == nil || !strings.Contains(err.Error(), `pvsafe bypass mode "anyone"`) {
		t.Errorf("--pvsafe-bypass=anyone: %v, want the mode refused", err)
	}
}
