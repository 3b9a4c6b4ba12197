package policytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
)

// compare lists how got differs from the expectation, one readable line
// each; none means the test passed.
func (e Expect) compare(got answer) []string {
	var out []string
	verdict := func(allowed bool) string {
		if allowed {
			return "allowed"
		}
		return "denied"
	}
	if e.Allowed != nil && *e.Allowed != got.allowed {
		line := fmt.Sprintf("allowed: expected %t (%s), got %t (%s)", *e.Allowed, verdict(*e.Allowed), got.allowed, verdict(got.allowed))
		switch {
		case !got.allowed:
			line += fmt.Sprintf(" by %s with code %d: %s", got.webhook, got.code, indentLines(got.message))
		case got.noneCalled:
			line += " without calling Gatehouse: " + strings.Join(got.skipped, "; ")
		case len(got.warnings) > 0:
			line += fmt.Sprintf(" with warnings %q", got.warnings)
		}
		out = append(out, line)
	}
	if e.Called != nil && *e.Called == got.noneCalled {
		line := fmt.Sprintf("called: expected %t, got %t", *e.Called, !got.noneCalled)
		if got.noneCalled {
			line += ": " + strings.Join(got.skipped, "; ")
		}
		out = append(out, line)
	}
	switch {
	case e.Code != 0 && e.Code != got.code:
		out = append(out, fmt.Sprintf("code: expected %d, got %d: %s", e.Code, got.code, indentLines(got.message)))
	case e.Code == 0 && e.Allowed != nil && !*e.Allowed && !got.allowed && got.code != http.StatusForbidden && got.code != 0:
		// A failure to decide is not the denial a policy test expects.
		out = append(out, fmt.Sprintf("code: expected a policy denial (403), got an error (%d): %s", got.code, indentLines(got.message)))
	}
	for _, s := range e.MessageContains {
		if !strings.Contains(got.message, s) {
			out = append(out, fmt.Sprintf("message: expected to contain %q, got %s", s, quoteMessage(got.message)))
		}
	}
	for _, s := range e.MessageNotContains {
		if strings.Contains(got.message, s) {
			out = append(out, fmt.Sprintf("message: expected not to contain %q, got %s", s, quoteMessage(got.message)))
		}
	}
	for _, s := range e.WarningsContain {
		found := false
		for _, w := range got.warnings {
			found = found || strings.Contains(w, s)
		}
		if !found {
			out = append(out, fmt.Sprintf("warnings: expected one to contain %q, got %s", s, quoteWarnings(got.warnings)))
		}
	}
	if e.NoWarnings && len(got.warnings) > 0 {
		out = append(out, fmt.Sprintf("warnings: expected none, got %s", quoteWarnings(got.warnings)))
	}
	if e.PatchedObject != nil {
		for _, d := range diff("", jsonValue(e.PatchedObject), jsonValue(got.patched)) {
			out = append(out, "patchedObject"+d)
		}
	}
	if e.ConvertedObjects != nil {
		if len(e.ConvertedObjects) != len(got.converted) {
			out = append(out, fmt.Sprintf("convertedObjects: expected %d objects, got %d: %s", len(e.ConvertedObjects), len(got.converted), renderLong(got.converted)))
		}
		for i := 0; i < len(e.ConvertedObjects) && i < len(got.converted); i++ {
			for _, d := range diff("", jsonValue(e.ConvertedObjects[i]), jsonValue(got.converted[i])) {
				out = append(out, fmt.Sprintf("convertedObjects[%d]%s", i, d))
			}
		}
	}
	return out
}

// jsonValue is v as JSON decodes it, so that YAML's integers and JSON's
// float64 compare equal.
func jsonValue(v any) any {
	raw, err := json.Marshal(jsonValues(v))
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(raw, &out)
	return out
}

// diff lists the differences between want and got, each as
// "<path>: expected X, got Y", "<path>: expected X, missing" or
// "<path>: unexpected X".
func diff(path string, want, got any) []string {
	if reflect.DeepEqual(want, got) {
		return nil
	}
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if wok && gok {
		keys := map[string]bool{}
		for k := range wm {
			keys[k] = true
		}
		for k := range gm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []string
		for _, k := range sorted {
			p := path + fieldPath(k)
			w, inWant := wm[k]
			g, inGot := gm[k]
			switch {
			case !inGot:
				out = append(out, fmt.Sprintf("%s: expected %s, missing", p, render(w)))
			case !inWant:
				out = append(out, fmt.Sprintf("%s: unexpected %s", p, render(g)))
			default:
				out = append(out, diff(p, w, g)...)
			}
		}
		return out
	}
	wl, wok := want.([]any)
	gl, gok := got.([]any)
	if wok && gok && len(wl) == len(gl) {
		var out []string
		for i := range wl {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), wl[i], gl[i])...)
		}
		return out
	}
	if path == "" {
		path = " "
	}
	return []string{fmt.Sprintf("%s: expected %s, got %s", path, render(want), render(got))}
}

func fieldPath(k string) string {
	if k != "" && !strings.ContainsAny(k, "./[]\" ") {
		return "." + k
	}
	return fmt.Sprintf("[%q]", k)
}

func render(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(raw)
	if len(s) > 300 {
		s = s[:297] + "..."
	}
	return s
}

// renderLong is render for a whole answer (the objects a conversion
// returned, when their number is not the expected one), bounded to 8 KB.
func renderLong(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(raw) > 8192 {
		return string(raw[:8189]) + "..."
	}
	return string(raw)
}

func quoteMessage(m string) string {
	if m == "" {
		return "no message"
	}
	return indentLines(m)
}

func quoteWarnings(ws []string) string {
	if len(ws) == 0 {
		return "no warnings"
	}
	return fmt.Sprintf("%q", ws)
}

// indentLines keeps a multi-line message readable under its failure line.
func indentLines(s string) string {
	s = strings.TrimRight(s, "\n")
	if !strings.Contains(s, "\n") {
		return fmt.Sprintf("%q", s)
	}
	return "\n        | " + strings.ReplaceAll(s, "\n", "\n        | ")
}
