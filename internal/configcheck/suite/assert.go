package suite

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// excerptLength bounds the lines and texts quoted in failure messages.
const excerptLength = 80

// assert runs one assertion and returns its failure message, empty when it
// passed. Its error is not the assertion's failure but one that stops the
// run: the checker failed.
func (run *testRun) assert(a Assertion) (string, error) {
	switch a.Type {
	case TypeHAProxyValid:
		return run.assertHAProxyValid()
	case TypeDeterministic:
		return run.assertDeterministic()
	case TypeJSONPath:
		return run.assertJSONPath(a), nil
	case TypeContains, TypeNotContains, TypeEquals, TypeMatchCount, TypeMatchOrder:
		return run.assertText(a), nil
	default:
		return fmt.Sprintf("unknown assertion type %q", a.Type), nil
	}
}

func (run *testRun) renderingFailed() string {
	return "rendering failed: " + run.renderError
}

func (run *testRun) assertHAProxyValid() (string, error) {
	if run.renderErr != nil {
		return run.renderingFailed(), nil
	}
	if run.runner.Check == nil {
		return "no haproxy checker", nil
	}
	valid, message, err := run.runner.Check(run.ctx, run.output)
	if err != nil {
		return "", fmt.Errorf("haproxy check: %w", err)
	}
	if !valid {
		return "HAProxy validation failed: " + message, nil
	}
	return "", nil
}

func (run *testRun) assertDeterministic() (string, error) {
	if run.renderErr != nil {
		return run.renderingFailed(), nil
	}
	second, err := run.runner.Renderer.Render(run.ctx, run.data)
	if err != nil {
		if run.ctx.Err() != nil {
			return "", err
		}
		return "the first rendering succeeded, the second failed: " + renderErrorText(err), nil
	}
	return firstDifference(run.output, second), nil
}

func (run *testRun) assertJSONPath(a Assertion) string {
	if run.context == nil {
		run.context = templateContext(run.data.Resources, run.data.ExtraContext)
	}
	got, count, err := evaluateJSONPath(a.JSONPath, run.context)
	switch {
	case err != nil:
		return err.Error()
	case count == 0:
		return "JSONPath expression returned no results"
	case got != a.Expected:
		return fmt.Sprintf("JSONPath %q returned %q, expected %q", a.JSONPath, excerpt(got), excerpt(a.Expected))
	}
	return ""
}

// assertText runs contains, not_contains, equals, match_count and
// match_order against their target's text.
func (run *testRun) assertText(a Assertion) string {
	var t target
	var text, where string
	if run.runner.Dialect == DialectHaptic && a.Target != TargetRenderingError {
		// An output that does not exist (as when the rendering failed)
		// reads as haproxy.cfg, empty or not.
		t = target{kind: targetHAProxyConfig}
		text, where = hapticTargetText(run.output, a.Target)
	} else {
		var err error
		if t, err = parseTarget(a.Target); err != nil {
			return fmt.Sprintf("target %q: %v", a.Target, err)
		}
		var missing string
		if text, missing = run.targetText(t); missing != "" {
			return missing
		}
		where = t.String()
	}

	switch a.Type {
	case TypeContains, TypeNotContains:
		re, err := regexp.Compile(a.Pattern)
		if err != nil {
			return fmt.Sprintf("invalid pattern %q: %v", a.Pattern, err)
		}
		match := re.FindStringIndex(text)
		if a.Type == TypeContains && match == nil {
			return fmt.Sprintf("pattern %q not found in %s", a.Pattern, run.describe(t, where, text))
		}
		if a.Type == TypeNotContains && match != nil {
			line, content := lineAt(text, match[0])
			return fmt.Sprintf("pattern %q found in %s at line %d: %q", a.Pattern, where, line, excerpt(content))
		}
	case TypeEquals:
		if text == a.Expected {
			return ""
		}
		if text == a.Expected+"\n" {
			return fmt.Sprintf("%s differs from expected only by its final newline (every rendered output ends with one)", where)
		}
		line, got, want := firstDifferentLine(text, a.Expected)
		return fmt.Sprintf("%s does not equal expected (%d bytes) at line %d: got %q, want %q",
			run.describe(t, where, text), len(a.Expected), line, excerpt(got), excerpt(want))
	case TypeMatchCount:
		re, err := regexp.Compile(a.Pattern)
		if err != nil {
			return fmt.Sprintf("invalid pattern %q: %v", a.Pattern, err)
		}
		want, err := parseCount(a.Expected)
		if err != nil {
			return fmt.Sprintf("expected %q is not a match count: %v", a.Expected, err)
		}
		if got := len(re.FindAllStringIndex(text, -1)); got != want {
			return fmt.Sprintf("expected %d matches of %q in %s, got %d", want, a.Pattern, where, got)
		}
	case TypeMatchOrder:
		if run.runner.Dialect == DialectHaptic {
			return hapticMatchOrder(a.Patterns, text, where)
		}
		return matchOrder(a.Patterns, text, where)
	}
	return ""
}

