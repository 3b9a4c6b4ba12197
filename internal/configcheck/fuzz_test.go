package configcheck

import (
	"os"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// Native fuzz targets for what a config's author writes: the
// HAProxyTemplateConfig spec and its fieldSelectors. Run one with
//
//	go test ./internal/configcheck -run '^$' -fuzz '^FuzzCompileConfig$' -fuzztime 30s
//
// or all of them with make fuzz. The indexBy and field path parsers are
// fuzzed in package render.

func configSeeds(f *testing.F) [][]byte {
	example, err := os.ReadFile(exampleConfig)
	if err != nil {
		f.Fatal(err)
	}
	exampleJSON, err := yaml.YAMLToJSON(example)
	if err != nil {
		f.Fatal(err)
	}
	return [][]byte{
		example,
		exampleJSON,
		[]byte(`{"spec":{"watchedResources":{"ingresses":{"apiVersion":"networking.k8s.io/v1","resources":"ingresses"}},"haproxyConfig":{"template":"global\n"}}}`),
		[]byte(`{"spec":{"watchedResources":{"s":{"apiVersion":"v1","resources":"secrets","labelSelector":{"matchExpressions":[{"key":"a","operator":"In"}]},"indexBy":["metadata.labels['a']","[0]"],"fieldSelector":"type!=kubernetes.io/tls,a.b==c"}},` +
			`"watchedResourcesIgnoreFields":["metadata.annotations","spec[0]"],"validationWebhook":{"failurePolicy":"Ignore","timeoutSeconds":31},` +
			`"templatingSettings":{"engine":"gotemplate","extraContext":[1]},"maps":{"../x":{"template":"{{"}},"haproxyConfig":{"template":"{{ template \"missing\" }}"},` +
			`"validationTests":{"t":{"fixtures":{"s":[{"metadata":{"name":"a"}},1]},"assertions":[{"type":"contains","target":"haproxy.cfg","pattern":"("}]}}}}`),
		[]byte("spec:\n  watchedResources: {}\n  haproxyConfig: {template: \" \"}\n"),
		[]byte(`{"spec":null}`),
		[]byte(`[]`),
	}
}

// fuzzedConfig reads data as the webhook does (JSON) or, failing that, as
// the offline CLI does (YAML).
func fuzzedConfig(data []byte) (*gatehousev1alpha1.HAProxyTemplateConfig, bool) {
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if utiljson.Unmarshal(data, cfg) == nil {
		return cfg, true
	}
	cfg = &gatehousev1alpha1.HAProxyTemplateConfig{}
	if yaml.Unmarshal(data, cfg) == nil {
		return cfg, true
	}
	return nil, false
}

// FuzzCompileConfig compiles random specs: spec.Compile never panics; it
// returns a compiled config or errors, never both or neither; every error
// names a field under spec; and what it compiles is ready to render: a
// renderer, webhook settings in range, and for each watched resource a
// template name, a version, an indexer over at least one expression, the
// fields that are always ignored, and a label selector when it watches
// Secrets.
func FuzzCompileConfig(f *testing.F) {
	for _, s := range configSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, ok := fuzzedConfig(data)
		if !ok {
			return
		}
		c, errs := spec.Compile(&cfg.Spec, inProcess)
		if (c == nil) == (len(errs) == 0) {
			t.Fatalf("compiled %v with errors %v", c != nil, errs)
		}
		for _, e := range errs {
			if e.Field != "spec" && !strings.HasPrefix(e.Field, "spec.") && !strings.HasPrefix(e.Field, "spec[") {
				t.Fatalf("an error outside spec: %v", e)
			}
		}
		if c == nil {
			_ = guard.Bounded(errs.ToAggregate().Error(), 4000)
			return
		}
		if c.Renderer == nil {
			t.Fatal("compiled without a renderer")
		}
		if c.Policy != admissionregistrationv1.Fail && c.Policy != admissionregistrationv1.Ignore {
			t.Fatalf("failure policy %q", c.Policy)
		}
		if c.Timeout < 2 || c.Timeout > 30 {
			t.Fatalf("timeout %d", c.Timeout)
		}
		if len(c.Watched) == 0 {
			t.Fatal("compiled without a watched resource")
		}
		for name, w := range c.Watched {
			if !spec.TemplateName.MatchString(name) || w.Name != name {
				t.Fatalf("watched resource %q named %q", name, w.Name)
			}
			if w.GVR.Version == "" || w.Indexer == nil || len(w.IndexBy) == 0 || !slices.Equal(w.Indexer.Expressions(), w.IndexBy) {
				t.Fatalf("watched resource %q: gvr %v, indexBy %q", name, w.GVR, w.IndexBy)
			}
			if len(w.Ignore) < len(spec.AlwaysIgnored) {
				t.Fatalf("watched resource %q ignores %d fields, fewer than the %d always ignored", name, len(w.Ignore), len(spec.AlwaysIgnored))
			}
			if w.GVR.Group == "" && w.GVR.Resource == "secrets" && w.Labels.Empty() {
				t.Fatalf("watched resource %q watches every Secret", name)
			}
		}
	})
}

// FuzzParseFieldSelector parses random fieldSelectors and matches them
// against random objects, decoded as admission requests are: neither
// panics; an accepted selector has a term per comma; and for every term,
// exactly one of path=value and path!=value matches any object.
func FuzzParseFieldSelector(f *testing.F) {
	for _, s := range []struct{ selector, obj string }{
		{"spec.ingressClassName=haproxy", `{"spec":{"ingressClassName":"haproxy"}}`},
		{"spec.ingressClassName!=haproxy,metadata.namespace==app", `{"metadata":{"namespace":"app"},"spec":{}}`},
		{"metadata.labels['a.b/c']=x, spec.replicas = 3", `{"metadata":{"labels":{"a.b/c":"x"}},"spec":{"replicas":3.0}}`},
		{`{.spec.rules[0].host}=a.example`, `{"spec":{"rules":[{"host":"a.example"}]}}`},
		{`metadata.labels.a\.b=1,spec=x`, `{"metadata":{"labels":{"a.b":1}},"spec":{"a":[]}}`},
		{"a!=b=c", `{"a":"b=c"}`},
		{"spec.a=b,", `{}`},
		{"=x", `null`},
		{"[99999999999999999999]=x", `[]`},
	} {
		f.Add(s.selector, []byte(s.obj))
	}
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		sel, err := spec.ParseFieldSelector(s)
		if err != nil {
			return
		}
		if strings.TrimSpace(s) == "" {
			if len(sel) != 0 {
				t.Fatalf("%d terms from an empty selector", len(sel))
			}
		} else if len(sel) != strings.Count(s, ",")+1 {
			t.Fatalf("%d terms from %q", len(sel), s)
		}
		var obj map[string]any
		if utiljson.Unmarshal(raw, &obj) != nil {
			return
		}
		_ = sel.Matches(obj)
		for _, term := range sel {
			negated := term
			negated.Negated = !term.Negated
			positive, negative := spec.FieldSelector{term}, spec.FieldSelector{negated}
			if positive.Matches(obj) == negative.Matches(obj) {
				t.Fatalf("term %q and its negation agree on %s", term.Text, raw)
			}
		}
	})
}
