package suite

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// GlobalTest is the name of the pseudo-test whose fixtures are merged into
// every test. It is never run itself.
const GlobalTest = "_global"

// Assertion types.
const (
	TypeHAProxyValid  = "haproxy_valid"
	TypeContains      = "contains"
	TypeNotContains   = "not_contains"
	TypeEquals        = "equals"
	TypeMatchCount    = "match_count"
	TypeMatchOrder    = "match_order"
	TypeJSONPath      = "jsonpath"
	TypeDeterministic = "deterministic"
)

// Target forms. A map, file or certificate target is the prefix followed by
// the output's name, e.g. "map:hosts.map".
const (
	TargetHAProxyConfig  = "haproxy.cfg"
	TargetRenderingError = "rendering_error"
	TargetMapPrefix      = "map:"
	TargetFilePrefix     = "file:"
	TargetCertPrefix     = "cert:"
)

// Test is one embedded validation test (spec.validationTests[name]).
type Test struct {
	// Name is informational: Run and Validate name a test by its key in
	// the tests map.
	Name, Description string
	// Fixtures are the objects of each watched resource, by watched name.
	Fixtures map[string][]map[string]any
	// Assertions run in order against the test's rendering.
	Assertions []Assertion
	// ExtraContext is merged over the runner's extraContext, key by key,
	// for this test (haptic's validationTests[].extraContext).
	ExtraContext map[string]any
	// CurrentConfig and HTTPResources are render.Data's for this test
	// (haptic's validationTests[].currentConfig and httpResources).
	CurrentConfig string
	HTTPResources map[string]string
}

// Assertion is one check of a test.
type Assertion struct {
	// Type is one of haproxy_valid, contains, not_contains, equals,
	// match_count, match_order, jsonpath, deterministic.
	Type        string
	Description string
	// Target is what a text assertion looks at: "" or "haproxy.cfg",
	// "map:<name>", "file:<name>", "cert:<name>" or "rendering_error".
	Target string
	// Pattern is the regular expression of contains, not_contains and
	// match_count.
	Pattern string
	// Expected is the text of equals and jsonpath, and the count (an
	// integer written as a string) of match_count.
	Expected string
	// JSONPath is the expression of a jsonpath assertion.
	JSONPath string
	// Patterns are the regular expressions of match_order, in the order
	// they must appear.
	Patterns []string
}

// CheckFunc runs haproxy -c on a rendering. It returns valid, and the
// simplified message when invalid; err reports an infrastructure failure
// (the checker is busy, ctx ended), which says nothing about the config.
type CheckFunc func(ctx context.Context, out render.Output) (valid bool, message string, err error)

// Runner runs a config's validation tests.
type Runner struct {
	// Renderer is the config's compiled templates.
	Renderer render.Renderer
	// IndexBy holds every watched resource name and its indexBy. Every
	// test's stores are built with these indexers, so fixtures are looked
	// up exactly as live objects are; a watched resource without fixtures
	// gets an empty store.
	IndexBy map[string][]string
	// ExtraContext is templatingSettings.extraContext.
	ExtraContext map[string]any
	// Check validates a rendering with haproxy. When nil, every
	// haproxy_valid assertion fails with "no haproxy checker".
	Check CheckFunc
	// OnRendered, when set, receives each test's rendering (the offline
	// CLI's --dump-rendered).
	OnRendered func(test string, out render.Output)
	// Dialect is whose test semantics apply (Gatehouse's by default).
	Dialect Dialect
}

// Report is the outcome of a run.
type Report struct {
	// Results are the tests run, in name order.
	Results []Result
	// Total is the number of tests run; Failed of those that failed.
	Total, Failed int
}

// Result is the outcome of one test.
type Result struct {
	Name, Description string
	Passed            bool
	// RenderError is the rendering's error: the fail() message alone when
	// a template called fail, else the error's text. Empty when the
	// rendering succeeded.
	RenderError string
	// Failures are the failed assertions, in the test's order.
	Failures []Failure
	Duration time.Duration
}

// Failure is one failed assertion.
type Failure struct {
	// Assertion is the assertion's description, or its type when it has
	// none.
	Assertion string
	// Message says what was found instead of what was expected; it is at
	// most about 300 characters.
	Message string
}
