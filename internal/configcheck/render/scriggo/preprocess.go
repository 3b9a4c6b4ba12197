package scriggo

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// maxInlineDepth bounds render_glob … inherit_context inlining a snippet
// that inlines another: haptic's libraries go one level deep.
const maxInlineDepth = 8

// prepared is a template as upstream Scriggo parses it: the constructs of
// haptic's fork that upstream does not lex rewritten into ones it does,
// with byte offsets kept wherever no snippet was expanded, so that the
// trim markers' effect can be applied to the parsed tree by position.
type prepared struct {
	text string
	// trimLeft holds the start offset of every tag written {%- (or {{-,
	// {#-): the text before it loses its trailing whitespace.
	trimLeft map[int]bool
	// trimRight holds the end offset of every tag written -%} (or -}},
	// -#}): the text after it loses its leading whitespace.
	trimRight map[int]bool
}

// preparer rewrites a config's templates for upstream Scriggo. snippets are
// the config's templateSnippets by name, as written.
type preparer struct {
	snippets map[string]string
	names    []string // sorted
}

func newPreparer(snippets map[string]string) *preparer {
	names := make([]string, 0, len(snippets))
	for name := range snippets {
		names = append(names, name)
	}
	slices.Sort(names)
	return &preparer{snippets: snippets, names: names}
}

// prepare rewrites the template name. Two passes: render_glob tags are
// expanded into what upstream parses (their text length changes, so this
// comes first), then trim markers and the go keyword of {{ go M() }} are
// blanked out in place and the markers recorded.
//
// Rewrites, and why each keeps haptic's meaning:
//   - {{ render_glob "p-*" }} becomes {{ render "p-a" }}{{ render "p-b" }}:
//     the snippets matching the glob (path.Match), in name order, the
//     template itself excluded, as haptic's fork renders them; no match
//     renders nothing ({{ "" }}).
//   - {{ render_glob "p-*" inherit_context }} inlines each match's source in
//     a block of its own ({% if true %}…{% end if %}): the snippet sees and
//     changes the variables in scope where the tag is, which is what
//     inherit_context means, and its own declarations do not clash with
//     the next snippet's.
//   - {{ go M() }} becomes {{    M() }}: the fork renders M concurrently
//     and inserts its output in place; rendering it in place gives the
//     same text, since a rendering has no side effect another can see.
//   - {%- … -%}: upstream would lex the marker as a minus sign; it becomes
//     a blank and its effect is applied to the tree (trim.go). Deleting
//     the whitespace here instead would glue lines together wherever
//     upstream's own rule (a line holding only a statement is removed)
//     meets a marker: the spike saw 27 of 67 renderings fail haproxy -c
//     that way.
func (p *preparer) prepare(name, src string) (*prepared, error) {
	expanded, err := p.expand(name, src, 0, nil)
	if err != nil {
		return nil, err
	}
	tags, err := scanTags(expanded)
	if err != nil {
		return nil, err
	}
	out := []byte(expanded)
	prep := &prepared{trimLeft: map[int]bool{}, trimRight: map[int]bool{}}
	for _, t := range tags {
		if t.trimBefore {
			out[t.bodyStart-1] = ' '
			prep.trimLeft[t.start] = true
		}
		if t.trimAfter {
			out[t.bodyEnd] = ' '
			prep.trimRight[t.end] = true
		}
		if t.kind == tagShow {
			if at, ok := goKeyword(expanded, t); ok {
				copy(out[at:], "  ")
			}
		}
		if t.kind != tagComment && mentions(t.body(expanded), "render_glob") {
			return nil, scanError(expanded, t.start, "render_glob is supported only as a tag of its own: {{ render_glob \"pattern\" }}, optionally followed by inherit_context")
		}
	}
	prep.text = string(out)
	return prep, nil
}

// goKeyword returns the offset of the go keyword of {{ go M() }}.
func goKeyword(src string, t tag) (int, bool) {
	body := t.body(src)
	trimmed := strings.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 3 && strings.HasPrefix(trimmed, "go") && strings.ContainsRune(" \t\r\n", rune(trimmed[2])) {
		return t.bodyStart + len(body) - len(trimmed), true
	}
	return 0, false
}

// globTag is a parsed {{ render_glob "pattern" [inherit_context] }}.
type globTag struct {
	pattern        string
	inheritContext bool
}

