package suite

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// demoTemplates are a small haproxy-like config: a comment per Service, a
// backend per Ingress path whose Service must exist (fail otherwise), a
// host map, a general file and a certificate from extraContext.
var demoTemplates = render.Templates{
	Snippets: map[string]string{
		"backend": `backend be_{{ .ns }}_{{ .svc }}
  server s1 {{ .ip }}:{{ .port }}`,
	},
	HAProxyConfig: `global
  daemon
defaults
  mode {{ .extraContext.mode }}
{{- range .resources.services.List }}
# service {{ .metadata.namespace }}/{{ .metadata.name }}
{{- end }}
frontend fe_http
  bind :8080
  use_backend %[req.hdr(host),lower,map(maps/hosts.map,be_default)]
backend be_default
  http-request return status 404
{{- range $ing := .resources.ingresses.List }}
{{- range $rule := $ing.spec.rules }}
{{- range $rule.http.paths }}
{{- $svc := $.resources.services.GetSingle $ing.metadata.namespace .backend.service.name }}
{{- if not $svc }}{{ fail (printf "ingress %s/%s: service %s not found" $ing.metadata.namespace $ing.metadata.name .backend.service.name) }}{{ end }}
{{ template "backend" (dict "ns" $ing.metadata.namespace "svc" .backend.service.name "ip" $svc.spec.clusterIP "port" .backend.service.port.number) }}
{{- end }}
{{- end }}
{{- end }}
`,
	Maps: map[string]string{
		"hosts.map": `{{ range $ing := .resources.ingresses.List }}{{ range $ing.spec.rules }}{{ .host }} be_{{ $ing.metadata.namespace }}_{{ (index .http.paths 0).backend.service.name }}
{{ end }}{{ end }}`,
		"paths.map": `{{ range $ing := .resources.ingresses.List }}{{ range $ing.spec.rules }}{{ range .http.paths }}{{ .path }} {{ $ing.metadata.name }}
{{ end }}{{ end }}{{ end }}`,
	},
	Files: map[string]string{
		"503.http": "HTTP/1.0 503 Service Unavailable\n",
	},
	SSLCertificates: map[string]string{
		"default.pem": `{{ .extraContext.cert | trusted }}`,
	},
}

var demoIndexBy = map[string][]string{
	"ingresses": {"metadata.namespace", "metadata.name"},
	"services":  {"metadata.namespace", "metadata.name"},
}

func compile(t testing.TB, templates render.Templates) render.Renderer {
	t.Helper()
	engine, err := render.NewEngine("gotemplate")
	if err != nil {
		t.Fatal(err)
	}
	renderer, err := engine.Compile(templates)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return renderer
}

// fakeChecker stands in for haproxy -c: the real check is the haproxy
// package's, tested against the real binary there. This one rejects a
// server line without an address, the way haproxy would, and counts calls.
type fakeChecker struct {
	mu    sync.Mutex
	calls int
}

func (f *fakeChecker) check(_ context.Context, out render.Output) (bool, string, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	for i, line := range strings.Split(out.HAProxyConfig, "\n") {
		if strings.Contains(line, "server s1 :") {
			return false, "[ALERT] parsing [haproxy.cfg:" + strconv.Itoa(i+1) + "] : 'server s1' : invalid address", nil
		}
	}
	return true, "", nil
}

func demoRunner(t testing.TB) (*Runner, *fakeChecker) {
	t.Helper()
	checker := &fakeChecker{}
	return &Runner{
		Renderer:     compile(t, demoTemplates),
		IndexBy:      demoIndexBy,
		ExtraContext: map[string]any{"mode": "http", "cert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "replicas": 3.0},
		Check:        checker.check,
	}, checker
}

// decode decodes JSON as a CRD's raw fixture would be: numbers as float64.
func decode(t testing.TB, text string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(text), &obj); err != nil {
		t.Fatalf("decode %s: %v", text, err)
	}
	return obj
}

func service(t testing.TB, namespace, name, clusterIP string) map[string]any {
	t.Helper()
	return decode(t, `{"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "`+namespace+`", "name": "`+name+`"},
		"spec": {"clusterIP": "`+clusterIP+`", "ports": [{"port": 80}]}}`)
}

// ingress routes host/ to the Service backend on port 80. It has no
// apiVersion and kind, as fixtures often have not.
func ingress(t testing.TB, namespace, name, host, backend string) map[string]any {
	t.Helper()
	return decode(t, `{"metadata": {"namespace": "`+namespace+`", "name": "`+name+`"},
		"spec": {"rules": [{"host": "`+host+`", "http": {"paths": [
			{"path": "/", "backend": {"service": {"name": "`+backend+`", "port": {"number": 80}}}}
		]}}]}}`)
}

// demoFixtures are one Ingress a.example -> app/api and its Service.
func demoFixtures(t testing.TB) map[string][]map[string]any {
	t.Helper()
	return map[string][]map[string]any{
		"services":  {service(t, "app", "api", "10.0.0.10")},
		"ingresses": {ingress(t, "app", "web", "a.example", "api")},
	}
}

func runOne(t testing.TB, runner *Runner, test Test) Result {
	t.Helper()
	report, err := runner.Run(context.Background(), map[string]Test{"t": test}, "")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(report.Results) != 1 {
		t.Fatalf("Run: %d results, want 1", len(report.Results))
	}
	return report.Results[0]
}
