package render

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// PostProcessorRegexReplace is the one post-processor: a regular
// expression replaced in every line of an output (haptic's regex_replace).
const PostProcessorRegexReplace = "regex_replace"

// PostProcessor rewrites a rendered output after its template ran
// (haptic's postProcessing; Gatehouse's own configs have none).
type PostProcessor struct {
	// Type is regex_replace.
	Type string
	// Pattern is a Go regular expression matched in each line on its own
	// (so ^ and $ are a line's ends); Replace replaces every match, with
	// $1 and ${name} expanded as regexp.Expand does.
	Pattern, Replace string
}

// OutputTemplateName names an output's template as errors name it:
// haproxyConfig, maps[<name>], files[<name>] or sslCertificates[<name>]
// (templates.PostProcessing is keyed so).
func OutputTemplateName(kind, name string) string {
	if kind == "haproxyConfig" {
		return kind
	}
	return kind + "[" + name + "]"
}

type compiledPostProcessor struct {
	re      *regexp.Regexp
	replace string
}

// compilePostProcessing checks every post-processor: a known type, a
// pattern that compiles, an output that exists. Its error is a
// *CompileError naming the output.
func compilePostProcessing(t Templates) (map[string][]compiledPostProcessor, error) {
	if len(t.PostProcessing) == 0 {
		return nil, nil
	}
	outputs := map[string]bool{"haproxyConfig": true}
	for kind, names := range map[string]map[string]string{"maps": t.Maps, "files": t.Files, "sslCertificates": t.SSLCertificates} {
		for name := range names {
			outputs[OutputTemplateName(kind, name)] = true
		}
	}
	compiled := make(map[string][]compiledPostProcessor, len(t.PostProcessing))
	for output, processors := range t.PostProcessing {
		if !outputs[output] {
			return nil, &CompileError{Template: output, Err: fmt.Errorf("postProcessing for an output the config does not have")}
		}
		for i, p := range processors {
			if p.Type != PostProcessorRegexReplace {
				return nil, &CompileError{Template: output, Err: fmt.Errorf("postProcessing[%d]: unknown type %q (supported: %s)", i, p.Type, PostProcessorRegexReplace)}
			}
			re, err := regexp.Compile(p.Pattern)
			if err != nil {
				return nil, &CompileError{Template: output, Err: fmt.Errorf("postProcessing[%d]: pattern: %w", i, err)}
			}
			compiled[output] = append(compiled[output], compiledPostProcessor{re: re, replace: p.Replace})
		}
	}
	return compiled, nil
}

// apply runs the processors over text, line by line, in order. Lines keep
// their newlines.
func applyPostProcessing(text string, processors []compiledPostProcessor) string {
	if len(processors) == 0 {
		return text
	}
	lines := strings.SplitAfter(text, "\n")
	var b strings.Builder
	b.Grow(len(text))
	for _, line := range lines {
		body, newline := strings.CutSuffix(line, "\n")
		for _, p := range processors {
			body = p.re.ReplaceAllString(body, p.replace)
		}
		b.WriteString(body)
		if newline {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// postProcessed renders with the engine's renderer, then post-processes
// each output; its outputs still end with exactly one newline.
type postProcessed struct {
	Renderer
	processors map[string][]compiledPostProcessor
}

func (p postProcessed) Render(ctx context.Context, data Data) (Output, error) {
	out, err := p.Renderer.Render(ctx, data)
	if err != nil {
		return out, err
	}
	out.HAProxyConfig = withOneTrailingNewline(applyPostProcessing(out.HAProxyConfig, p.processors["haproxyConfig"]))
	for kind, outputs := range map[string]map[string]string{"maps": out.Maps, "files": out.Files, "sslCertificates": out.Certs} {
		for name, text := range outputs {
			if processors := p.processors[OutputTemplateName(kind, name)]; len(processors) > 0 {
				outputs[name] = withOneTrailingNewline(applyPostProcessing(text, processors))
			}
		}
	}
	return out, nil
}

// Compile compiles templates with the engine named (NewEngine) and their
// post-processing: what a config's renderer is, wherever it runs.
func Compile(engine string, templates Templates) (Renderer, error) {
	renderer, _, err := CompileLearned(engine, templates, nil)
	return renderer, err
}

// LearningEngine is an engine whose compile learns something costly to
// find that makes a later compile of the same templates cheap: Scriggo's
// repairs of loosely typed expressions cost one build each. What it
// learned is opaque to callers, who keep it beside the templates it was
// learned from and hand it back only with those.
type LearningEngine interface {
	Engine
	// CompileLearned is Compile starting from learned, which an earlier
	// compile of the same templates returned (nil: nothing known; a value
	// it cannot read counts as nil). It returns what it knows after.
	CompileLearned(templates Templates, learned []byte) (Renderer, []byte, error)
}

// CompileLearned is Compile through a LearningEngine's CompileLearned when
// the engine is one; for another, learned is ignored and nil returned.
func CompileLearned(engine string, templates Templates, learned []byte) (Renderer, []byte, error) {
	e, err := NewEngine(engine)
	if err != nil {
		return nil, nil, err
	}
	processors, err := compilePostProcessing(templates)
	if err != nil {
		return nil, nil, err
	}
	var renderer Renderer
	var knows []byte
	if learner, ok := e.(LearningEngine); ok {
		renderer, knows, err = learner.CompileLearned(templates, learned)
	} else {
		renderer, err = e.Compile(templates)
	}
	if err != nil || len(processors) == 0 {
		return renderer, knows, err
	}
	return postProcessed{Renderer: renderer, processors: processors}, knows, nil
}
