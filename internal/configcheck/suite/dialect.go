package suite

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// Dialect is whose semantics a run follows where Gatehouse's tests and
// haptic's differ. haptic's HAProxyTemplateConfigs (haproxy-haptic.org)
// carry tests written against haptic's runner, and must get haptic's
// verdicts; Gatehouse's own keep its stricter rules.
type Dialect int

const (
	// DialectGatehouse: the rules of the package documentation.
	DialectGatehouse Dialect = iota
	// DialectHaptic: haptic's test runner (pkg/controller/testrunner):
	//   - _global is run as a test of its own, with its assertions (its
	//     fixtures are still merged into every other test's, its
	//     assertions never are), and may have none;
	//   - a test's ExtraContext is merged over the runner's, key by key;
	//   - a text assertion whose target names no output, an empty one, or
	//     a form haptic does not know, looks at haproxy.cfg instead;
	//     "crt-list:<name>" names a general file, and cert: and crt-list:
	//     match an output by its base name;
	//   - match_order: each pattern's first match, found on its own, must
	//     not come before the previous pattern's;
	//   - when the rendering fails, the assertions still run, against
	//     empty outputs, and the test fails unless one of its assertions
	//     looks at rendering_error, which holds haptic's whole error chain
	//     ("failed to render haproxy.cfg: failed to render template
	//     'haproxy.cfg': <message>");
	//   - haproxy_valid and deterministic ignore a target.
	DialectHaptic
)

// TargetCrtListPrefix names a crt-list (haptic dialect only): a general
// file, by base name.
const TargetCrtListPrefix = "crt-list:"

// mergeExtraContext is the runner's extraContext with a test's keys over
// it (a shallow merge, as haptic's runner makes it).
func mergeExtraContext(global, test map[string]any) map[string]any {
	if len(test) == 0 {
		return global
	}
	merged := make(map[string]any, len(global)+len(test))
	maps.Copy(merged, global)
	maps.Copy(merged, test)
	return merged
}

// hapticRenderErrorText is a render error as haptic's runner words it: the
// output that failed, the template, then the cause (the fail() message, or
// the engine's error).
func hapticRenderErrorText(err error) string {
	cause := renderErrorText(err)
	var re *render.RenderError
	if !errors.As(err, &re) {
		return "failed to render haproxy.cfg: " + cause
	}
	kind, name := templateOutput(re.Template)
	switch kind {
	case "haproxyConfig", "templateSnippets":
		return fmt.Sprintf("failed to render haproxy.cfg: failed to render template 'haproxy.cfg': %s", cause)
	case "maps":
		return fmt.Sprintf("failed to render auxiliary files: failed to render map file %s: failed to render template '%s': %s", name, name, cause)
	case "files":
		return fmt.Sprintf("failed to render auxiliary files: failed to render general file %s: failed to render template '%s': %s", name, name, cause)
	case "sslCertificates":
		return fmt.Sprintf("failed to render auxiliary files: failed to render SSL certificate %s: failed to render template '%s': %s", name, name, cause)
	}
	return "failed to render haproxy.cfg: " + cause
}

// templateOutput splits a template's name as render names it
// ("maps[hosts.map]") into its kind and name.
func templateOutput(template string) (kind, name string) {
	kind, rest, ok := strings.Cut(template, "[")
	if !ok {
		return template, ""
	}
	return kind, strings.TrimSuffix(rest, "]")
}

// hapticTargetText is the text haptic's runner gives a target: a named
// output when it exists and is not empty, else haproxy.cfg.
func hapticTargetText(out render.Output, targetSpec string) (text, where string) {
	lookup := func(outputs map[string]string, name string, byBase bool) (string, bool) {
		if text, ok := outputs[name]; ok && !byBase {
			return text, text != ""
		}
		if byBase {
			for key, text := range outputs {
				if path.Base(key) == name {
					return text, text != ""
				}
			}
		}
		return "", false
	}
	var found bool
	switch {
	case strings.HasPrefix(targetSpec, TargetMapPrefix):
		text, found = lookup(out.Maps, strings.TrimPrefix(targetSpec, TargetMapPrefix), false)
	case strings.HasPrefix(targetSpec, TargetFilePrefix):
		text, found = lookup(out.Files, strings.TrimPrefix(targetSpec, TargetFilePrefix), false)
	case strings.HasPrefix(targetSpec, TargetCertPrefix):
		text, found = lookup(out.Certs, strings.TrimPrefix(targetSpec, TargetCertPrefix), true)
	case strings.HasPrefix(targetSpec, TargetCrtListPrefix):
		text, found = lookup(out.Files, strings.TrimPrefix(targetSpec, TargetCrtListPrefix), true)
	}
	if found {
		return text, targetSpec
	}
	if targetSpec != "" && targetSpec != TargetHAProxyConfig {
		return out.HAProxyConfig, targetSpec + " (not rendered or empty, so haproxy.cfg, as haptic reads it)"
	}
	return out.HAProxyConfig, TargetHAProxyConfig
}

// hapticMatchOrder is haptic's match_order: each pattern's first match,
// found in the whole text on its own, must not come before the previous
// pattern's (equal positions pass).
func hapticMatchOrder(patterns []string, text, where string) string {
	if len(patterns) == 0 {
		return "match_order has no patterns"
	}
	previous := -1
	for i, pattern := range patterns {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return fmt.Sprintf("invalid pattern %q: %v", pattern, err)
		}
		match := re.FindStringIndex(text)
		if match == nil {
			return fmt.Sprintf("pattern %q (%d of %d) not found in %s", pattern, i+1, len(patterns), where)
		}
		if match[0] < previous {
			line, _ := lineAt(text, match[0])
			previousLine, _ := lineAt(text, previous)
			return fmt.Sprintf("patterns out of order in %s: %q (%d of %d) first matches at line %d, before %q (line %d)",
				where, pattern, i+1, len(patterns), line, patterns[i-1], previousLine)
		}
		previous = match[0]
	}
	return ""
}
