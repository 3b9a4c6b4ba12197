package v1alpha1

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestHapticsOwnConfigDecodesStrictly: haptic's chart's config, every
// library on (internal/configcheck/testdata/haptic), decodes into these
// types with no field left over, so nothing a haptic user writes is
// silently dropped; and what configcheck reads is there.
func TestHapticsOwnConfigDecodesStrictly(t *testing.T) {
	data, err := os.ReadFile("../../../internal/configcheck/testdata/haptic/haproxytemplateconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg HAProxyTemplateConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("haptic's config does not decode strictly: %v", err)
	}
	if cfg.APIVersion != GroupVersion.String() || cfg.Kind != "HAProxyTemplateConfig" {
		t.Fatalf("decoded %s %s", cfg.APIVersion, cfg.Kind)
	}
	spec := cfg.Spec
	if got := len(spec.ValidationTests); got != 71 {
		t.Errorf("%d validation tests, want haptic's 70 and _global", got)
	}
	if got := len(spec.TemplateSnippets); got != 114 {
		t.Errorf("%d snippets, want 114", got)
	}
	if spec.TemplatingSettings.Engine != "scriggo" || spec.HAProxyConfig.Template == "" || len(spec.HAProxyConfig.PostProcessing) == 0 {
		t.Errorf("templating %+v, haproxyConfig post-processing %v", spec.TemplatingSettings, spec.HAProxyConfig.PostProcessing)
	}
	for name, w := range spec.WatchedResources {
		if w.APIVersion == "" || w.Resources == "" {
			t.Errorf("watched resource %s: %+v", name, w)
		}
	}
	var extra, current int
	for _, test := range spec.ValidationTests {
		if test.ExtraContext != nil {
			extra++
		}
		if test.CurrentConfig != "" {
			current++
		}
	}
	if extra != 5 || current != 4 {
		t.Errorf("%d tests with extraContext (want 5), %d with currentConfig (want 4)", extra, current)
	}
}
