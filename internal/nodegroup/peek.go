package nodegroup

import (
	"errors"
)

// errNoFastPeek sends peekTypeMeta's caller to a full decode.
var errNoFastPeek = errors.New("type meta not found by the fast path")

// peekTypeMeta returns apiVersion and kind of a JSON object by reading its
// top-level members only as far as needed. The API server writes them
// first, so a conversion learns an object's version without decoding it
// twice. Anything unexpected (an escaped key, a non-string value, a
// missing member, broken JSON) returns errNoFastPeek and the caller
// decodes the object properly, which also reports broken JSON.
func peekTypeMeta(b []byte) (apiVersion, kind string, err error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return "", "", errNoFastPeek
	}
	i++
	var haveVersion, haveKind bool
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return "", "", errNoFastPeek
		}
		key, next, plain := scanString(b, i)
		if next < 0 || !plain {
			return "", "", errNoFastPeek
		}
		i = skipSpace(b, next)
		if i >= len(b) || b[i] != ':' {
			return "", "", errNoFastPeek
		}
		i = skipSpace(b, i+1)
		switch string(key) {
		case "apiVersion", "kind":
			if i >= len(b) || b[i] != '"' {
				return "", "", errNoFastPeek
			}
			value, next, plain := scanString(b, i)
			if next < 0 || !plain {
				return "", "", errNoFastPeek
			}
			if string(key) == "kind" {
				kind, haveKind = string(value), true
			} else {
				apiVersion, haveVersion = string(value), true
			}
			i = next
		default:
			if i = skipValue(b, i); i < 0 {
				return "", "", errNoFastPeek
			}
		}
		if haveVersion && haveKind {
			return apiVersion, kind, nil
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ',' {
			return "", "", errNoFastPeek
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString reads the string starting at the quote b[i]. It returns the
// bytes between the quotes, the index after the closing quote (-1 when
// unterminated) and whether the string has no escapes, so that its bytes
// are its value.
func scanString(b []byte, i int) ([]byte, int, bool) {
	plain := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '\\':
			plain = false
			j++
		case c == '"':
			return b[i+1 : j], j + 1, plain
		case c < 0x20:
			return nil, -1, false
		}
	}
	return nil, -1, false
}

// skipValue returns the index after the value starting at b[i], or -1.
// Nested strings are skipped whole, so brackets inside them do not count.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		_, next, _ := scanString(b, i)
		return next
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				_, next, _ := scanString(b, j)
				if next < 0 {
					return -1
				}
				j = next - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}
