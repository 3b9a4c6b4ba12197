package scriggo

import (
	"fmt"
	"slices"
	"strings"
)

// tagKind is the kind of a template tag, named by its delimiters.
type tagKind int

const (
	tagShow       tagKind = iota // {{ expression }}
	tagStatement                 // {% statement %}
	tagStatements                // {%% statements %%}
	tagComment                   // {# comment #}, nesting
)

// tag is one tag of a template's source. Offsets are byte offsets into the
// source the tag was scanned from; end is exclusive.
type tag struct {
	kind       tagKind
	start, end int
	// bodyStart and bodyEnd delimit what lies between the delimiters,
	// trim markers excluded.
	bodyStart, bodyEnd int
	// trimBefore and trimAfter are the fork's trim markers ({%- and -%}):
	// the whitespace before (after) the tag is not output.
	trimBefore, trimAfter bool
}

func (t tag) body(src string) string { return src[t.bodyStart:t.bodyEnd] }

var (
	openers = map[tagKind]string{tagShow: "{{", tagStatement: "{%", tagStatements: "{%%", tagComment: "{#"}
	closers = map[tagKind]string{tagShow: "}}", tagStatement: "%}", tagStatements: "%%}", tagComment: "#}"}
)

// ScanError is a template that cannot be scanned: an unterminated tag,
// string or comment. Line and Column are 1-based, in the template as its
// author wrote it.
type ScanError struct {
	Line, Column int
	Message      string
}

func (e *ScanError) Error() string {
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Message)
}

func scanError(src string, offset int, format string, args ...any) *ScanError {
	line := 1 + strings.Count(src[:offset], "\n")
	column := offset - strings.LastIndexByte(src[:offset], '\n')
	return &ScanError{Line: line, Column: column, Message: fmt.Sprintf(format, args...)}
}

// scanTags lists src's tags in order. Text is whatever lies between them.
//
// Inside code (show, statement and statements tags) it skips Go string,
// raw string and rune literals and comments, and counts braces, so that a
// delimiter inside them (a "%}" in a string, the "}}" ending a composite
// literal, an apostrophe in a // comment) does not end the tag: the three
// ways a naive search for the closing delimiter goes wrong on haptic's
// libraries.
func scanTags(src string) ([]tag, error) {
	var tags []tag
	for i := 0; i < len(src); {
		open := strings.IndexByte(src[i:], '{')
		if open < 0 {
			break
		}
		start := i + open
		kind, ok := openerAt(src, start)
		if !ok {
			i = start + 1
			continue
		}
		t := tag{kind: kind, start: start, bodyStart: start + len(openers[kind])}
		if t.bodyStart < len(src) && src[t.bodyStart] == '-' {
			t.trimBefore = true
			t.bodyStart++
		}
		var err error
		if kind == tagComment {
			err = scanComment(src, &t)
		} else {
			err = scanCode(src, &t)
		}
		if err != nil {
			return nil, err
		}
		tags = append(tags, t)
		i = t.end
		if t.kind == tagStatement && isRawOpener(t.body(src)) {
			// The text up to the raw block's end is output as it is:
			// nothing in it is a tag.
			endTag, err := scanRawEnd(src, t)
			if err != nil {
				return nil, err
			}
			tags = append(tags, endTag)
			i = endTag.end
		}
	}
	return tags, nil
}

// isRawOpener reports whether a statement's body opens a raw block,
// {% raw %} or {% raw marker %}.
func isRawOpener(body string) bool {
	fields := strings.Fields(body)
	return len(fields) > 0 && len(fields) <= 2 && fields[0] == "raw"
}