// matchOrder checks that each pattern matches after the previous one's
// match ended.
func matchOrder(patterns []string, text, where string) string {
	if len(patterns) == 0 {
		return "match_order has no patterns"
	}
	offset := 0
	for i, pattern := range patterns {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return fmt.Sprintf("invalid pattern %q: %v", pattern, err)
		}
		match := re.FindStringIndex(text[offset:])
		if match != nil {
			offset += match[1]
			continue
		}
		if i == 0 {
			return fmt.Sprintf("pattern %q (1 of %d) not found in %s", pattern, len(patterns), where)
		}
		previousLine, _ := lineAt(text, max(offset-1, 0))
		message := fmt.Sprintf("patterns out of order in %s: %q (%d of %d) not found after %q (matched at line %d)",
			where, pattern, i+1, len(patterns), patterns[i-1], previousLine)
		if earlier := re.FindStringIndex(text); earlier != nil {
			line, _ := lineAt(text, earlier[0])
			message += fmt.Sprintf("; it matches earlier, at line %d", line)
		}
		return message
	}
	return ""
}

// targetText returns the text a target names, or why there is none.
func (run *testRun) targetText(t target) (text, missing string) {
	if t.kind == targetRenderingError {
		return run.renderError, ""
	}
	if run.renderErr != nil {
		return "", run.renderingFailed()
	}
	var outputs map[string]string
	var word string
	switch t.kind {
	case targetHAProxyConfig:
		return run.output.HAProxyConfig, ""
	case targetMap:
		outputs, word = run.output.Maps, "map"
	case targetFile:
		outputs, word = run.output.Files, "file"
	case targetCert:
		outputs, word = run.output.Certs, "cert"
	}
	text, ok := outputs[t.name]
	if !ok {
		return "", fmt.Sprintf("%s %q was not rendered (rendered %ss: %s)", word, t.name, word, listOrNone(slices.Sorted(maps.Keys(outputs))))
	}
	return text, ""
}

// describe names a target and its size for a failure message.
func (run *testRun) describe(t target, where, text string) string {
	if t.kind == targetRenderingError && run.renderErr == nil {
		return "rendering_error (the rendering succeeded)"
	}
	return fmt.Sprintf("%s (%d bytes)", where, len(text))
}

// firstDifference compares two renderings and names the first output that
// differs, in the order haproxy.cfg, maps, files, certificates; it returns
// "" when they are identical.
func firstDifference(first, second render.Output) string {
	if first.HAProxyConfig != second.HAProxyConfig {
		return outputDiffers(TargetHAProxyConfig, first.HAProxyConfig, second.HAProxyConfig)
	}
	for _, kind := range []struct {
		prefix        string
		first, second map[string]string
	}{
		{TargetMapPrefix, first.Maps, second.Maps},
		{TargetFilePrefix, first.Files, second.Files},
		{TargetCertPrefix, first.Certs, second.Certs},
	} {
		names := slices.Sorted(maps.Keys(kind.first))
		for _, name := range slices.Sorted(maps.Keys(kind.second)) {
			if !hasKey(kind.first, name) {
				names = append(names, name)
			}
		}
		for _, name := range names {
			a, inFirst := kind.first[name]
			b, inSecond := kind.second[name]
			switch {
			case !inSecond:
				return fmt.Sprintf("the second rendering has no %s%s", kind.prefix, name)
			case !inFirst:
				return fmt.Sprintf("only the second rendering has %s%s", kind.prefix, name)
			case a != b:
				return outputDiffers(kind.prefix+name, a, b)
			}
		}
	}
	return ""
}

func outputDiffers(name, first, second string) string {
	line, a, b := firstDifferentLine(first, second)
	return fmt.Sprintf("rendering twice gave different %s: first difference at line %d: first %q, second %q",
		name, line, excerpt(a), excerpt(b))
}

// firstDifferentLine returns the 1-based number of the first line where a
// and b differ, and that line of each ("" past the end).
func firstDifferentLine(a, b string) (int, string, string) {
	linesA := strings.Split(a, "\n")
	linesB := strings.Split(b, "\n")
	for i := 0; ; i++ {
		var lineA, lineB string
		inA, inB := i < len(linesA), i < len(linesB)
		if inA {
			lineA = linesA[i]
		}
		if inB {
			lineB = linesB[i]
		}
		if lineA != lineB || inA != inB || (!inA && !inB) {
			return i + 1, lineA, lineB
		}
	}
}

// lineAt returns the 1-based number and the content of the line holding
// text[offset].
func lineAt(text string, offset int) (int, string) {
	offset = min(offset, len(text))
	start := strings.LastIndexByte(text[:offset], '\n') + 1
	end := strings.IndexByte(text[offset:], '\n')
	if end < 0 {
		end = len(text)
	} else {
		end += offset
	}
	return strings.Count(text[:offset], "\n") + 1, text[start:end]
}

// excerpt shortens s for quoting in a message.
func excerpt(s string) string {
	return truncate(s, excerptLength)
}
