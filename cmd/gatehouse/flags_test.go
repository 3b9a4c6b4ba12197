package main

import (
	"flag"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/app"
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
	serveFlags(fs)
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
