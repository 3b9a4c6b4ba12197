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
// callers. [Compile] is how callers compile: the engine's templates, then
// [Templates].PostProcessing (haptic's regex_replace, line by line) over
// the outputs, whatever the engine.
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
// printedText.)
//
// Functions: sprig's, less those that read the clock, the environment, DNS
// or a random source, and with those whose arguments could build a huge
// value bounded (funcs.go has the table, limits.go the limits), plus
//
//   - fail "message": stops the render; the error carries exactly the message
//     as a [*FailError], which the webhook turns into its denial reason;
//   - render "snippet": renders the template snippet of that name with the
//     same data and returns its text (so it can be piped, e.g. to indent);
//   - renderGlob "prefix-*": renders every snippet whose name matches the
//     glob (path.Match syntax), in name order, concatenated;
//   - trusted: ends a printing action whose text is not escaped.
//
// Snippets are also ordinary named templates, so {{ template "name" $ing }}
// includes one with a different dot.
//
// # Escaping and limits
//
// Compile rewrites the parse trees once (rewrite.go): every printing action
// ends in an escaping step refusing a value with a line break or another
// control character with an [*UnsafeValueError], since watched objects are
// written by people other than the config's author and a line of
// haproxy.cfg is a directive. An action ending in trusted, or printing the
// result of render or renderGlob through layout functions only, is not
// escaped (again). Ranges and template inclusions count against the
// rendering's budget and check its context; function bounds and the
// outputs' sizes fail with a [*LimitError].
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
