package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
	"github.com/gatehouse-dev/gatehouse/internal/reports"
	"github.com/gatehouse-dev/gatehouse/internal/server"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/uninstall"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// reportInterval runs the periodic checks often enough for a test.
const reportInterval = 200 * time.Millisecond

func reportCRDPaths(t testing.TB) []string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return []string{filepath.Join(root, testenv.PolicyReportCRDs)}
}

// installReportCRDs installs the wgpolicyk8s.io CRDs (envtest waits until
// they are served) and removes them when the test ends: the other tests
// run without them.
func installReportCRDs(t *testing.T) {
	t.Helper()
	if _, err := envtest.InstallCRDs(controlPlane.Config, envtest.CRDInstallOptions{Paths: reportCRDPaths(t), ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uninstallReportCRDs(t) })
}

// uninstallReportCRDs removes the CRDs, if installed, and waits until
// discovery no longer serves them.
func uninstallReportCRDs(t *testing.T) {
	t.Helper()
	if err := envtest.UninstallCRDs(controlPlane.Config, envtest.CRDInstallOptions{Paths: reportCRDPaths(t)}); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(controlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the PolicyReport API is no longer served", func() error {
		if _, err := dc.ServerResourcesForGroupVersion(reports.GroupVersion.String()); !apierrors.IsNotFound(err) {
			return fmt.Errorf("discovery: %v", err)
		}
		return nil
	})
}

// wgReport is what a test reads of a (Cluster)PolicyReport.
type wgReport struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Summary  struct {
		Pass  int `json:"pass"`
		Fail  int `json:"fail"`
		Warn  int `json:"warn"`
		Error int `json:"error"`
		Skip  int `json:"skip"`
	} `json:"summary"`
	Results []wgResult `json:"results"`
}

type wgResult struct {
	Source    string                   `json:"source"`
	Policy    string                   `json:"policy"`
	Rule      string                   `json:"rule"`
	Result    string                   `json:"result"`
	Scored    bool                     `json:"scored"`
	Message   string                   `json:"message"`
	Resources []corev1.ObjectReference `json:"resources"`
}

// policyReport reads Gatehouse's report of module in namespace ("": the
// ClusterPolicyReport); nil when there is none.
func policyReport(t testing.TB, namespace, moduleName string) (*wgReport, error) {
	t.Helper()
	return policyReportOf(t, "gatehouse", namespace, moduleName)
}

// policyReportOf is policyReport of another install.
func policyReportOf(t testing.TB, instance, namespace, moduleName string) (*wgReport, error) {
	t.Helper()
	u := &unstructured.Unstructured{}
	kind := reports.PolicyReportKind
	if namespace == "" {
		kind = reports.ClusterPolicyReportKind
	}
	u.SetGroupVersionKind(kind)
	err := controlPlane.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: reports.ReportName(instance, moduleName)}, u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := &wgReport{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, r); err != nil {
		return nil, err
	}
	return r, nil
}

// resultFor is the report's result about the named subject, nil if none.
func (r *wgReport) resultFor(kind, name string) *wgResult {
	if r == nil {
		return nil
	}
	for i := range r.Results {
		for _, s := range r.Results[i].Resources {
			if s.Kind == kind && s.Name == name {
				return &r.Results[i]
			}
		}
	}
	return nil
}

// auditRuns counts the runs of a module's periodic check with an outcome.
func auditRuns(moduleName, outcome string) float64 {
	return seriesSum("gatehouse_audit_runs_total", map[string]string{"module": moduleName, "outcome": outcome})
}

func startPVSafeReports(t *testing.T, reportOpts app.ReportOptions) *testenv.Gatehouse {
	t.Helper()
	return startGatehouse(t, app.Options{
		Catalogue: []module.Module{pvsafe.New(pvsafe.Options{})},
		Modules:   map[string]app.ModuleConfig{"pvsafe": {Enabled: true}},
		Reports:   reportOpts,
	})
}

