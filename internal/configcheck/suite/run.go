package suite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// Run runs tests in name order, one after the other, and reports every
// test's outcome; a failed test is in the report, not an error. only, when
// not empty, names the one test to run. _global is never run: its fixtures
// are merged into every test's, a test's own object of the same namespace
// and name in the same watched resource replacing _global's.
//
// Run returns an error when only names no test, when an indexBy does not
// compile, when the checker fails (its err, not an invalid config), and
// when ctx ends before the last test finished: the error then wraps ctx's
// ("validation tests did not finish in time: ...") and the report holds the
// tests finished so far.
func (r *Runner) Run(ctx context.Context, tests map[string]Test, only string) (Report, error) {
	if r.Renderer == nil {
		return Report{}, errors.New("validation tests: no renderer")
	}
	names, err := selectTests(tests, only, r.Dialect)
	if err != nil {
		return Report{}, err
	}
	indexers := make(map[string]*render.Indexer, len(r.IndexBy))
	for _, resource := range slices.Sorted(maps.Keys(r.IndexBy)) {
		indexer, err := render.NewIndexer(r.IndexBy[resource])
		if err != nil {
			return Report{}, fmt.Errorf("validation tests: watched resource %q: %w", resource, err)
		}
		indexers[resource] = indexer
	}
	global := tests[GlobalTest]

	var report Report
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return report, notInTime(err)
		}
		result, err := r.runTest(ctx, name, tests[name], global.Fixtures, indexers)
		if err != nil {
			return report, err
		}
		report.Results = append(report.Results, result)
		report.Total++
		if !result.Passed {
			report.Failed++
		}
	}
	return report, nil
}

// selectTests returns the names of the tests to run, sorted: every test
// but _global, which haptic's dialect runs too.
func selectTests(tests map[string]Test, only string, dialect Dialect) ([]string, error) {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(tests)) {
		if name != GlobalTest || dialect == DialectHaptic {
			names = append(names, name)
		}
	}
	switch {
	case only == "":
		return names, nil
	case only == GlobalTest && dialect != DialectHaptic:
		return nil, fmt.Errorf("%s is not a test: it only contributes fixtures to every test", GlobalTest)
	case !hasKey(tests, only):
		return nil, fmt.Errorf("no validation test named %q (tests: %s)", only, listOrNone(names))
	}
	return []string{only}, nil
}

func hasKey[V any](m map[string]V, key string) bool {
	_, ok := m[key]
	return ok
}

func notInTime(err error) error {
	return fmt.Errorf("validation tests did not finish in time: %w", err)
}

// testRun is one test's rendering and what its assertions need.
type testRun struct {
	runner *Runner
	ctx    context.Context
	data   render.Data
	output render.Output
	// renderErr is the rendering's error, renderError its text as
	// Result.RenderError has it.
	renderErr   error
	renderError string
	// context is the materialized template context, built on the first
	// jsonpath assertion.
	context map[string]any
}

// runTest runs one test. Its error stops the run: ctx ended or the checker
// failed.
func (r *Runner) runTest(ctx context.Context, name string, test Test, global map[string][]map[string]any, indexers map[string]*render.Indexer) (Result, error) {
	start := time.Now()
	result := Result{Name: name, Description: test.Description}

	stores, err := buildStores(test.Fixtures, global, indexers)
	if err != nil {
		result.Failures = []Failure{{Assertion: "fixtures", Message: bound(err.Error())}}
		result.Duration = time.Since(start)
		return result, nil
	}
	run := &testRun{runner: r, ctx: ctx, data: render.Data{Resources: stores, ExtraContext: mergeExtraContext(r.ExtraContext, test.ExtraContext),
		CurrentConfig: test.CurrentConfig, HTTPResources: test.HTTPResources}}
	run.output, run.renderErr = r.Renderer.Render(ctx, run.data)
	if run.renderErr == nil && r.OnRendered != nil {
		r.OnRendered(name, run.output)
	}
	if run.renderErr != nil {
		if err := ctx.Err(); err != nil {
			return result, notInTime(err)
		}
		run.renderError = renderErrorText(run.renderErr)
		if r.Dialect == DialectHaptic {
			run.renderError = hapticRenderErrorText(run.renderErr)
		}
		result.RenderError = run.renderError
	}

	if run.renderErr != nil && !expectsRenderingError(test.Assertions) && r.Dialect != DialectHaptic {
		// The render error is the test's failure; assertions on a
		// rendering that does not exist would only repeat it.
		result.Duration = time.Since(start)
		return result, nil
	}
	for _, assertion := range test.Assertions {
		message, err := run.assert(assertion)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return result, notInTime(ctxErr)
			}
			return result, fmt.Errorf("validation test %q: %w", name, err)
		}
		if message != "" {
			result.Failures = append(result.Failures, Failure{Assertion: assertionLabel(assertion), Message: bound(message)})
		}
	}
	// haptic: a rendering that failed fails the test unless the test
	// expects it; its assertions ran against empty outputs all the same.
	result.Passed = len(result.Failures) == 0 && (run.renderErr == nil || expectsRenderingError(test.Assertions))
	result.Duration = time.Since(start)
	return result, nil
}

// renderErrorText is a render error as tests see it: the fail() message
// alone, or the whole error.
func renderErrorText(err error) string {
	var failErr *render.FailError
	if errors.As(err, &failErr) {
		return failErr.Message
	}
	return err.Error()
}

// expectsRenderingError reports whether a test is a negative test: one of
// its assertions looks at the rendering error.
func expectsRenderingError(assertions []Assertion) bool {
	for _, assertion := range assertions {
		if assertion.Target == TargetRenderingError {
			return true
		}
	}
	return false
}

func assertionLabel(a Assertion) string {
	if a.Description != "" {
		return a.Description
	}
	if a.Type == "" {
		return "(no type)"
	}
	return a.Type
}

// buildStores builds a store for every watched resource from the test's
// fixtures merged with _global's: a global object is left out when the
// test has an object of the same namespace and name in that resource.
// NewMemoryStore normalizes the objects (copying them), so fixtures are
// never changed.
func buildStores(fixtures, global map[string][]map[string]any, indexers map[string]*render.Indexer) (map[string]render.Store, error) {
	for _, source := range []map[string][]map[string]any{fixtures, global} {
		for _, resource := range slices.Sorted(maps.Keys(source)) {
			if _, ok := indexers[resource]; !ok {
				return nil, fmt.Errorf("fixtures for %q, which is not a watched resource (watched: %s)",
					resource, listOrNone(slices.Sorted(maps.Keys(indexers))))
			}
		}
	}
	stores := make(map[string]render.Store, len(indexers))
	for resource, indexer := range indexers {
		own := fixtures[resource]
		overridden := make(map[string]bool, len(own))
		for _, obj := range own {
			overridden[identityString(obj)] = true
		}
		objs := make([]map[string]any, 0, len(own)+len(global[resource]))
		for _, obj := range global[resource] {
			if !overridden[identityString(obj)] {
				objs = append(objs, obj)
			}
		}
		objs = append(objs, own...)
		store, err := render.NewMemoryStore(indexer, objs...)
		if err != nil {
			return nil, fmt.Errorf("fixtures for %q: %w", resource, err)
		}
		stores[resource] = store
	}
	return stores, nil
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
