package e2e

import (
	"strings"
	"testing"
)

// logDecisions reaches --log-decisions, denied by default, and a value the
// binary would refuse is refused by the chart's schema first.
func TestHelmLogDecisions(t *testing.T) {
	wantArgs(t, deploymentArgs(t, renderChart(t, "gatehouse-system")), "--log-decisions=denied")
	wantArgs(t, deploymentArgs(t, renderChart(t, "gatehouse-system", "logDecisions=all")), "--log-decisions=all")
	if _, err := helm(t, "template", helmRelease, "charts/gatehouse", "--set", "logDecisions=verbose"); err == nil ||
		!strings.Contains(err.Error(), "at '/logDecisions': value must be one of 'all', 'denied', 'none'") {
		t.Fatalf("logDecisions=verbose: %v", err)
	}
}