// pvsafe's inventory: nothing is written while the PolicyReport API is
// absent (and the check still runs, without errors); once it is installed
// a claim whose deletion would lose data gets a warning in its namespace's
// report; the report holds at most MaxResults results and says how many it
// left out; a claim made safe leaves the report, and the last one takes
// the report with it.
func TestPolicyReportsPVSafeInventory(t *testing.T) {
	uninstallReportCRDs(t)
	startPVSafeReports(t, app.ReportOptions{Interval: reportInterval, MaxResults: 2})
	ns := namespace(t, "reports")
	_, data := volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)

	// Absent API: the check runs and writes nothing, and says so without
	// an error.
	ok, failed := auditRuns("pvsafe", "ok"), auditRuns("pvsafe", "write_error")
	eventually(t, "two runs of the inventory without the PolicyReport API", func() error {
		if n := auditRuns("pvsafe", "ok"); n < ok+2 {
			return fmt.Errorf("%v runs", n-ok)
		}
		return nil
	})
	if n := auditRuns("pvsafe", "write_error"); n != failed {
		t.Fatalf("%v runs failed to write while the API was absent", n-failed)
	}

	installReportCRDs(t)
	eventually(t, "the claim at risk is reported once the API is served", func() error {
		r, err := policyReport(t, ns, "pvsafe")
		if err != nil || r == nil {
			return fmt.Errorf("report: %v, %v", r, err)
		}
		res := r.resultFor("PersistentVolumeClaim", "data")
		if res == nil || r.Summary.Warn != 1 || len(r.Results) != 1 {
			return fmt.Errorf("report %+v", r)
		}
		if res.Source != "gatehouse" || res.Policy != "pvsafe" || res.Rule != pvsafe.InventoryRule || res.Result != "warn" || !res.Scored {
			t.Fatalf("result %+v", res)
		}
		if !strings.Contains(res.Message, "volume "+data.Name+" has reclaimPolicy Delete") {
			t.Fatalf("message %q does not say why", res.Message)
		}
		if r.Metadata.Labels["app.kubernetes.io/managed-by"] != "gatehouse" || r.Metadata.Labels["gatehouse.dev/module"] != "pvsafe" {
			t.Fatalf("labels %v", r.Metadata.Labels)
		}
		return nil
	})

	// Unchanged findings leave the report as it is: each result keeps the
	// timestamp it was first reported with, across runs more than a
	// second (the timestamp's resolution) apart.
	written := &unstructured.Unstructured{}
	written.SetGroupVersionKind(reports.PolicyReportKind)
	if err := controlPlane.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: reports.ReportName("gatehouse", "pvsafe")}, written); err != nil {
		t.Fatal(err)
	}
	runs, since := auditRuns("pvsafe", "ok"), time.Now()
	eventually(t, "runs of the inventory over more than a second", func() error {
		if n := auditRuns("pvsafe", "ok"); n < runs+3 || time.Since(since) < 1100*time.Millisecond {
			return fmt.Errorf("%v runs in %v", n-runs, time.Since(since))
		}
		return nil
	})
	again := written.DeepCopy()
	if err := controlPlane.Client.Get(context.Background(), client.ObjectKeyFromObject(written), again); err != nil {
		t.Fatal(err)
	}
	if again.GetResourceVersion() != written.GetResourceVersion() {
		t.Errorf("unchanged findings changed the report: resourceVersion %s, then %s", written.GetResourceVersion(), again.GetResourceVersion())
	}

	_, more1 := volumeFixture(t, ns, "more-1", corev1.PersistentVolumeReclaimDelete)
	_, more2 := volumeFixture(t, ns, "more-2", corev1.PersistentVolumeReclaimDelete)
	eventually(t, "three claims at risk fill a report bounded to two results", func() error {
		r, err := policyReport(t, ns, "pvsafe")
		if err != nil || r == nil {
			return fmt.Errorf("report: %v, %v", r, err)
		}
		if r.Summary.Warn != 3 || r.Summary.Skip != 1 || len(r.Results) != 3 {
			return fmt.Errorf("summary %+v, %d results", r.Summary, len(r.Results))
		}
		last := r.Results[2]
		if last.Rule != reports.OmittedRule || last.Result != "skip" || !strings.Contains(last.Message, "1 more findings") {
			t.Fatalf("the last result does not say what was left out: %+v", last)
		}
		return nil
	})

	retain := func(pv *corev1.PersistentVolume) {
		t.Helper()
		patch := client.MergeFrom(pv.DeepCopy())
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		if err := controlPlane.Client.Patch(context.Background(), pv, patch); err != nil {
			t.Fatal(err)
		}
	}
	retain(data)
	eventually(t, "the claim made safe leaves the report", func() error {
		r, err := policyReport(t, ns, "pvsafe")
		if err != nil || r == nil {
			return fmt.Errorf("report: %v, %v", r, err)
		}
		if r.resultFor("PersistentVolumeClaim", "data") != nil || r.Summary.Warn != 2 || r.Summary.Skip != 0 || len(r.Results) != 2 {
			return fmt.Errorf("summary %+v, results %+v", r.Summary, r.Results)
		}
		return nil
	})
	retain(more1)
	retain(more2)
	eventually(t, "a namespace without findings has no report", func() error {
		r, err := policyReport(t, ns, "pvsafe")
		if err != nil || r != nil {
			return fmt.Errorf("report: %+v, %v", r, err)
		}
		return nil
	})
}

