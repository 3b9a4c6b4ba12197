package configcheck

import (
	"context"
	"fmt"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/haproxy"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// wayOut reports whether a change refused over current (the live state
// with the changes admitted before it) is admitted all the same, because
// current fails already and the change adds no failure to it: it returns
// current's failure, for the warnings. Refusing such a change protects
// nothing (the published rendering stays the last accepted one until the
// failure is fixed) and would block every team behind one object that got
// in while the webhook was off, under Ignore, or before its config.
//
// A DELETE out of a failing state is always admitted: removing an object
// is how a failure is fixed, by its owner or an administrator, even when
// it leaves or uncovers another one; the status names what still fails.
// Any other change must add no failure: a render stops at its first
// failure, so its message must be current's; haproxy -c says every alert,
// so each of the change's must be among current's (addsNoFailure). An
// UPDATE may instead fail as current does without its object at all: a
// fix of the object a render stops at moves the stop to the next failure.
func (m *Module) wayOut(ctx context.Context, st *configState, current map[string]render.IndexedStore, watched string, op render.Operation, obj map[string]any, proposed verdict) (string, bool) {
	baseline := m.judge(ctx, st.compiled, dataOf(current), st.failedTests())
	if baseline.undecided != "" || baseline.denial == "" {
		return "", false
	}
	if op == render.OperationDelete || addsNoFailure(proposed, baseline) {
		return baseline.denial, true
	}
	if op != render.OperationUpdate {
		return "", false
	}
	// A fix of the object a render stops at moves the stop to the next
	// failure: the change adds nothing when the state fails the same with
	// the object gone altogether.
	without, err := render.Overlay(current[watched], render.OperationDelete, obj)
	if err != nil {
		return "", false
	}
	removed := make(map[string]render.IndexedStore, len(current))
	for name, s := range current {
		removed[name] = s
	}
	removed[watched] = without
	if v := m.judge(ctx, st.compiled, dataOf(removed), st.failedTests()); v.undecided == "" && addsNoFailure(proposed, v) {
		return baseline.denial, true
	}
	return "", false
}

// addsNoFailure reports whether proposed fails for no reason current does
// not fail for already. A render stops at its first failure, so the
// messages must be equal; haproxy -c reports every alert, so each of
// proposed's alerts must be among current's as many times (three backends
// of one name are two alerts), line numbers aside (an object added above a
// broken line moves it). A list of alerts that is not complete (more than
// haproxy.MaxAlerts, or haproxy's output cut) may hide the alert the change
// adds, and is never taken as the same.
func addsNoFailure(proposed, current verdict) bool {
	if proposed.denial == "" || current.denial == "" || proposed.phase != current.phase {
		return false
	}
	if proposed.phase != phaseHAProxy || len(proposed.alerts.Keys) == 0 && proposed.alerts.Complete() {
		return proposed.denial == current.denial
	}
	return proposed.alerts.Within(current.alerts)
}

// failureWarningPrefix starts the warning that quotes the failure a change
// was admitted over (forCaller redacts it).
const failureWarningPrefix = "the failure: "

// preexistingWarnings tell the person whose change was admitted what
// fails and that their change was checked only up to it.
func preexistingWarnings(key spec.Key, denial string) []string {
	// The first line that names the failure: for haproxy -c, its first
	// alert.
	first, rest, _ := strings.Cut(denial, "\n")
	if first == haproxyRejects || first == haproxy.PolicyRefuses {
		first, _, _ = strings.Cut(rest, "\n")
	}
	return []string{
		guard.Bounded(fmt.Sprintf("HAProxyTemplateConfig %s fails without this change too, so the change was admitted, checked only up to that failure; "+
			"%s", key, key.UntilFixed("it is fixed", false)), 250),
		guard.Bounded(failureWarningPrefix+first, 250),
	}
}
