package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
	"github.com/gatehouse-dev/gatehouse/internal/server"
	"github.com/gatehouse-dev/gatehouse/internal/testing/admissionload"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// The chart's alerts and dashboard, shared with make test-alerts and
// docs/monitoring.md.
const (
	alertsFile    = "charts/gatehouse/files/alerts.yaml"
	dashboardFile = "charts/gatehouse/files/dashboard.json"
)

var allModules = []string{"pvsafe", "nodegroup", "placement", "configcheck"}

// monitoredMetrics are the metric names the shipped alerts and dashboard
// query, as bin/metricnames (Prometheus's own PromQL parser) reads them
// from the files: never a list kept by hand beside them.
func monitoredMetrics(t *testing.T) []string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin/metricnames")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: build it with `make %s`", err, bin)
	}
	cmd := exec.Command(bin, alertsFile, dashboardFile)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("metricnames: %v: %s", err, stderr.String())
	}
	names := strings.Fields(string(out))
	if len(names) < 10 {
		t.Fatalf("metricnames found only %v in %s and %s", names, alertsFile, dashboardFile)
	}
	return names
}

// servedNames are the sample names of a text exposition: a histogram
// family serves <name>_bucket, _sum and _count, a summary <name>, _sum and
// _count.
func servedNames(t *testing.T, exposition []byte) map[string]bool {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(exposition))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	names := map[string]bool{}
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	return names
}

// TestEveryMonitoredMetricIsServed: after a run that sends every module
// the reviews of the load generator (an admission and a denial each),
// every metric the alerts and the dashboard query is served, Gatehouse's
// on Gatehouse's /metrics, the API server's (apiserver_*) on
// kube-apiserver's, so that no alert waits forever on a metric nobody
// exports. Gatehouse is then stopped and a Pod is created through
// placement's Pod webhook (failurePolicy Ignore), which the API server
// admits unchecked and counts (apiserver_admission_webhook_fail_open_count):
// what GatehouseWebhookFailingOpen watches for.
func TestEveryMonitoredMetricIsServed(t *testing.T) {
	want := monitoredMetrics(t)
	ctx := context.Background()
	modules := map[string]app.ModuleConfig{}
	for _, m := range allModules {
		modules[m] = app.ModuleConfig{Enabled: true}
	}
	// As the chart runs it by default: leader election and self-managed
	// certificates (the leader writes the Secret's first step).
	ns := namespace(t, "e2e-monitoring")
	// Registered before Gatehouse starts, so run after it stopped: the
	// load's fixtures (a config watching every namespace's Ingresses
	// among them) must not outlive this test.
	t.Cleanup(func() {
		if err := admissionload.Teardown(context.Background(), controlPlane.Client); err != nil {
			t.Errorf("removing the load's fixtures: %v", err)
		}
	})
	port := freePort(t)
	metricsAddr := "127.0.0.1:" + freePort(t)
	g := startGatehouse(t, app.Options{
		Namespace: ns, Catalogue: catalogue.All(), Modules: modules,
		LeaderElection: true, MetricsAddr: metricsAddr,
		CertSecret:       ns + "/gatehouse-serving-cert",
		SelfManagedCerts: &certs.SelfManagedOptions{DNSNames: []string{"localhost"}},
		Server:           server.Options{Addr: "127.0.0.1:" + port},
		ManageWebhooks:   &webhookconfig.Target{URL: "https://localhost:" + port},
	})
	if err := admissionload.Setup(ctx, controlPlane.Client, allModules...); err != nil {
		t.Fatal(err)
	}
	for _, op := range admissionload.Operations(allModules...) {
		// The first answers may wait for a cache the fixtures just filled.
		settle(t, op.Name, func(ctx context.Context) error {
			err := op.Do(ctx, controlPlane.Client)
			switch {
			case op.Denial == "" && err != nil:
				return fmt.Errorf("want admitted: %w", err)
			case op.Denial != "" && (err == nil || !strings.Contains(err.Error(), op.Denial)):
				return fmt.Errorf("want denied with %q, got %v", op.Denial, err)
			}
			return nil
		})
	}

	// What a port scanner sends: refused before any handler.
	resp, err := g.HTTPClient.Get(g.URL + pvsafe.WebhookPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET %s: %d, want 405", pvsafe.WebhookPath, resp.StatusCode)
	}

	// Some series appear after the reviews: the leader's publication, the
	// configs' counts after their status write.
	var missing []string
	settle(t, "every monitored Gatehouse metric served", func(ctx context.Context) error {
		served := servedNames(t, scrapeGatehouse(t, "http://"+metricsAddr+"/metrics"))
		missing = missing[:0]
		for _, name := range want {
			if !strings.HasPrefix(name, "apiserver_") && !served[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the alerts or the dashboard query metrics Gatehouse does not serve: %v", missing)
		}
		return nil
	})

	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "load-tenant", Name: "unchecked", Labels: map[string]string{"helm.toolkit.fluxcd.io/name": "load-db"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	if err := controlPlane.Client.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("a Pod while Gatehouse is stopped: %v, want admitted unchecked (placement's Pod check fails open)", err)
	}
	cs, err := kubernetes.NewForConfig(controlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, "every monitored API server metric served", func(ctx context.Context) error {
		raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return err
		}
		served := servedNames(t, raw)
		missing = missing[:0]
		for _, name := range want {
			if strings.HasPrefix(name, "apiserver_") && !served[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the alerts or the dashboard query metrics kube-apiserver does not serve: %v", missing)
		}
		return nil
	})
}

func scrapeGatehouse(t *testing.T, url string) []byte {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v", url, resp.StatusCode, err)
	}
	return body
}

