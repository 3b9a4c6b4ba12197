package render

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestPostProcessingRewritesLineByLine: haptic's regex_replace, as its base
// library uses it (indentation normalized to two spaces), applied to each
// line on its own, on the output it names only.
func TestPostProcessingRewritesLineByLine(t *testing.T) {
	templates := Templates{
		HAProxyConfig: "global\n      daemon\n\tmaxconn 10\ndefaults\n        mode http",
		Maps:          map[string]string{"hosts.map": "    a.example b"},
		PostProcessing: map[string][]PostProcessor{
			"haproxyConfig":   {{Type: PostProcessorRegexReplace, Pattern: `^[ ]+`, Replace: "  "}},
			"maps[hosts.map]": {{Type: PostProcessorRegexReplace, Pattern: `^\s*(\S+) (\S+)$`, Replace: "$1 be_$2"}},
		},
	}
	r, err := Compile(EngineGoTemplate, templates)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Render(context.Background(), Data{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "global\n  daemon\n\tmaxconn 10\ndefaults\n  mode http\n"; out.HAProxyConfig != want {
		t.Errorf("haproxy.cfg %q, want %q", out.HAProxyConfig, want)
	}
	if want := "a.example be_b\n"; out.Maps["hosts.map"] != want {
		t.Errorf("hosts.map %q, want %q", out.Maps["hosts.map"], want)
	}
}

// TestPostProcessingIsCheckedAtCompile: an unknown type, a pattern that
// does not compile and an output that does not exist are compile errors
// naming the output.
func TestPostProcessingIsCheckedAtCompile(t *testing.T) {
	for _, c := range []struct {
		name       string
		processing map[string][]PostProcessor
		want       string
	}{
		{"unknown type", map[string][]PostProcessor{"haproxyConfig": {{Type: "exec", Pattern: "x"}}}, `haproxyConfig: postProcessing[0]: unknown type "exec"`},
		{"bad pattern", map[string][]PostProcessor{"haproxyConfig": {{Type: PostProcessorRegexReplace, Pattern: "("}}}, "haproxyConfig: postProcessing[0]: pattern: error parsing regexp"},
		{"no such output", map[string][]PostProcessor{"maps[nope.map]": {{Type: PostProcessorRegexReplace, Pattern: "x"}}}, "maps[nope.map]: postProcessing for an output the config does not have"},
	} {
		_, err := Compile(EngineGoTemplate, Templates{HAProxyConfig: "global", PostProcessing: c.processing})
		var ce *CompileError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a compile error containing %q", c.name, err, c.want)
		}
	}
}

type namedEngine string

func (n namedEngine) Name() string                        { return string(n) }
func (n namedEngine) Compile(Templates) (Renderer, error) { return nil, nil }

// TestRegisteredEnginesAreFoundByName: an engine from a package of its own
// is found by NewEngine and listed by Engines; a name taken twice panics.
func TestRegisteredEnginesAreFoundByName(t *testing.T) {
	RegisterEngine(namedEngine("test-engine"))
	defer func() {
		enginesMu.Lock()
		delete(engines, "test-engine")
		enginesMu.Unlock()
	}()
	if e, err := NewEngine("test-engine"); err != nil || e.Name() != "test-engine" {
		t.Fatalf("NewEngine: %v %v", e, err)
	}
	if got := Engines(); len(got) < 2 || got[0] != EngineGoTemplate {
		t.Errorf("Engines() = %v", got)
	}
	if _, err := NewEngine("nope"); err == nil || !strings.Contains(err.Error(), "supported: gotemplate, test-engine") {
		t.Errorf("an unknown engine: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second engine of one name was registered")
		}
	}()
	RegisterEngine(namedEngine("test-engine"))
}
