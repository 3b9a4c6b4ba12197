package redact

import (
	"regexp"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// redactedName replaces a name the caller did not send.
const redactedName = "…"

// Words are the words of what the caller sent: every string, key and
// number of the request's object and old object (the namespace and name
// among them), split as names are joined ("be_%s_%s_%v").
type Words map[string]bool

// nameSeparators split a name into the words it was joined from.
var nameSeparators = regexp.MustCompile(`[^A-Za-z0-9-]+`)

func WordsOf(req admission.Request, objs ...map[string]any) Words {
	w := Words{}
	w.add(req.Namespace)
	w.add(req.Name)
	for _, o := range objs {
		w.walk(o, 0)
	}
	return w
}

func (w Words) add(s string) {
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

// AddWordsOf adds the words of every string in v, of any length and depth
// (DataWords, and configcheck's words of a spec: what a rendering read, bounded by the stores'
// bounds, or the config's spec), as a render failure's text is split
// (dataWord).
func (w Words) AddWordsOf(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			w.AddWordsOf(k)
			w.AddWordsOf(e)
		}
	case []any:
		for _, e := range t {
			w.AddWordsOf(e)
		}
	case string:
		for _, word := range dataWord.FindAllString(t, -1) {
			w[word] = true
		}
	}
}

// walk adds v's strings, at most 32 levels down (an admitted object is
// bounded by the API server; this bounds the walk of one posted to the
// port, already decoded).
func (w Words) walk(v any, depth int) {
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
func (w Words) mine(name string) bool {
	if name == "" || w[name] {
		return true
	}
	for _, part := range nameSeparators.Split(name, -1) {
		if part == "" || w[part] || uninformative(part) {
			continue
		}
		return false
	}
	return true
}

// uninformative says whether a name names nothing on its own: every part
// of it is a number or too short (s1, 80, 10.96.4.7).
func uninformative(name string) bool {
	for _, part := range nameSeparators.Split(name, -1) {
		if part != "" && len(part) > 2 && !isNumber(part) {
			return false
		}
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

// quotedName is a name haproxy quotes in an alert ('be_a', "x"), or a
// line the check policy quotes with strconv.Quote, whose own quotes are
// escaped ("server s1 \"${X}\""): an escaped quote does not end it.
var quotedName = regexp.MustCompile(`'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"`)

// quotedLine is a configuration line a denial quotes ("  line 12: ...").
var quotedLine = regexp.MustCompile(`^(\s*line \d+: )(.*)$`)

// configWords are the words of a configuration line that name nothing:
// keywords and operators.
var configWords = map[string]bool{"if": true, "unless": true, "or": true, "||": true, "!": true, "{": true, "}": true}

// Quoted keeps in text (a haproxy or policy denial) the lines whose
// names are all made of the caller's words, and in every other line
// replaces each name (quoted names in alerts; in quoted configuration lines
// every word but the keyword that opens the line) that names anything.
//
// A line is kept or redacted whole, never name by name: if a name the
// caller sent were shown where the names beside it are hidden, a tenant
// could put guesses in its request (an annotation is enough) and read,
// name by name, which of them another tenant's failure holds. Whole lines
// leave only a guess of every name of a line at once.
func Quoted(text string, w Words) string {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if m := quotedLine.FindStringSubmatch(line); m != nil {
			fields := strings.Fields(m[2])
			hide := func(j int, f string) bool { return j > 0 && !configWords[f] }
			if linesNames(fields, hide, w) {
				continue
			}
			for j, f := range fields {
				if hide(j, f) && !uninformative(f) {
					fields[j] = redactedName
				}
			}
			lines[i] = m[1] + strings.Join(fields, " ")
			continue
		}
		quoted := quotedName.FindAllString(line, -1)
		names := make([]string, len(quoted))
		for j, q := range quoted {
			names[j] = q[1 : len(q)-1]
		}
		if linesNames(names, func(int, string) bool { return true }, w) {
			continue
		}
		lines[i] = quotedName.ReplaceAllStringFunc(line, func(q string) string {
			if uninformative(q[1 : len(q)-1]) {
				return q
			}
			return q[:1] + redactedName + q[len(q)-1:]
		})
	}
	return strings.Join(lines, "\n")
}

// linesNames says whether every name of a line that could be hidden is
// the caller's.
func linesNames(names []string, hideable func(int, string) bool, w Words) bool {
	for j, n := range names {
		if hideable(j, n) && !w.mine(n) {
			return false
		}
	}
	return true
}

// A render failure is the template's text (its fail messages) or the
// engine's, and either may quote what the rendering read: a fail text
// names the objects it is about ("Service 'api' not found (Ingress
// shop/web, host a.example)"), an index collision names the other objects
// of its key, an escaping error quotes the value. The rendering read every
// tenant's objects, so such a failure, shown to a tenant whose change it
// refuses or who is admitted over it, keeps the words of the text that are
// not of the data (the template's and the engine's own, "not found") and
// the data's words the caller sent; the data's other words are replaced.

// RenderWords are the words of what a rendering read (the judged
// objects: the stores, with the changes admitted before overlaid), less the
// config's own, which are its author's (compiled.words: a fail text's
// "Service" is an object's kind too).
type RenderWords struct {
	// objects are the words of every judged object.
	objects Words
	// others are the words the caller may not read: those of objects of
	// namespaces other than the caller's, less the words of the caller's
	// namespace's objects (taken as the caller's to read: a tenant who may
	// change objects of a namespace reads that namespace's Ingresses and
	// Services). A cluster-scoped request (namespace "") reads none.
	others Words
	// author are the config's words, shown to all.
	author Words
}

func DataWords(stores map[string]render.IndexedStore, author Words, namespace string) RenderWords {
	objects, others, readable := Words{}, Words{}, Words{}
	for _, s := range stores {
		for _, obj := range s.List() {
			objects.AddWordsOf(obj)
			if namespace != "" && namespaceOf(obj) == namespace {
				readable.AddWordsOf(obj)
			} else {
				others.AddWordsOf(obj)
			}
		}
	}
	for word := range objects {
		if author[word] {
			delete(objects, word)
		}
	}
	for word := range others {
		if readable[word] || author[word] {
			delete(others, word)
		}
	}
	return RenderWords{objects: objects, others: others, author: author}
}

// namespaceOf is obj's metadata.namespace ("" when cluster-scoped).
func namespaceOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	return ns
}

// dataWord is a word of a render failure's text, as names are joined.
var dataWord = regexp.MustCompile(`[A-Za-z0-9-]+`)

// RenderFailure keeps the lines of text (a render failure) that quote nothing
// the caller may not read (each word of data.others in the line is one the
// caller sent), and in every other line replaces each word of the judged
// objects or of the request, the caller's own included, that names
// anything. As in Quoted, a line goes whole: were the caller's words
// kept beside hidden ones, a tenant would learn, word by word, which of the
// guesses its request carries another tenant's failure holds.
func RenderFailure(text string, caller Words, data RenderWords) string {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		foreign := false
		for _, word := range dataWord.FindAllString(line, -1) {
			if data.others[word] && !caller.mine(word) {
				foreign = true
				break
			}
		}
		if !foreign {
			continue
		}
		lines[i] = dataWord.ReplaceAllStringFunc(line, func(word string) string {
			if (data.objects[word] || caller[word]) && !data.author[word] && !uninformative(word) {
				return redactedName
			}
			return word
		})
	}
	return strings.Join(lines, "\n")
}

// QuotesHAProxy says whether a warning quotes haproxy's alerts or the
// check policy's violations; a render failure is the template's own text.
func QuotesHAProxy(warning string) bool {
	return strings.Contains(warning, "[ALERT]") || strings.Contains(warning, " (rule ")
}
