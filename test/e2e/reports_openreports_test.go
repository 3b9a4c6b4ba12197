package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/reports"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// installOpenReportsCRDs installs the openreports.io CRDs and removes them
// (waiting until discovery no longer serves them) when the test ends.
func installOpenReportsCRDs(t *testing.T) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	opts := envtest.CRDInstallOptions{Paths: []string{filepath.Join(root, testenv.OpenReportsCRDs)}, ErrorIfPathMissing: true}
	if _, err := envtest.InstallCRDs(controlPlane.Config, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := envtest.UninstallCRDs(controlPlane.Config, opts); err != nil {
			t.Fatal(err)
		}
		dc, err := discovery.NewDiscoveryClientForConfig(controlPlane.Config)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the OpenReports API is no longer served", func() error {
			if _, err := dc.ServerResourcesForGroupVersion(reports.OpenReportsGroupVersion.String()); !apierrors.IsNotFound(err) {
				return fmt.Errorf("discovery: %v", err)
			}
			return nil
		})
	})
}

// TestReportsMoveToOpenReportsWhereServed: with policyReports.api auto, a
// cluster serving only wg-policy's API gets PolicyReports; once the
// OpenReports CRDs are installed (Kyverno 1.15 does), the same finding is
// an openreports.io Report, read back through the project's Go types, and
// this install's PolicyReport is deleted rather than left saying what was
// true before.
func TestReportsMoveToOpenReportsWhereServed(t *testing.T) {
	uninstallReportCRDs(t)
	installReportCRDs(t)
	startPVSafeReports(t, app.ReportOptions{Interval: reportInterval, API: reports.APIAuto})
	ns := namespace(t, "openreports")
	volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)
	name := reports.ReportName("gatehouse", "pvsafe")

	eventually(t, "a wgpolicyk8s.io PolicyReport while only that API is served", func() error {
		r, err := policyReport(t, ns, "pvsafe")
		if err != nil || r == nil || r.resultFor("PersistentVolumeClaim", "data") == nil {
			return fmt.Errorf("report %+v, %v", r, err)
		}
		return nil
	})

	installOpenReportsCRDs(t)
	eventually(t, "an openreports.io Report, and no PolicyReport left", func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(reports.ReportKind)
		if err := controlPlane.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			return err
		}
		var r openreportsv1alpha1.Report
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
			t.Fatalf("the Report does not read as OpenReports' type: %v", err)
		}
		if r.Source != "gatehouse" || r.Summary.Warn != 1 || len(r.Results) != 1 {
			return fmt.Errorf("report %+v", r)
		}
		res := r.Results[0]
		if res.Policy != "pvsafe" || res.Result != "warn" || len(res.Subjects) != 1 || res.Subjects[0].Kind != "PersistentVolumeClaim" || res.Subjects[0].Name != "data" || res.Description == "" {
			t.Fatalf("result %+v", res)
		}
		if old, err := policyReport(t, ns, "pvsafe"); err != nil || old != nil {
			return errors.Join(fmt.Errorf("the PolicyReport is still there: %+v", old), err)
		}
		return nil
	})
}
