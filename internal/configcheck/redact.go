package configcheck

import (
	"regexp"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// A watched object's denial quotes haproxy: its alerts name proxies,
// backends and servers ('be_team-b_api_80'), and the configuration lines
// they point at. The rendering holds every tenant's objects, so quoted as
// is, a tenant posting an Ingress would learn the names of other tenants'
// backends and hosts: whether another namespace's Service is routed. The
// caller is a tenant of the config, not its author, and Gatehouse cannot
// ask of each name whether they may read the object it came from. So the
// denial keeps the names made of what the caller sent (their object's
// values, their namespace) and replaces the others; the config's readers
// find the whole failure in its status (Failing, Published).

// redactedName replaces a name the caller did not send.
const redactedName = "…"

// callerWords are the words of what the caller sent: every string, key and
// number of the request's object and old object (the namespace and name
// among them), split as names are joined ("be_%s_%s_%v").
type callerWords map[string]bool

// nameSeparators split a name into the words it was joined from.
var nameSeparators = regexp.MustCompile(`[^A-Za-z0-9-]+`)

func wordsOf(req admission.Request, objs ...map[string]any) callerWords {
	w := callerWords{}
	w.add(req.Namespace)
	w.add(req.Name)
	for _, o := range objs {
		w.walk(o, 0)
	}
	return w
}

func (w callerWords) add(s string) {
	if s == "" || len(s) > 1024 {
		return
	}
	w[s] = true
	for _, part := range nameSeparators.Split(s, -1) {
		if part != "" {
			w[part] = true
		}
	}
}

// walk adds v's strings, at most 32 levels down (an admitted object is
// bounded by the API server; this bounds the walk of one posted to the
// port, already decoded).
func (w callerWords) walk(v any, depth int) {
	if depth > 32 {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			w.add(k)
			w.walk(e, depth+1)
		}
	case []any:
		for _, e := range t {
			w.walk(e, depth+1)
		}
	case string:
		w.add(t)
	case float64, int64, int:
		// Numbers are kept whatever they are (mine), below.
	}
}

// mine says whether name is made of the caller's words: it is one, or
// each of its parts is one, a number, or too short to name anything.
func (w callerWords) mine(name string) bool {
	if name == "" || w[name] {
		return true
	}
	for _, part := range nameSeparators.Split(name, -1) {
		if part == "" || len(part) <= 2 || w[part] || isNumber(part) {
			continue
		}
		return false
	}
	return true
}

func isNumber(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// quotedName is a name haproxy quotes in an alert: 'be_a', "x".
var quotedName = regexp.MustCompile(`'[^'\n]*'|"[^"\n]*"`)

// quotedLine is a configuration line a denial quotes ("  line 12: ...").
var quotedLine = regexp.MustCompile(`^(\s*line \d+: )(.*)$`)

// configWords are the words of a configuration line that name nothing:
// keywords and operators.
var configWords = map[string]bool{"if": true, "unless": true, "or": true, "||": true, "!": true, "{": true, "}": true}

// redactFor keeps in text (a haproxy or policy denial) only the names made
// of the caller's words: quoted names in alerts, and in quoted
// configuration lines every word but the keyword that opens the line.
func redactFor(text string, w callerWords) string {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if m := quotedLine.FindStringSubmatch(line); m != nil {
			fields := strings.Fields(m[2])
			for j, f := range fields {
				if j > 0 && !configWords[f] && !w.mine(f) {
					fields[j] = redactedName
				}
			}
			lines[i] = m[1] + strings.Join(fields, " ")
			continue
		}
		lines[i] = quotedName.ReplaceAllStringFunc(line, func(q string) string {
			if w.mine(q[1 : len(q)-1]) {
				return q
			}
			return q[:1] + redactedName + q[len(q)-1:]
		})
	}
	return strings.Join(lines, "\n")
}

// forCaller redacts what a watched object's answer quotes of haproxy
// (redactFor): a denial of the haproxy or policy phase, and the warnings
// of a change admitted over a failing state.
func forCaller(resp admission.Response, req admission.Request) admission.Response {
	phase := ""
	if resp.AuditAnnotations != nil {
		phase = resp.AuditAnnotations[module.ReasonAnnotation]
	}
	denied := !resp.Allowed && (phase == phaseHAProxy || phase == phasePolicy)
	if !denied && len(resp.Warnings) == 0 {
		return resp
	}
	var obj, old map[string]any
	_ = utiljson.Unmarshal(req.Object.Raw, &obj)
	_ = utiljson.Unmarshal(req.OldObject.Raw, &old)
	w := wordsOf(req, obj, old)
	if denied {
		resp.Result.Message = redactFor(resp.Result.Message, w)
	}
	for i, warning := range resp.Warnings {
		if quotesHAProxy(warning) {
			resp.Warnings[i] = redactFor(warning, w)
		}
	}
	return resp
}

// quotesHAProxy says whether a warning quotes haproxy's alerts or the
// check policy's violations; a render failure is the template's own text.
func quotesHAProxy(warning string) bool {
	return strings.Contains(warning, "[ALERT]") || strings.Contains(warning, " (rule ")
}
