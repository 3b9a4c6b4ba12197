package configcheck

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/ondemand"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

// reasonCurrentState is the config webhook's denial reason for a config
// whose rendering of the cluster's current state fails.
const reasonCurrentState = "current-state"

// currentState is the outcome of rendering a config over the cluster's
// current state at its admission.
type currentState struct {
	// denial refuses the config; warnings admit it with them; undecided
	// says why no decision could be made in time.
	denial, undecided string
	warnings          []string
}

// checkCurrentState renders c over the cluster's current state, as its
// watched resources select it, and checks the rendering (policy and
// haproxy -c), as every admission of a watched object will. A config that
// fails there would validate and publish nothing: every later change would
// be judged against a failing state. It is refused with the failure, except
//
//   - when the failure may only wait for objects: a watched resource
//     selects no object yet, and a passing embedded test with a
//     haproxy_valid assertion shows that the templates make a
//     configuration haproxy accepts from fixtures. It is admitted with
//     warnings saying so (nothing is published until the state renders);
//   - on an UPDATE, when the stored config, rendered over the same objects,
//     fails the same way: the change does not cause the failure, and
//     refusing it could block the fix.
//
// It runs after the author's rights were checked: the rendering, and a
// denial quoting it, read only what the author may read.
//
// Bounds: the rendering has what is left of the config webhook's deadline
// (its first rendering may have to start a render worker, seconds on a
// loaded node); the render pool's own time budget and memory limit apply
// as to every rendering; config admissions render on at most
// RenderWorkers-1 workers at once (at least one; configChecks, held by
// admitConfig), so a burst of config writes or dry runs leaves a render
// worker to the watched objects' admissions.
func (m *Module) checkCurrentState(ctx context.Context, key spec.Key, author authenticationv1.UserInfo, c *spec.Compiled, report suite.Report) currentState {
	lists := map[watchKey][]unstructured.Unstructured{}
	stores, empty, err := m.currentStores(ctx, c, lists)
	if err != nil {
		return currentState{undecided: "configcheck: the cluster's current state could not be read in time to check the config's rendering: " + err.Error()}
	}
	// Its on-demand objects are fetched for its writer, who becomes its
	// author.
	fetched, err := ondemand.NewSet(c, m.onDemandFetcher(author, true), false)
	if err != nil {
		return currentState{undecided: "configcheck: " + err.Error()}
	}
	fetched.AddStores(stores)
	v := m.judge(ondemand.WithSet(ctx, fetched), c, judge.DataOf(stores), "")
	return decideCurrentState(key, v, empty, validTest(c, report), func() bool {
		st := m.state(key)
		if st == nil || st.compiled == nil {
			return false
		}
		// The stored config over the same lists: the two renderings
		// differ by the config alone.
		stored, _, err := m.currentStores(ctx, st.compiled, lists)
		if err != nil {
			return false
		}
		storedFetched := st.onDemand.Uncached()
		storedFetched.AddStores(stored)
		before := m.judge(ondemand.WithSet(ctx, storedFetched), st.compiled, judge.DataOf(stored), "")
		return before.Undecided == "" && judge.AddsNoFailure(v, before)
	})
}

// decideCurrentState turns the verdict v on config key's rendering of the
// current state into the admission's outcome: empty names the watched
// resources selecting no object, proof a passing test asserting
// haproxy_valid (""), and failsAlready says whether the stored config fails
// the same way (asked last: it renders).
func decideCurrentState(key spec.Key, v judge.Verdict, empty []string, proof string, failsAlready func() bool) currentState {
	switch {
	case v.Undecided != "":
		return currentState{undecided: v.Undecided + " (rendering the cluster's current state with this config)"}
	case v.Denial == "":
		return currentState{}
	case len(empty) > 0 && proof != "":
		return currentState{warnings: []string{
			guard.Bounded(fmt.Sprintf("HAProxyTemplateConfig %s does not render the cluster's current state yet, so %s: %s", key, key.UntilFixed("it does", true), firstFailureLine(v.Denial)), 250),
			guard.Bounded(fmt.Sprintf("admitted because watched resource %s selects no object yet and test %q renders a configuration haproxy -c accepts from its fixtures", strings.Join(empty, ", "), proof), 250),
		}}
	case failsAlready():
		return currentState{warnings: judge.PreexistingWarnings(key, v.Denial)}
	}
	denial := "the config's rendering of the cluster's current state fails, so it would validate and publish nothing: " + v.Denial
	if len(empty) > 0 {
		denial += fmt.Sprintf("\n(watched resource %s selects no object yet: if the config needs such objects to render, add a validation test whose fixtures hold them and that asserts haproxy_valid; such a config is then admitted with a warning)", strings.Join(empty, ", "))
	}
	return currentState{denial: denial}
}

