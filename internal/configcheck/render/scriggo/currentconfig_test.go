package scriggo

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

func TestParseCurrentConfig(t *testing.T) {
	cfg := parseCurrentConfig(`# the running configuration
global
    daemon
backend web # a comment
    balance roundrobin
    server SRV_1 10.0.0.5:8080 check
    server SRV_2 [fd00::2]:80 check
    server SRV_3 127.0.0.1:1 disabled
    server SRV_4 ipv4@10.0.0.9:81
    server SRV_5 unix@/run/x.sock
    server SRV_6 backend-host
    server broken
frontend f
    server not-in-a-backend 10.0.0.1:1
backend "quoted#name"
`)
	if len(cfg.Backends) != 2 || cfg.Backends[0].Name != "web" || cfg.Backends[1].Name != `"quoted#name"` {
		t.Fatalf("backends %+v", cfg.Backends)
	}
	want := map[string]string{
		"SRV_1": "10.0.0.5:8080", "SRV_2": "fd00::2:80", "SRV_3": "127.0.0.1:1", "SRV_4": "10.0.0.9:81",
		"SRV_5": "unix@/run/x.sock:-", "SRV_6": "backend-host:-",
	}
	servers := cfg.Backends[0].Servers
	if len(servers) != len(want) {
		t.Fatalf("servers %+v", servers)
	}
	for name, w := range want {
		s := servers[name]
		port := "-"
		if s.Port != nil {
			port = strconv.FormatInt(*s.Port, 10)
		}
		if got := s.Address + ":" + port; got != w || s.Name != name {
			t.Errorf("%s: %s %q, want %s", name, s.Name, got, w)
		}
	}
}

// TestTemplatesSeeTheTestsCurrentConfigAndHTTPResources: render.Data's
// currentConfig and httpResources are the templates' currentConfig and
// http.Fetch; a URL no test gave is an error naming it, never a fetch.
func TestTemplatesSeeTheTestsCurrentConfigAndHTTPResources(t *testing.T) {
	src := `{% if !isNil(currentConfig) %}{% for _, b := range currentConfig.Backends %}{{ b.Name }}={{ len(b.Servers) }}{% end %}{% end %}` +
		` {{ http.Fetch("https://example.test/list") }}`
	data := render.Data{
		CurrentConfig: "backend a\n  server SRV_1 10.0.0.1:80\n  server SRV_2 10.0.0.2:80\n",
		HTTPResources: map[string]string{"https://example.test/list": "blocked"},
	}
	if out := renderWith(t, render.Templates{HAProxyConfig: src}, data); out.HAProxyConfig != "a=2 blocked\n" {
		t.Errorf("rendered %q", out.HAProxyConfig)
	}
	if out := renderWith(t, render.Templates{HAProxyConfig: `{% if isNil(currentConfig) %}none{% end %}`}, render.Data{}); out.HAProxyConfig != "none\n" {
		t.Errorf("without a currentConfig: %q", out.HAProxyConfig)
	}
	// Two results, as haptic's templates read them.
	unknown := `{% var content, err = http.Fetch("https://other.test/") %}{{ content == nil }} {{ err.Error() }}`
	if out := renderWith(t, render.Templates{HAProxyConfig: unknown}, data); !strings.Contains(out.HAProxyConfig, "true http.Fetch https://other.test/: Gatehouse never fetches from the network") {
		t.Errorf("an unknown URL: %q", out.HAProxyConfig)
	}
}
