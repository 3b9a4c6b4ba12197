package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/testing/linediff"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// previousChartValues is the chart's values.yaml as of an earlier commit
// (2026-11-23): 90 keys fewer than today's, none since removed.
const previousChartValues = "testdata/chart-values-e637f55.yaml"

// chartWithValues copies the chart into a temporary directory with values
// as its values.yaml. That is the chart `helm upgrade --reuse-values`
// renders: the new templates over the previous release's values, coalesced
// with the previous chart's defaults, in place of the new chart's.
func chartWithValues(t *testing.T, values string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "gatehouse")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "charts/gatehouse"))); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// An upgrade with --reuse-values from an earlier chart renders, and renders
// what today's defaults render once the two defaults changed since are
// given: every key added since is filled in from today's defaults
// (templates/_helpers.tpl, gatehouse.defaults), and a value the release
// has, false and empty ones included, is kept.
func TestHelmUpgradeReusingThePreviousValues(t *testing.T) {
	previous := chartWithValues(t, previousChartValues)
	for _, tc := range []struct {
		name string
		set  []string
	}{
		{"defaults", nil},
		{"every module", []string{"modules.configcheck.enabled=true", "modules.placement.enabled=true", "modules.nodegroup.enabled=true"}},
		{"pvsafe off", []string{"modules.pvsafe.enabled=false", "modules.placement.enabled=true"}},
		{"static webhooks, no tests, no hook", []string{"webhooks.mode=static", "certificates.mode=certManager", "tests.enabled=false", "uninstallHook.enabled=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The two defaults that changed since: the previous release
			// keeps its own (nodegroup on, no priority class) under
			// --reuse-values, as docs/migrating.md says.
			changed := []string{"modules.nodegroup.enabled=false", "priorityClassName=system-cluster-critical"}
			args := func(chart string) []string {
				a := []string{"template", helmRelease, chart, "--namespace", "gatehouse-system"}
				for _, s := range append(changed, tc.set...) {
					a = append(a, "--set", s)
				}
				return a
			}
			reused, err := helm(t, args(previous)...)
			if err != nil {
				t.Fatalf("the upgrade's render over the previous chart's values fails: %v", err)
			}
			today, err := helm(t, args("charts/gatehouse")...)
			if err != nil {
				t.Fatal(err)
			}
			// The chart's path is in nothing rendered; the release's
			// values are the same once filled in.
			if reused != today {
				t.Errorf("the render over the previous values differs from today's:\n%s", linediff.First("reused", reused, "today", today))
			}
		})
	}
	// The previous release's own defaults stand: nodegroup stays on.
	nodegroup := false
	for _, obj := range decodeRender(t, []string{"template", helmRelease, previous, "--namespace", "gatehouse-system"}) {
		nodegroup = nodegroup || obj.GetKind() == "CustomResourceDefinition" && obj.GetName() == "nodegroups.deckhouse.io"
	}
	if !nodegroup {
		t.Error("the previous release's default (nodegroup on) was replaced by today's: no NodeGroup CRD rendered")
	}
}
