package configcheck

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/haproxy"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// failsAlready reports whether the live state without the change fails the
// way the change's rendering does. Then the change does not cause the
// failure: refusing it would block every team's changes behind one
// object that got in while the webhook was off or under Ignore, and would
// protect nothing, since the published rendering stays the last accepted
// one until the failure is fixed.
func (m *Module) failsAlready(ctx context.Context, st *configState, live map[string]render.IndexedStore, proposed verdict) bool {
	baseline := m.judge(ctx, st.compiled, dataOf(live), st.failedTests())
	return baseline.undecided == "" && sameFailure(proposed, baseline)
}

// sameFailure reports whether proposed fails for no reason current does
// not fail for already. A render stops at its first failure, so the
// messages must be equal; haproxy -c reports every alert, so each of
// proposed's alerts must be among current's, line numbers aside (an
// object added above a broken line moves it). An alert list cut short
// hides alerts, and is never taken as the same.
func sameFailure(proposed, current verdict) bool {
	if proposed.denial == "" || current.denial == "" || proposed.phase != current.phase {
		return false
	}
	if proposed.phase != phaseHAProxy {
		return proposed.denial == current.denial
	}
	if alertsLeftOut.MatchString(proposed.denial) || alertsLeftOut.MatchString(current.denial) {
		return false
	}
	known := map[string]bool{}
	for _, line := range strings.Split(withoutLineNumbers(current.denial), "\n") {
		known[line] = true
	}
	for _, line := range strings.Split(withoutLineNumbers(proposed.denial), "\n") {
		if !known[line] {
			return false
		}
	}
	return true
}

var (
	alertsLeftOut = regexp.MustCompile(`\(\d+ more alerts not shown\)`)
	fileLine      = regexp.MustCompile(`(\.(?:cfg|map|pem|lst|txt|http)):\d+`)
	quotedLine    = regexp.MustCompile(`\bline \d+\b`)
)

func withoutLineNumbers(s string) string {
	return quotedLine.ReplaceAllString(fileLine.ReplaceAllString(s, "$1:N"), "line N")
}

// preexistingWarnings tell the person whose change was admitted what
// fails and that their change was checked only up to it.
func preexistingWarnings(key types.NamespacedName, denial string) []string {
	// The first line that names the failure: for haproxy -c, its first
	// alert.
	first, rest, _ := strings.Cut(denial, "\n")
	if first == haproxyRejects || first == haproxy.PolicyRefuses {
		first, _, _ = strings.Cut(rest, "\n")
	}
	return []string{
		bounded(fmt.Sprintf("HAProxyTemplateConfig %s fails without this change too, so the change was admitted, checked only up to that failure; "+
			"nothing is published until it is fixed", key), 250),
		bounded("the failure: "+first, 250),
	}
}
