package configcheck

import (
	"context"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
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
func (m *Module) wayOut(ctx context.Context, st *configState, current map[string]render.IndexedStore, watched string, op render.Operation, obj map[string]any, proposed judge.Verdict) (string, bool) {
	baseline := m.judge(ctx, st.compiled, judge.DataOf(current), st.failedTests())
	if baseline.Undecided != "" || baseline.Denial == "" {
		return "", false
	}
	if op == render.OperationDelete || judge.AddsNoFailure(proposed, baseline) {
		return baseline.Denial, true
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
	if v := m.judge(ctx, st.compiled, judge.DataOf(removed), st.failedTests()); v.Undecided == "" && judge.AddsNoFailure(proposed, v) {
		return baseline.Denial, true
	}
	return "", false
}