// TestHelmMonitoringRendersOnlyWhenEnabled: the PrometheusRule and the
// dashboard ConfigMap are rendered only when asked, with the labels their
// selectors need, and hold the chart's files as they are (the rules
// make test-alerts tests, the dashboard docs/monitoring.md shows).
func TestHelmMonitoringRendersOnlyWhenEnabled(t *testing.T) {
	ns := namespace(t, "helm-monitoring")
	for _, obj := range renderChart(t, ns) {
		if obj.GetKind() == "PrometheusRule" || obj.GetLabels()["grafana_dashboard"] != "" {
			t.Errorf("rendered by default: %s %s", obj.GetKind(), obj.GetName())
		}
	}

	objs := renderChart(t, ns, "metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=kube-prometheus-stack",
		"metrics.dashboards.enabled=true", "metrics.dashboards.annotations.grafana_folder=Gatehouse")
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := os.ReadFile(filepath.Join(root, alertsFile))
	if err != nil {
		t.Fatal(err)
	}
	var wantRules map[string]any
	if err := yaml.Unmarshal(alerts, &wantRules); err != nil {
		t.Fatal(err)
	}
	var rule, dashboard map[string]any
	for _, obj := range objs {
		switch {
		case obj.GetKind() == "PrometheusRule":
			if obj.GetAPIVersion() != "monitoring.coreos.com/v1" || obj.GetLabels()["release"] != "kube-prometheus-stack" || obj.GetNamespace() != ns {
				t.Errorf("PrometheusRule %s/%s %s labels %v: want monitoring.coreos.com/v1 in the release namespace with the ruleSelector's label",
					obj.GetNamespace(), obj.GetName(), obj.GetAPIVersion(), obj.GetLabels())
			}
			rule = obj.Object
		case obj.GetKind() == "ConfigMap" && obj.GetLabels()["grafana_dashboard"] == "1":
			if obj.GetAnnotations()["grafana_folder"] != "Gatehouse" {
				t.Errorf("dashboard ConfigMap annotations %v: want grafana_folder", obj.GetAnnotations())
			}
			dryRunApply(t, []*unstructured.Unstructured{obj})
			dashboard = obj.Object
		}
	}
	if rule == nil || dashboard == nil {
		t.Fatalf("enabled: PrometheusRule rendered %v, dashboard ConfigMap labelled grafana_dashboard rendered %v", rule != nil, dashboard != nil)
	}
	if !reflect.DeepEqual(rule["spec"], wantRules) {
		t.Errorf("the PrometheusRule's spec is not %s", alertsFile)
	}
	data, _ := dashboard["data"].(map[string]any)
	rendered, _ := data["gatehouse.json"].(string)
	file, err := os.ReadFile(filepath.Join(root, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(rendered) != strings.TrimSpace(string(file)) {
		t.Errorf("the ConfigMap's gatehouse.json is not %s", dashboardFile)
	}
}

// Every alert has its runbook: its runbook_url names a section of
// docs/monitoring.md.
func TestEveryAlertHasARunbook(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := os.ReadFile(filepath.Join(root, alertsFile))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(alerts, &file); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs/monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ +(.+)$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	const base = "https://github.com/gatehouse-dev/gatehouse/blob/main/docs/monitoring.md#"
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			url := r.Annotations["runbook_url"]
			if anchor, ok := strings.CutPrefix(url, base); !ok || anchor != strings.ToLower(r.Alert) || !anchors[anchor] {
				t.Errorf("alert %s: runbook_url %q names no section %q of docs/monitoring.md", r.Alert, url, strings.ToLower(r.Alert))
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: want a summary and a description", r.Alert)
			}
		}
	}
}

// githubAnchor is the fragment GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	heading = strings.ToLower(strings.TrimSpace(heading))
	heading = regexp.MustCompile("[^a-z0-9 _-]").ReplaceAllString(heading, "")
	return strings.ReplaceAll(heading, " ", "-")
}