// Only the leader audits and writes. Replica A leads and checks once an
// hour, replica B follows and would check every 200 ms: a deleted report
// stays deleted while A leads, and comes back as soon as B takes over.
func TestPolicyReportsOnlyTheLeaderWrites(t *testing.T) {
	installReportCRDs(t)
	own := namespace(t, "gh-leader")
	ns := namespace(t, "reports-leader")
	volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)
	start := func(interval time.Duration) *testenv.Gatehouse {
		return startGatehouse(t, app.Options{
			Namespace: own, LeaderElection: true, RetryPeriod: 200 * time.Millisecond,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second,
			Catalogue: []module.Module{pvsafe.New(pvsafe.Options{})},
			Modules:   map[string]app.ModuleConfig{"pvsafe": {Enabled: true}},
			Reports:   app.ReportOptions{Interval: interval},
		})
	}
	runsBefore := auditRuns("pvsafe", "ok")
	leader := start(time.Hour)
	// The run is over when it is counted: the report of this namespace is
	// written before those of the other tests' namespaces and the count.
	eventually(t, "the leader's first run writes the report and ends", func() error {
		r, err := policyReport(t, ns, "pvsafe")
		if err != nil || r.resultFor("PersistentVolumeClaim", "data") == nil {
			return fmt.Errorf("report %+v, %v", r, err)
		}
		if n := auditRuns("pvsafe", "ok"); n <= runsBefore {
			return fmt.Errorf("the run is not counted yet (%v ok runs)", n)
		}
		return nil
	})
	start(reportInterval)

	report := &unstructured.Unstructured{}
	report.SetGroupVersionKind(reports.PolicyReportKind)
	report.SetNamespace(ns)
	report.SetName(reports.ReportName("gatehouse", "pvsafe"))
	if err := controlPlane.Client.Delete(context.Background(), report); err != nil {
		t.Fatal(err)
	}
	// Fifteen of the follower's periods: a follower that audited would
	// have written the report again many times over.
	ok := auditRuns("pvsafe", "ok")
	time.Sleep(15 * reportInterval)
	if r, err := policyReport(t, ns, "pvsafe"); err != nil || r != nil {
		t.Fatalf("a follower wrote the report: %+v (%v)", r, err)
	}
	if n := auditRuns("pvsafe", "ok"); n != ok {
		t.Fatalf("%v runs of the check while the leader waits an hour", n-ok)
	}

	if err := leader.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new leader writes the report", func() error {
		r, err := policyReport(t, ns, "pvsafe")
		if err != nil || r.resultFor("PersistentVolumeClaim", "data") == nil {
			return fmt.Errorf("report %+v, %v", r, err)
		}
		return nil
	})
}

// The chart's RBAC lets the leader list, create, update and delete its
// reports: Gatehouse runs as the chart's ServiceAccount, with its roles.
func TestPolicyReportsWithTheChartsRBAC(t *testing.T) {
	installReportCRDs(t)
	ctx := context.Background()
	own := namespace(t, "rbac-reports")
	release := "reports-" + randSuffix()
	cfg, sa := chartIdentity(t, release, own, moduleValues([]string{"pvsafe"})...)
	cp := *controlPlane
	cp.Config = cfg
	port := freePort(t)
	g, err := testenv.StartGatehouse(ctx, &cp, t.TempDir(), app.Options{
		Log: testr.New(t), Namespace: own, Instance: sa,
		Catalogue: []module.Module{pvsafe.New(pvsafe.Options{})}, Modules: map[string]app.ModuleConfig{"pvsafe": {Enabled: true}},
		CertSecret:       own + "/" + sa + "-serving-cert",
		SelfManagedCerts: &certs.SelfManagedOptions{DNSNames: []string{"localhost"}},
		LeaderElection:   true,
		Server:           server.Options{Addr: "127.0.0.1:" + port},
		ManageWebhooks:   &webhookconfig.Target{URL: "https://localhost:" + port},
		Reports:          app.ReportOptions{Interval: reportInterval},
	})
	if err != nil {
		t.Fatalf("Gatehouse with only the chart's RBAC: %v", err)
	}
	t.Cleanup(func() {
		if err := g.Stop(); err != nil {
			t.Error(err)
		}
		if err := uninstall.Run(ctx, uninstall.Options{Client: controlPlane.Client, Instance: sa}); err != nil {
			t.Errorf("remove install %s: %v", sa, err)
		}
	})
	failed := auditRuns("pvsafe", "write_error")
	ns := namespace(t, "reports-rbac")
	_, pv := volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)
	eventually(t, "the chart's identity writes the report", func() error {
		r, err := policyReportOf(t, sa, ns, "pvsafe")
		if err != nil || r.resultFor("PersistentVolumeClaim", "data") == nil {
			return fmt.Errorf("report %+v, %v", r, err)
		}
		return nil
	})
	patch := client.MergeFrom(pv.DeepCopy())
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	if err := controlPlane.Client.Patch(ctx, pv, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the chart's identity deletes the mended report", func() error {
		r, err := policyReportOf(t, sa, ns, "pvsafe")
		if err != nil || r != nil {
			return fmt.Errorf("report %+v, %v", r, err)
		}
		return nil
	})
	if n := auditRuns("pvsafe", "write_error"); n != failed {
		t.Errorf("%v runs could not write their reports", n-failed)
	}
}
