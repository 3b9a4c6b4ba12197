// Package render turns an HAProxyTemplateConfig's templates and a view of the
// watched resources into haproxy.cfg and its auxiliary files (maps, general
// files, SSL certificates). It is the first phase of configcheck's dry-run:
// pure, in-memory and fast, with no Kubernetes client or informer in it, so
// the admission path, the publisher and the offline CLI render identically.
//
// # Engines
//
// [Engine] compiles a [Templates] set once into a [Renderer]; the Renderer is
// safe for concurrent use and renders a [Data] into an [Output]. Only the
// engine [EngineGoTemplate] exists: Go text/template with sprig's functions,
// the language Helm users already write. templatingSettings.engine names the
// engine through [NewEngine], so another can be added without touching
// callers.
//
// # The template contract
//
// The data a template sees is a map with two keys:
//
//   - .resources.<watched name> is a [Store] with the methods
//     List (every object, ordered by namespace then name),
//     Fetch key... (the objects whose indexBy keys start with the given keys,
//     in the same order) and GetSingle key... (the one matching object, or
//     nil; more than one is a render error naming the keys).
//   - .extraContext is templatingSettings.extraContext.
//
// Objects are plain maps (the unstructured content), so $ing.metadata.name and
// $rule.http.paths work. Whole numbers are stored as int64 and print as 8080,
// never 8.08e+03. A missing field is empty: {{ $ing.spec.nothing.deeper }}
// prints nothing and does not stop the render. (The templates run with
// text/template's default missingkey option, not missingkey=zero: with
// map[string]any objects, zero turns a missing key into a nil interface and
// the next field lookup on it fails with "nil pointer evaluating", whereas the
// default lets the chain continue; what a printed action would show for the
// missing value, "<no value>", is replaced by empty output, see
// emptyWhenMissing.)
//
// Functions: sprig's (without env, expandenv and getHostByName, which would
// leak the controller's environment into a rendered config or make rendering
// depend on DNS), plus
//
//   - fail "message": stops the render; the error carries exactly the message
//     as a [*FailError], which the webhook turns into its denial reason;
//   - render "snippet": renders the template snippet of that name with the
//     same data and returns its text (so it can be piped, e.g. to indent);
//   - renderGlob "prefix-*": renders every snippet whose name matches the
//     glob (path.Match syntax), in name order, concatenated.
//
// Snippets are also ordinary named templates, so {{ template "name" $ing }}
// includes one with a different dot.
//
// Every output ends with exactly one newline.
//
// # Stores
//
// [MemoryStore] holds the objects of one watched resource indexed by that
// entry's indexBy expressions (see [NewIndexer] for their syntax). [Overlay]
// shows a base store as it would be after an admitted CREATE, UPDATE or
// DELETE, keying the proposed object with the base's own [Indexer], so a
// Fetch by any index (a label, say) sees the change.
//
// Objects handed out by stores are shared, not copied: templates must treat
// them as read-only (sprig's set and unset would otherwise change the store).
package render