// scanRawEnd finds the tag ending the raw block opened by open:
// {% end %} or {% end raw %}, or {% end raw marker %} when it has one.
func scanRawEnd(src string, open tag) (tag, error) {
	marker := strings.Fields(open.body(src))[1:]
	for i := open.end; i < len(src); {
		next := strings.Index(src[i:], "{%")
		if next < 0 {
			break
		}
		start := i + next
		if strings.HasPrefix(src[start:], "{%%") {
			i = start + 3
			continue
		}
		t := tag{kind: tagStatement, start: start, bodyStart: start + 2}
		if t.bodyStart < len(src) && src[t.bodyStart] == '-' {
			t.trimBefore = true
			t.bodyStart++
		}
		if scanCode(src, &t) == nil {
			fields := strings.Fields(t.body(src))
			switch {
			case len(marker) == 0 && (slices.Equal(fields, []string{"end"}) || slices.Equal(fields, []string{"end", "raw"})):
				return t, nil
			case len(marker) > 0 && slices.Equal(fields, append([]string{"end", "raw"}, marker...)):
				return t, nil
			}
		}
		i = start + 2
	}
	return tag{}, scanError(src, open.start, "raw block not ended")
}

// openerAt reports the tag src opens at i, if any.
func openerAt(src string, i int) (tagKind, bool) {
	switch {
	case strings.HasPrefix(src[i:], "{%%"):
		return tagStatements, true
	case strings.HasPrefix(src[i:], "{%"):
		return tagStatement, true
	case strings.HasPrefix(src[i:], "{{"):
		return tagShow, true
	case strings.HasPrefix(src[i:], "{#"):
		return tagComment, true
	}
	return 0, false
}

// scanComment ends t at the "#}" closing it, counting nested comments.
func scanComment(src string, t *tag) error {
	depth := 1
	for i := t.bodyStart; i < len(src); i++ {
		switch {
		case strings.HasPrefix(src[i:], "{#"):
			depth++
			i++
		case strings.HasPrefix(src[i:], "#}"):
			depth--
			if depth == 0 {
				t.end = i + 2
				t.bodyEnd = i
				if t.bodyEnd > t.bodyStart && src[t.bodyEnd-1] == '-' {
					t.trimAfter = true
					t.bodyEnd--
				}
				return nil
			}
			i++
		}
	}
	return scanError(src, t.start, "comment not terminated")
}

// scanCode ends t at its closing delimiter, outside literals, comments and
// braces.
func scanCode(src string, t *tag) error {
	closer := closers[t.kind]
	depth := 0
	for i := t.bodyStart; i < len(src); {
		c := src[i]
		switch {
		case c == '"' || c == '\'':
			end, err := skipQuoted(src, i)
			if err != nil {
				return err
			}
			i = end
		case c == '`':
			end := strings.IndexByte(src[i+1:], '`')
			if end < 0 {
				return scanError(src, i, "raw string not terminated")
			}
			i += end + 2
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return scanError(src, i, "comment not terminated")
			}
			i += end + 4
		case t.kind == tagStatements && strings.HasPrefix(src[i:], "//"):
			// A line comment ends at its line's end, which never holds
			// the closing "%%}" (it would be part of the comment).
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				return scanError(src, t.start, "%s not closed by %s", openers[t.kind], closer)
			}
			i += end
		case c == '{':
			depth++
			i++
		case depth > 0 && c == '}':
			depth--
			i++
		case depth == 0 && strings.HasPrefix(src[i:], closer):
			t.end = i + len(closer)
			t.bodyEnd = i
			if t.bodyEnd > t.bodyStart && src[t.bodyEnd-1] == '-' {
				t.trimAfter = true
				t.bodyEnd--
			}
			return nil
		default:
			i++
		}
	}
	return scanError(src, t.start, "%s not closed by %s", openers[t.kind], closer)
}

// skipQuoted returns the offset just past the interpreted string or rune
// literal starting at i. Such a literal cannot span lines.
func skipQuoted(src string, i int) (int, error) {
	quote := src[i]
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '\n':
			return 0, scanError(src, i, "%c literal not terminated", quote)
		case quote:
			return j + 1, nil
		}
	}
	return 0, scanError(src, i, "%c literal not terminated", quote)
}
