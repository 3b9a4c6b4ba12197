package configcheck

import (
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

func hapticTestdata(t testing.TB) *hapticv1alpha1.HAProxyTemplateConfig {
	t.Helper()
	data, err := os.ReadFile("testdata/haptic/haproxytemplateconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &hapticv1alpha1.HAProxyTemplateConfig{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestHapticSpecReadsAsGatehouses: haptic's chart config (every library)
// converts without error: watched resources with their selectors parsed,
// templates, the base library's post-processing, each test with its own
// extraContext, haptic's dialect and engine.
func TestHapticSpecReadsAsGatehouses(t *testing.T) {
	in := hapticTestdata(t)
	spec, extras, errs := spec.FromHaptic(&in.Spec)
	if len(errs) > 0 {
		t.Fatalf("haptic's own config: %v", errs.ToAggregate())
	}
	if extras.Dialect != suite.DialectHaptic || spec.TemplatingSettings.Engine != "scriggo" {
		t.Errorf("dialect %v, engine %q", extras.Dialect, spec.TemplatingSettings.Engine)
	}
	if len(spec.WatchedResources) != len(in.Spec.WatchedResources) || len(spec.TemplateSnippets) != 114 || len(spec.ValidationTests) != 71 {
		t.Errorf("watched %d, snippets %d, tests %d", len(spec.WatchedResources), len(spec.TemplateSnippets), len(spec.ValidationTests))
	}
	if got := extras.PostProcessing["haproxyConfig"]; len(got) != 1 || got[0].Pattern != "^[ ]+" || got[0].Replace != "  " {
		t.Errorf("haproxyConfig's post-processing: %+v", got)
	}
	if len(extras.TestExtraContext) != 5 {
		t.Errorf("%d tests with extraContext, want 5", len(extras.TestExtraContext))
	}
	for name, w := range in.Spec.WatchedResources {
		got := spec.WatchedResources[name]
		if got.APIVersion != w.APIVersion || got.Resources != w.Resources || got.FieldSelector != w.FieldSelector || len(got.IndexBy) != len(w.IndexBy) {
			t.Errorf("watched %s: %+v from %+v", name, got, w)
		}
	}
}

// TestHapticSelectorsAndPostProcessingAreChecked: haptic's string
// selectors are parsed (a bad one named at haptic's field), and a
// post-processor haptic does not have is refused rather than skipped.
func TestHapticSelectorsAndPostProcessingAreChecked(t *testing.T) {
	in := &hapticv1alpha1.HAProxyTemplateConfigSpec{
		WatchedResources: map[string]hapticv1alpha1.WatchedResource{
			"ingresses": {APIVersion: "networking.k8s.io/v1", Resources: "ingresses", LabelSelector: "app in (a,b),tier!=x", NamespaceSelector: "team=a"},
			"services":  {APIVersion: "v1", Resources: "services", LabelSelector: "app in (("},
		},
		HAProxyConfig: hapticv1alpha1.Template{Template: "global", PostProcessing: []hapticv1alpha1.PostProcessor{
			{Type: "regex_replace", Params: map[string]string{"pattern": "a", "replace": "b"}},
			{Type: "exec", Params: map[string]string{"pattern": "a"}},
		}},
	}
	cfgSpec, _, errs := spec.FromHaptic(in)
	text := errs.ToAggregate().Error()
	for _, want := range []string{`spec.watchedResources[services].labelSelector`, `spec.haproxyConfig.postProcessing[1].type: Unsupported value: "exec"`} {
		if !strings.Contains(text, want) {
			t.Errorf("errors %q lack %q", text, want)
		}
	}
	if len(errs) != 2 {
		t.Errorf("%d errors, want 2: %v", len(errs), errs)
	}
	// The API form selects what the string does.
	for _, c := range []struct {
		selector string
		set      labels.Set
		want     bool
	}{
		{"app in (a,b),tier!=x", labels.Set{"app": "a", "tier": "y"}, true},
		{"app in (a,b),tier!=x", labels.Set{"app": "a", "tier": "x"}, false},
		{"app in (a,b),tier!=x", labels.Set{"app": "c"}, false},
		{"team=a", labels.Set{"team": "a"}, true},
		{"team=a", labels.Set{"team": "b"}, false},
		{"!legacy,zone", labels.Set{"zone": "1"}, true},
		{"!legacy,zone", labels.Set{"zone": "1", "legacy": ""}, false},
	} {
		api, err := spec.SelectorOf(c.selector)
		if err != nil {
			t.Fatalf("%q: %v", c.selector, err)
		}
		sel, err := metav1.LabelSelectorAsSelector(api)
		if err != nil {
			t.Fatalf("%q as %+v: %v", c.selector, api, err)
		}
		if got := sel.Matches(c.set); got != c.want {
			t.Errorf("%q on %v: %v, want %v", c.selector, c.set, got, c.want)
		}
	}
	if _, err := spec.SelectorOf("replicas>2"); err == nil || !strings.Contains(err.Error(), "cannot be watched") {
		t.Errorf("gt: %v", err)
	}
	if cfgSpec.WatchedResources["ingresses"].LabelSelector == nil || cfgSpec.WatchedResources["ingresses"].NamespaceSelector == nil {
		t.Error("the selectors were not converted")
	}
}

// TestHapticConfigTakesItsEngineAndStore: haptic's templates are Scriggo,
// and templatingSettings.engine "scriggo" is Gatehouse's engine for them
// (TestHapticChartTestsPassAsInHaptic compiles and runs them); the ssl
// library's Secrets are read on demand, which alone lets them go without
// a label selector.
func TestHapticConfigTakesItsEngineAndStore(t *testing.T) {
	in := hapticTestdata(t)
	var engines []string
	compiler := func(_ render.Templates, engine string) (render.Renderer, error) {
		engines = append(engines, engine)
		return nil, nil
	}
	c, errs := spec.CompileHaptic(&in.Spec, compiler)
	if len(errs) > 0 {
		t.Fatalf("compile: %s", errs.ToAggregate())
	}
	if len(engines) != 1 || engines[0] != "scriggo" {
		t.Fatalf("compiled with engines %q, want scriggo", engines)
	}
	if !c.Watched["secrets"].OnDemand || len(c.Tests) != 71 {
		t.Fatalf("secrets on demand %v, %d tests; want the ssl library's on-demand Secrets and 71 tests", c.Watched["secrets"].OnDemand, len(c.Tests))
	}
	// Only store: on-demand lets Secrets go without a label selector.
	in.Spec.WatchedResources["secrets"] = func(w hapticv1alpha1.WatchedResource) hapticv1alpha1.WatchedResource {
		w.Store = "full"
		return w
	}(in.Spec.WatchedResources["secrets"])
	if _, errs := spec.CompileHaptic(&in.Spec, compiler); !strings.Contains(errs.ToAggregate().Error(), `spec.watchedResources[secrets].labelSelector: Required value`) {
		t.Fatalf("every Secret watched in full: %v", errs.ToAggregate())
	}
}

// TestOfflineReadsHapticsKind: `gatehouse configcheck test -f` takes a
// haptic config file as it is, by its apiVersion, and refuses a field
// haptic's kind does not have.
func TestOfflineReadsHapticsKind(t *testing.T) {
	data, err := os.ReadFile("testdata/haptic/haproxytemplateconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), "  watchedResources:", "  unknownField: 1\n  watchedResources:", 1)
	if _, err := RunOffline(t.Context(), []byte(bad), OfflineOptions{}); err == nil || !strings.Contains(err.Error(), `reading the haptic config`) || !strings.Contains(err.Error(), "unknownField") {
		t.Fatalf("a field haptic's kind does not have: %v", err)
	}
}

// TestGatehousesKindTakesGoTemplateAlone: Scriggo runs for haptic's kind;
// Gatehouse's kind takes gotemplate, as its CRD's enum says, and a review
// posted to the port naming scriggo never met that enum.
func TestGatehousesKindTakesGoTemplateAlone(t *testing.T) {
	cfgSpec := judgeSpec()
	cfgSpec.TemplatingSettings.Engine = "scriggo"
	compiler := func(render.Templates, string) (render.Renderer, error) {
		t.Fatal("compiled")
		return nil, nil
	}
	if _, errs := spec.Compile(cfgSpec, compiler); !strings.Contains(errs.ToAggregate().Error(), `spec.templatingSettings.engine: Unsupported value: "scriggo": supported values: "gotemplate"`) {
		t.Fatalf("got %v", errs.ToAggregate())
	}
}