// firstFailureLine is the first line naming a failure: for haproxy -c and
// the policy, their first alert or violation.
func firstFailureLine(denial string) string {
	w := judge.PreexistingWarnings(spec.Key{}, denial)
	return strings.TrimPrefix(w[1], "the failure: ")
}

// validTest names a passing test of report that asserts haproxy_valid: its
// fixtures render a configuration haproxy -c accepts. "" when none does.
func validTest(c *spec.Compiled, report suite.Report) string {
	for _, r := range report.Results {
		if !r.Passed {
			continue
		}
		if slices.ContainsFunc(c.Tests[r.Name].Assertions, func(a suite.Assertion) bool { return a.Type == suite.TypeHAProxyValid }) {
			return r.Name
		}
	}
	return ""
}

// currentStores builds c's stores from the cluster's current state, and
// names the watched resources that select no object. A kind no API serves
// (yet) is an empty store. Objects come from the informer of another
// config watching the same kind with the same label selector when one has
// synced, else from the API server's list (the config's own informers
// start only once it is stored); either way they are filtered by the
// watched resource's selectors and stripped as its store would keep them.
// lists keeps what was listed, by kind and label selector, so that two
// configs built from it see the same objects.
func (m *Module) currentStores(ctx context.Context, c *spec.Compiled, lists map[watchKey][]unstructured.Unstructured) (map[string]render.IndexedStore, []string, error) {
	stores := make(map[string]render.IndexedStore, len(c.Watched))
	var empty []string
	nsLabels := m.namespaceLabelsOnce()
	for _, name := range slices.Sorted(maps.Keys(c.Watched)) {
		w := c.Watched[name]
		var objs []map[string]any
		if gvk, scoped, err := m.resolve(w.GVR); err == nil && !w.OnDemand {
			lk := watchKey{gvk: gvk, labels: w.Labels.String()}
			items, ok := lists[lk]
			if !ok {
				items, err = m.listWatched(ctx, gvk, w)
				switch {
				case apierrors.IsForbidden(err), apierrors.IsNotFound(err), meta.IsNoMatchError(err):
					// Gatehouse may not read the kind (the chart's
					// watchedResources), or it went away: its store
					// stays empty, as the config's informer's would.
					items = nil
				case err != nil:
					return nil, nil, fmt.Errorf("watched resource %s: %w", name, err)
				}
				lists[lk] = items
			}
			for i := range items {
				item := &items[i]
				if w.SelectsIn(item.Object, item.GetNamespace(), scoped, nsLabels) {
					objs = append(objs, w.Stored(item.Object))
				}
			}
		}
		store, err := render.NewMemoryStore(w.Indexer, objs...)
		if err != nil {
			return nil, nil, fmt.Errorf("watched resource %s: %w", name, err)
		}
		stores[name] = store
		if len(objs) == 0 {
			empty = append(empty, name)
		}
	}
	return stores, empty, nil
}

// listWatched lists kind gvk under w's label selector: from a synced shared
// informer when there is one, else from the API server.
func (m *Module) listWatched(ctx context.Context, gvk schema.GroupVersionKind, w *spec.Watched) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if cached := m.watches.synced(gvk, w.Labels); cached != nil {
		err := cached.List(ctx, list)
		// A watch released meanwhile lists nothing: read the API
		// server then.
		if err == nil && cached.Informer() != nil {
			return list.Items, nil
		}
	}
	if err := m.host.APIReader().List(ctx, list, client.MatchingLabelsSelector{Selector: w.Labels}); err != nil {
		return nil, err
	}
	return list.Items, nil
}