// parseGlobTag parses a show tag's body if it is a render_glob.
func parseGlobTag(body string) (globTag, bool, error) {
	fields := strings.Fields(body)
	if len(fields) == 0 || fields[0] != "render_glob" {
		return globTag{}, false, nil
	}
	if len(fields) < 2 {
		return globTag{}, true, fmt.Errorf("render_glob needs a quoted pattern")
	}
	pattern, err := strconv.Unquote(fields[1])
	if err != nil {
		return globTag{}, true, fmt.Errorf("render_glob needs a quoted pattern without blanks, got %s", fields[1])
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return globTag{}, true, fmt.Errorf("render_glob %q: %w", pattern, err)
	}
	g := globTag{pattern: pattern}
	rest := fields[2:]
	for len(rest) > 0 {
		switch {
		case rest[0] == "inherit_context" && !g.inheritContext:
			g.inheritContext = true
			rest = rest[1:]
		case rest[0] == "default" && len(rest) > 1 && rest[1] == `""`:
			// render's "default" is for a missing template; a glob
			// matching nothing already renders nothing.
			rest = rest[2:]
		default:
			return globTag{}, true, fmt.Errorf("render_glob %q: unexpected %s (only inherit_context may follow the pattern)", pattern, rest[0])
		}
	}
	return g, true, nil
}

// expand replaces src's render_glob tags. inlining is the chain of
// snippets being inlined, to refuse a cycle.
func (p *preparer) expand(name, src string, depth int, inlining []string) (string, error) {
	tags, err := scanTags(src)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	last := 0
	for _, t := range tags {
		if t.kind != tagShow {
			continue
		}
		g, ok, err := parseGlobTag(t.body(src))
		if err != nil {
			return "", scanError(src, t.start, "%v", err)
		}
		if !ok {
			continue
		}
		matches := p.matches(g.pattern, name)
		b.WriteString(src[last:t.start])
		last = t.end
		open, closer := "{{", "}}"
		if t.trimBefore {
			open = "{{-"
		}
		if t.trimAfter {
			closer = "-}}"
		}
		if !g.inheritContext {
			if len(matches) == 0 {
				b.WriteString(open + ` "" ` + closer)
				continue
			}
			for i, match := range matches {
				o, c := "{{", "}}"
				if i == 0 {
					o = open
				}
				if i == len(matches)-1 {
					c = closer
				}
				fmt.Fprintf(&b, "%s render %s %s", o, strconv.Quote(match), c)
			}
			continue
		}
		if depth >= maxInlineDepth {
			return "", scanError(src, t.start, "render_glob inherit_context nests more than %d deep", maxInlineDepth)
		}
		blockOpen := strings.Replace(open, "{{", "{%", 1)
		for _, match := range matches {
			if slices.Contains(inlining, match) {
				return "", scanError(src, t.start, "render_glob inherit_context: snippet %q inlines itself", match)
			}
			inlined, err := p.expand(match, p.snippets[match], depth+1, append(inlining, match))
			if err != nil {
				return "", fmt.Errorf("templateSnippets[%s] (inherited by %s): %w", match, name, err)
			}
			b.WriteString(blockOpen + " if true %}")
			b.WriteString(inlined)
			b.WriteString("{% end if %}")
			blockOpen = "{%"
		}
		b.WriteString(`{{ "" ` + closer)
	}
	if last == 0 {
		return src, nil
	}
	b.WriteString(src[last:])
	return b.String(), nil
}

// matches are the snippets matching pattern, in name order, self excluded.
func (p *preparer) matches(pattern, self string) []string {
	var out []string
	for _, name := range p.names {
		if name == self {
			continue
		}
		if ok, _ := path.Match(pattern, name); ok {
			out = append(out, name)
		}
	}
	return out
}

// mentions reports whether code uses the identifier word outside its
// string and rune literals.
func mentions(code, word string) bool {
	for i := 0; i < len(code); {
		switch c := code[i]; {
		case c == '"' || c == '\'':
			end, err := skipQuoted(code, i)
			if err != nil {
				return strings.Contains(code[i:], word)
			}
			i = end
		case c == '`':
			end := strings.IndexByte(code[i+1:], '`')
			if end < 0 {
				return false
			}
			i += end + 2
		case isIdentByte(c):
			j := i
			for j < len(code) && isIdentByte(code[j]) {
				j++
			}
			if code[i:j] == word {
				return true
			}
			i = j
		default:
			i++
		}
	}
	return false
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
