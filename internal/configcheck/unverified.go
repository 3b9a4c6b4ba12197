package configcheck

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

// reasonWithoutState is the config webhook's denial reason for a config,
// written by a caller Gatehouse cannot verify, whose rendering without the
// cluster's state (over empty watched resources, over its tests' fixtures)
// fails.
const reasonWithoutState = "without-state"

// unverifiedShare is the fair share (party and class) that the checks of a
// config review from a caller Gatehouse cannot verify are charged to: any
// client reaching the port may have posted it, so it waits in the class of
// such reviews (fair.DryRun), never in one the API server's changes are
// served from, and in a party of its own, not the namespace's verified
// authors'.
//
// Bounds: the only use of the fair queues by this check; the per-party
// bounds (issue 35, item 3) may fold it into their parties.
func unverifiedShare(namespace string) (party string, class fair.Class) {
	return "unverified reviews of " + guard.AuthorParty(namespace), fair.DryRun
}

// keptRenderings collects the successful renderings of a config's embedded
// tests as they run (runTestsKeeping), one after the other.
type keptRenderings map[string]render.Output

func (k keptRenderings) keep(test string, out render.Output) { k[test] = out }

// checkWithoutState checks a config whose caller cannot be verified, in
// place of the rendering of the cluster's current state (currentstate.go),
// which would show whoever posted the review what the identity it claims
// may read. What it renders reveals nothing of the cluster: the config
// over empty watched resources, and over each of its tests' fixtures
// (rendered already by its tests: rendered holds them). Each rendering
// passes the check policy and haproxy -c, as every admission of a watched
// object will, or the config is refused: a config whose rendering fails
// whatever the cluster holds (a directive haproxy rejects, a template that
// always calls fail) would validate and publish nothing.
//
// A test asserting a rendering error (a negative test) is not checked: its
// fixtures are meant to fail. A config whose rendering of empty watched
// resources fails is admitted, with warnings, when a test's fixtures render
// a configuration haproxy accepts: it may only wait for objects, as
// decideCurrentState admits it over a cluster without them.
//
// Bounds: the renderings and checks are those of the tests (already
// rendered) and one more rendering, within the config webhook's deadline,
// under the share admitConfig set (unverifiedShare).
func (m *Module) checkWithoutState(ctx context.Context, key spec.Key, c *spec.Compiled, rendered keptRenderings) currentState {
	proof := ""
	for _, name := range slices.Sorted(maps.Keys(rendered)) {
		if test, ok := c.Tests[name]; !ok || negativeTest(test) {
			continue
		}
		v := m.checkRendering(ctx, c.Dialect, rendered[name], "")
		switch {
		case v.Undecided != "":
			return currentState{undecided: fmt.Sprintf("%s (checking the rendering of test %q's fixtures)", v.Undecided, name)}
		case v.Denial != "":
			return currentState{denial: fmt.Sprintf("%sthe config's rendering of test %q's fixtures fails, so it would be refused by every admission over such objects: %s",
				withoutStatePrefix, name, v.Denial)}
		}
		if proof == "" {
			proof = name
		}
	}
	stores, err := emptyStores(c)
	if err != nil {
		return currentState{denial: withoutStatePrefix + err.Error()}
	}
	return decideWithoutState(key, m.judge(ctx, c, judge.DataOf(stores), ""), proof)
}

// withoutStatePrefix opens a denial of checkWithoutState: why the config
// was rendered without the cluster's state.
const withoutStatePrefix = "Gatehouse cannot verify that this request came from the API server (it serves webhooks without client certificates), " +
	"so the config was rendered over empty watched resources and over its tests' fixtures, not over the cluster's objects; "

// decideWithoutState turns the verdict v on config key's rendering of
// empty watched resources into the admission's outcome; proof names a test
// whose fixtures render a configuration haproxy accepts ("" when none).
func decideWithoutState(key spec.Key, v judge.Verdict, proof string) currentState {
	switch {
	case v.Undecided != "":
		return currentState{undecided: v.Undecided + " (rendering this config over empty watched resources)"}
	case v.Denial == "":
		return currentState{}
	case proof != "":
		return currentState{warnings: []string{
			guard.Bounded(fmt.Sprintf("HAProxyTemplateConfig %s does not render without watched objects, so %s: %s", key, key.UntilFixed("the cluster holds what it needs", true), firstFailureLine(v.Denial)), 250),
			guard.Bounded(fmt.Sprintf("admitted because test %q renders a configuration haproxy -c accepts from its fixtures", proof), 250),
		}}
	}
	return currentState{denial: withoutStatePrefix + "its rendering of empty watched resources fails: " + v.Denial +
		"\n(if the config needs objects to render, add a validation test whose fixtures hold them; such a config is then admitted with a warning)"}
}

// emptyStores are c's watched resources holding no object.
func emptyStores(c *spec.Compiled) (map[string]render.IndexedStore, error) {
	stores := make(map[string]render.IndexedStore, len(c.Watched))
	for name, w := range c.Watched {
		store, err := render.NewMemoryStore(w.Indexer)
		if err != nil {
			return nil, fmt.Errorf("watched resource %s: %w", name, err)
		}
		stores[name] = store
	}
	return stores, nil
}

// negativeTest says whether test expects its rendering to fail: one of its
// assertions looks at the rendering error (as the suite runs it).
func negativeTest(test suite.Test) bool {
	return slices.ContainsFunc(test.Assertions, func(a suite.Assertion) bool { return a.Target == suite.TargetRenderingError })
}
