// Package suite runs the validation tests embedded in an
// HAProxyTemplateConfig (spec.validationTests): each test renders the
// config's templates from fixture objects instead of the cluster's and
// checks the rendering with assertions. The caller converts its CRD types to
// [Test] and [Assertion]; nothing here knows Kubernetes API types.
//
// # Checking before running
//
// [Validate] checks tests statically, as admission of the config itself
// would: fixture keys must be watched resource names, fixture objects need
// a metadata.name (and indexable fields), every assertion a known type, the
// fields its type uses, valid regular expressions and JSONPath, an integer
// match count and a known target. [Runner.Run] does not require Validate to
// have passed: what Validate rejects fails the affected test or assertion
// with a message saying why.
//
// # Running
//
// [Runner.Run] runs the tests one after the other in name order (or only
// the one named). For each test it:
//
//  1. builds a store for every watched resource with that resource's
//     production indexBy, from the test's fixtures merged with those of
//     the _global pseudo-test ([GlobalTest]); a test's own object with the
//     same namespace and name in the same resource replaces _global's. A
//     resource without fixtures gets an empty store. Objects are
//     normalized as stores always normalize them; a missing apiVersion or
//     kind is left missing (the caller may infer it from watchedResources).
//  2. renders the templates once with those stores and the runner's
//     extraContext;
//  3. runs the assertions in order.
//
// _global is never run as a test itself, and [Validate] refuses assertions
// on it (they would silently never run).
//
// A render error fails the test, with [Result.RenderError] holding the
// fail() message alone when a template called fail, else the whole error,
// unless the test has an assertion whose target is rendering_error: such a
// negative test is judged only by its assertions. Those on rendering_error
// see the error's text (the empty text when the rendering succeeded);
// assertions needing the rendering fail with "rendering failed: ...";
// jsonpath assertions still run, since they look at the template context.
//
// # Assertions
//
//   - contains, not_contains: Pattern, a Go regular expression, must (not)
//     match the target's text.
//   - equals: the target's text must be exactly Expected (rendered outputs
//     end with a newline).
//   - match_count: Pattern must match Expected (a decimal integer) times,
//     counting non-overlapping matches.
//   - match_order: each of Patterns must match somewhere after the end of
//     the previous pattern's match; each pattern's first such match counts.
//   - haproxy_valid: [Runner.Check] (haproxy -c) must accept the rendering.
//   - deterministic: a second rendering of the same data must equal the
//     first, every output compared; the first differing one is named.
//   - jsonpath: the expression, evaluated by k8s.io/client-go/util/jsonpath
//     against the template context materialized as plain data,
//     {"resources": {<name>: [objects...]}, "extraContext": {...}}, must
//     print Expected (values joined as kubectl -o jsonpath joins them); an
//     expression finding nothing (a missing field, an index past a list's
//     end) fails with "JSONPath expression returned no results".
//     haptic's spelling {.resources.services.List()[0].metadata.name} is
//     accepted: ".List()" is removed before parsing, the store being a list
//     already in the materialized context; an expression without braces is
//     wrapped in {.<expression>}.
//
// Targets (text assertions only): "" or haproxy.cfg, map:<name>,
// file:<name>, cert:<name> and rendering_error. A map, file or certificate
// the rendering does not have fails the assertion, naming the ones it has.
//
// Failure messages say what was found, e.g. `pattern "x" not found in
// haproxy.cfg (812 bytes)` or `expected 2 matches of "x" in map:hosts.map,
// got 3`, and are bounded to about 300 characters. [Report.Message] formats
// failed tests as the admission denial reason, bounded to about 4 KB.
//
// # haptic's dialect
//
// haptic's configs (haproxy-haptic.org) carry tests written for haptic's
// own runner, which differs from the rules above: [Runner].Dialect
// [DialectHaptic] gives them haptic's verdicts (_global run as a test, a
// missing target read as haproxy.cfg, crt-list: targets, match_order on
// independent first matches, a failed rendering's assertions run against
// empty outputs with haptic's error chain, per-test extraContext); see
// [DialectHaptic] for the list.
//
// # Errors and time
//
// A failed test is a result, not an error. Run returns an error when the
// tests could not be run to the end: the test named by only does not
// exist, an indexBy does not compile, the checker reports an
// infrastructure failure, or ctx ended (then wrapped as "validation tests
// did not finish in time: ..."); the report then holds the tests finished
// so far.
package suite
