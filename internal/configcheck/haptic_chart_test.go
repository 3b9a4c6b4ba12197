//go:build !race

package configcheck

// haptic's chart config run as `gatehouse configcheck test` runs it: the
// compile and the renderings in confined workers with their budgets, the
// check against the real haproxy 3.0 and 2.6. Not under the race
// detector: ThreadSanitizer's shadow memory counts in a worker's
// RLIMIT_DATA, and the compile of this 9,000-line config outgrows the
// 256 MiB budget under it (and takes five to ten times as long). make test
// runs these in a stage of their own without -race; the compile's code is
// raced in the scriggo and renderproc packages' tests.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// haproxyRoot30 is where the Makefile unpacks the image's haproxy 3.0
// (make bin/haproxy-3.0/usr/sbin/haproxy; make test does).
func haproxyRoot30(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			root := filepath.Join(dir, "bin", "haproxy-3.0")
			if _, err := os.Stat(filepath.Join(root, "usr", "sbin", "haproxy")); err != nil {
				t.Fatalf("%v: haptic's tests run against the image's haproxy 3.0 (make bin/haproxy-3.0/usr/sbin/haproxy)", err)
			}
			return root
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("go.mod not found above the working directory")
		}
	}
}

// TestHapticChartTestsPassAsInHaptic runs haptic's own chart config as it
// is (testdata/haptic: the libraries its CI validates, 70 tests and
// _global) through `gatehouse configcheck test`'s code: on HAProxy 3.0,
// the branch haptic validates against, every test passes, as in haptic's
// CI. On 2.6 the renderings that load the ssl library's crt-list fail,
// each for the one reason haptic's configs need 3.x: the crt-list's
// ocsp-update option, which HAProxy 2.8 introduced.
func TestHapticChartTestsPassAsInHaptic(t *testing.T) {
	data, err := os.ReadFile("testdata/haptic/haproxytemplateconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	report, err := RunOffline(t.Context(), data, OfflineOptions{HAProxyRoot: haproxyRoot30(t)})
	if err != nil {
		t.Fatal(err)
	}
	if report.Total != 71 || report.Failed != 0 {
		for _, r := range report.Results {
			if !r.Passed {
				t.Errorf("%s: %s %+v", r.Name, r.RenderError, r.Failures)
			}
		}
		t.Fatalf("haproxy 3.0: %d of %d tests failed, want all 71 to pass", report.Failed, report.Total)
	}

	report, err = RunOffline(t.Context(), data, OfflineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if report.Total != 71 || report.Failed == 0 {
		t.Fatalf("haproxy 2.6: %d of %d failed, want the crt-list's tests to fail", report.Failed, report.Total)
	}
	for _, r := range report.Results {
		for _, f := range r.Failures {
			if !strings.Contains(f.Message, "unknown ssl keyword ocsp-update") && !strings.Contains(f.Message, "certificate-list.txt") {
				t.Errorf("haproxy 2.6, %s: %s: %s, want only the crt-list's ocsp-update refused", r.Name, f.Assertion, f.Message)
			}
		}
	}
}

// TestHapticTenantSnippetMeetsThePolicy is a tenant's attack through a
// haptic feature: haptic's libraries print an Ingress owner's multi-line
// config-backend annotation into haproxy.cfg as it is (its test
// test-haproxy-ingress-config-backend-snippet requires it), so the
// Scriggo engine does not refuse line breaks in printed values as the
// gotemplate engine does. The check policy is then the barrier: the
// owner's lines that read a file or run a program fail the test's
// haproxy_valid with the policy's reason, and haproxy never runs them.
func TestHapticTenantSnippetMeetsThePolicy(t *testing.T) {
	data, err := os.ReadFile("testdata/haptic/haproxytemplateconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const original = `                http-request set-header X-Custom-Header "custom-value"
                option httplog
`
	hostile := `                http-request set-header X-Custom-Header "custom-value"
                errorfile 503 /etc/shadow
                option httplog
`
	if !strings.Contains(string(data), original) {
		t.Fatal("the snippet test's annotation is not in the testdata")
	}
	attacked := strings.Replace(string(data), original, hostile, 1)
	report, err := RunOffline(t.Context(), []byte(attacked), OfflineOptions{Test: "test-haproxy-ingress-config-backend-snippet", HAProxyRoot: haproxyRoot30(t)})
	if err != nil {
		t.Fatal(err)
	}
	if report.Total != 1 || report.Failed != 1 {
		t.Fatalf("%d of %d failed: the hostile snippet passed", report.Failed, report.Total)
	}
	failures := report.Results[0].Failures
	if len(failures) != 1 || !strings.Contains(failures[0].Message, "check policy") || !strings.Contains(failures[0].Message, "errorfile") {
		t.Fatalf("failures %+v, want the haproxy_valid assertion refused by the check policy for the errorfile", failures)
	}
}

// TestHapticSlotPreservationReadsCurrentConfig: haptic's slot tests give
// the running configuration (currentConfig) and expect each endpoint that
// had a server slot to keep it. In the chart's tests the endpoints are
// listed in slot order, so they would pass with currentConfig unread; with
// the endpoints swapped (10.0.0.2 first), only a template that read the
// test's currentConfig keeps 10.0.0.5 in SRV_1 (without it, 10.0.0.2 takes
// SRV_1 and the test fails).
func TestHapticSlotPreservationReadsCurrentConfig(t *testing.T) {
	data, err := os.ReadFile("testdata/haptic/haproxytemplateconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	slotOrder := `          - addresses:
            - 10.0.0.5
            targetRef:
              kind: Pod
              name: slot-pod-5
          - addresses:
            - 10.0.0.2
            targetRef:
              kind: Pod
              name: slot-pod-2
`
	swapped := `          - addresses:
            - 10.0.0.2
            targetRef:
              kind: Pod
              name: slot-pod-2
          - addresses:
            - 10.0.0.5
            targetRef:
              kind: Pod
              name: slot-pod-5
`
	if strings.Count(string(data), slotOrder) != 2 {
		t.Fatal("the slot tests' endpoints are not in the testdata")
	}
	config := []byte(strings.ReplaceAll(string(data), slotOrder, swapped))
	report, err := RunOffline(t.Context(), config, OfflineOptions{Test: "test-ingress-slot-preservation-lower-ip", HAProxyRoot: haproxyRoot30(t)})
	if err != nil {
		t.Fatal(err)
	}
	if report.Total != 1 || report.Failed != 0 {
		t.Fatalf("%d of %d failed: %+v", report.Failed, report.Total, report.Results)
	}
}
