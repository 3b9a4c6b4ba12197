package haproxy

import "strings"

// The policy must see each line as haproxy 2.6 does, or a spelling haproxy
// accepts could slip past it. The functions below follow haproxy 2.6's own
// parsers, read in its sources (v2.6.0): readcfgfile (src/cfgparse.c),
// parse_line (src/tools.c), make_arg_list (src/arg.c) and
// crtlist_parse_line (src/ssl_crtlist.c). Where they depart from haproxy
// they do so on the strict side, and say so.

// cSpace is isspace() in the C locale haproxy parses in.
func cSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func cAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

func cDigit(c byte) bool { return c >= '0' && c <= '9' }

func cHex(c byte) bool {
	return cDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexValue(c byte) byte {
	switch {
	case cDigit(c):
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// cString is a word as haproxy's C code sees it: up to its first NUL byte
// (a "\x00" escape ends the word there for every keyword parser).
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// configLine is one line of haproxy.cfg cut into words.
type configLine struct {
	// words as the keyword parsers see them (cString applied). A quoted
	// empty word ("") is kept; trailing empty words are dropped.
	words []string
	// envExpanded is set when the line expands a variable ("$X" or
	// "${X}" inside double quotes, pseudo-variables such as ${.LINE}
	// included). The words then hold the value the check would see
	// with no such variable set: the default of ${X-default}, else "".
	envExpanded bool
	// malformed is set when haproxy refuses the line and skips it
	// (unmatched quote, bad \x escape, bad variable name or brace). Its
	// words are still checked: being strict costs nothing there.
	malformed bool
}

// splitConfigLine tokenizes one line of a haproxy configuration (without
// its "\n") as readcfgfile and parse_line do, with the options readcfgfile
// passes: environment expansion, double and single quotes, backslash
// escapes, "#" comments and "${X[*]}" word expansion.
func splitConfigLine(line string) configLine {
	var res configLine
	// fgets hands the line over as a C string: it ends at a NUL byte
	// (readcfgfile then stops reading the file: "Stray NUL character").
	line = cString(line)
	i := 0
	for i < len(line) && cSpace(line[i]) {
		i++
	}
	var word []byte
	var words []string
	squote, dquote := false, false
	endWord := func() {
		words = append(words, string(word))
		word = word[:0]
	}
scan:
	for i < len(line) {
		c := line[i]
		switch {
		case c >= '-' && c != '\\':
			// parse_line's fast path: letters, digits, '/', '.',
			// and (as signed chars fall through to its last branch)
			// every byte >= 0x80 are copied as they are.
			word = append(word, c)
			i++
		case c == '\n' || c == '\r':
			// A CR ends the line, unless spaces before it swallowed
			// it (see below).
			break scan
		case c == '#' && !squote && !dquote:
			break scan
		case c == '"' && !squote:
			dquote = !dquote
			i++
		case c == '\'' && !dquote:
			squote = !squote
			i++
		case c == '\\' && !squote:
			var next byte
			if i+1 < len(line) {
				next = line[i+1]
			}
			send := byte('\\')
			switch next {
			case ' ', '\\', '#', '\'', '"':
				send = next
				i++
			case 't':
				send = '\t'
				i++
			case 'n':
				send = '\n'
				i++
			case 'r':
				send = '\r'
				i++
			case '$':
				// An escaped dollar only inside double quotes;
				// elsewhere "\$" stays as it is.
				if dquote {
					send = '$'
					i++
				}
			case 'x':
				if i+3 >= len(line) || !cHex(line[i+2]) || !cHex(line[i+3]) {
					res.malformed = true
					break scan
				}
				send = hexValue(line[i+2])<<4 | hexValue(line[i+3])
				i += 3
			}
			// Any other character after a backslash: the backslash
			// itself is kept ("lua\-load" stays "lua\-load").
			i++
			word = append(word, send)
		case cSpace(c) && !squote && !dquote:
			// The run of spaces is skipped whole: this swallows a CR
			// that follows a space, so "a \rb" is two words.
			for i < len(line) && cSpace(line[i]) {
				i++
			}
			endWord()
		case c == '$' && dquote:
			res.envExpanded = true
			value, expand, next, ok := expandVariable(line, i)
			if !ok {
				res.malformed = true
				break scan
			}
			i = next
			if !expand {
				word = append(word, value...)
				continue
			}
			// "${X[*]}" splits the value into words on spaces.
			for j := 0; j < len(value); {
				if cSpace(value[j]) {
					endWord()
					for j < len(value) && cSpace(value[j]) {
						j++
					}
					continue
				}
				word = append(word, value[j])
				j++
			}
		default:
			word = append(word, c)
			i++
		}
	}
	if squote || dquote {
		res.malformed = true
	}
	endWord()
	for len(words) > 0 && words[len(words)-1] == "" {
		words = words[:len(words)-1]
	}
	for k := range words {
		words[k] = cString(words[k])
	}
	res.words = words
	return res
}

// expandVariable reads the variable reference at line[at] (a '$' inside
// double quotes) as parse_line does, and returns the value the check
// would see with no such variable set, whether "[*]" asked for word
// expansion, where parsing goes on, and false where haproxy refuses the
// reference.
func expandVariable(line string, at int) (value string, expand bool, next int, ok bool) {
	i := at + 1
	brace := i < len(line) && line[i] == '{'
	if brace {
		i++
	}
	if i >= len(line) || !(cAlpha(line[i]) || line[i] == '_' || line[i] == '.') {
		return "", false, 0, false
	}
	start := i
	if line[i] == '.' {
		i++
	}
	for i < len(line) && (cAlpha(line[i]) || cDigit(line[i]) || line[i] == '_') {
		i++
	}
	if name := line[start:i]; name[0] == '.' && name != ".LINE" && name != ".FILE" && name != ".SECTION" {
		return "", false, 0, false
	}
	if brace && i < len(line) && line[i] == '[' {
		if !strings.HasPrefix(line[i:], "[*]") {
			return "", false, 0, false
		}
		expand = true
		i += 3
	}
	if brace {
		switch {
		case i < len(line) && line[i] == '-':
			end := strings.IndexByte(line[i:], '}')
			if end < 0 {
				return "", false, 0, false
			}
			value = line[i+1 : i+end]
			i += end
		case i >= len(line) || line[i] != '}':
			return "", false, 0, false
		}
		i++ // the closing brace
	}
	return value, expand, i, true
}

// isIDChar is haproxy's is_idchar: the characters of a sample fetch or
// converter name.
func isIDChar(c byte) bool {
	return cAlpha(c) || cDigit(c) || c == '.' || c == '_' || c == '-' || c == '+' || c == ':'
}

// sampleArgs reads the argument list of a sample fetch or converter, s
// starting at its '(', as make_arg_list does: an argument ends at an
// unquoted ',' or ')'; quotes and \\ \' \" \<space> \r \n \t escapes are
// resolved. It returns every argument and the length of s it consumed
// (through the closing ')', or all of s when there is none: haproxy then
// refuses the expression and parses nothing after it).
func sampleArgs(s string) (args []string, consumed int) {
	i := 1 // the '('
	for {
		var arg []byte
		squote, dquote := false, false
		for i < len(s) {
			c := s[i]
			if c == '"' && !squote {
				dquote = !dquote
				i++
				continue
			}
			if c == '\'' && !dquote {
				squote = !squote
				i++
				continue
			}
			if c == '\\' && !squote {
				if i+1 >= len(s) {
					// haproxy: "unquote_err"; the arguments are
					// refused. Keep what was read: strict.
					i++
					break
				}
				switch n := s[i+1]; n {
				case '\\', ' ', '"', '\'':
					arg = append(arg, n)
					i += 2
				case 'r':
					arg = append(arg, '\r')
					i += 2
				case 'n':
					arg = append(arg, '\n')
					i += 2
				case 't':
					arg = append(arg, '\t')
					i += 2
				default:
					arg = append(arg, '\\')
					i++
				}
				continue
			}
			if !squote && !dquote && (c == ',' || c == ')') {
				break
			}
			arg = append(arg, c)
			i++
		}
		args = append(args, string(arg))
		if i >= len(s) {
			return args, len(s)
		}
		if s[i] == ')' {
			return args, i + 1
		}
		i++ // the ','
	}
}

// crtListLine is one line of a crt-list file cut as crtlist_parse_line
// does: words end at spaces, '[' and ']'; there is no quoting. The first
// word is the certificate, "[...]" holds ssl options, the rest are SNI
// filters.
func splitCrtListLine(line string) []string {
	line = cString(line)
	// crtlist_parse_file skips lines starting (in their very first
	// byte) with '#', or empty ones.
	if line == "" || line[0] == '#' || line[0] == '\r' {
		return nil
	}
	return strings.FieldsFunc(line, func(r rune) bool {
		return r < 0x80 && (cSpace(byte(r)) || r == '[' || r == ']')
	})
}
