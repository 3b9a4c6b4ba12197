package render

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"unsafe"
)

// The bounded functions replace sprig's (and text/template's print, printf,
// println, html, js and urlquery) where an argument could make the result,
// or the work, huge. Each refuses arguments that would exceed a limit of
// limits.go before building anything when the size can be known first
// (until, repeat, replace, printf widths, a value's measure), or refuses its
// result when it grows the input by a small factor only (b64enc, quote,
// upper), and otherwise returns what the original returns. funcs.go says
// which function is bounded how.

func checkValueBytes(what string, n int64) error {
	if n > MaxValueBytes || n < 0 {
		return limitErrorf("MaxValueBytes", "%s: the result would take more than %d bytes", what, MaxValueBytes)
	}
	return nil
}

func checkListLength(what string, n uint64) error {
	if n > MaxListLength {
		return limitErrorf("MaxListLength", "%s: a list of %d items, more than the %d a list may have", what, n, MaxListLength)
	}
	return nil
}

// capped returns text unless it is longer than MaxValueBytes; for functions
// whose result is at most a few times their input, so that applying one
// again and again to its own result cannot grow it without end.
func capped(what, text string) (string, error) {
	if err := checkValueBytes(what, int64(len(text))); err != nil {
		return "", err
	}
	return text, nil
}

// cappedString bounds a string function of sprig by capped.
func cappedString(what string, f func(string) string) func(string) (string, error) {
	return func(s string) (string, error) { return capped(what, f(s)) }
}

// stepCount is how many numbers untilStep(start, stop, step) yields,
// computed without overflow.
func stepCount(start, stop, step int) uint64 {
	switch {
	case stop < start:
		if step >= 0 {
			return 0
		}
		distance := uint64(start) - uint64(stop)
		stride := uint64(-(step + 1)) + 1
		return (distance-1)/stride + 1
	case step <= 0 || stop == start:
		return 0
	default:
		distance := uint64(stop) - uint64(start)
		return (distance-1)/uint64(step) + 1
	}
}

// boundedUntilStep is sprig's untilStep, refusing more than MaxListLength
// numbers before making any (and never looping past the int range).
func boundedUntilStep(what string, start, stop, step int) ([]int, error) {
	count := stepCount(start, stop, step)
	if err := checkListLength(what, count); err != nil {
		return nil, err
	}
	numbers := make([]int, count)
	for i := range numbers {
		numbers[i] = start + i*step
	}
	return numbers, nil
}

func boundedUntil(count int) ([]int, error) {
	step := 1
	if count < 0 {
		step = -1
	}
	return boundedUntilStep("until", 0, count, step)
}

// boundedSeq is sprig's seq (seq END, seq START END, seq START STEP END)
// over boundedUntilStep.
func boundedSeq(params ...int) (string, error) {
	var numbers []int
	var err error
	increment := 1
	switch len(params) {
	case 1:
		start, end := 1, params[0]
		if end < start {
			increment = -1
		}
		numbers, err = boundedUntilStep("seq", start, end+increment, increment)
	case 2:
		start, end := params[0], params[1]
		if end < start {
			increment = -1
		}
		numbers, err = boundedUntilStep("seq", start, end+increment, increment)
	case 3:
		start, step, end := params[0], params[1], params[2]
		if end < start {
			increment = -1
			if step > 0 {
				return "", nil
			}
		}
		numbers, err = boundedUntilStep("seq", start, end+increment, step)
	default:
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for i, n := range numbers {
		if i > 0 {
			out.WriteByte(' ')
		}
		out.WriteString(strconv.Itoa(n))
	}
	return out.String(), nil
}

func boundedRepeat(count int, str string) (string, error) {
	if count < 0 {
		return "", fmt.Errorf("repeat: negative count %d", count)
	}
	if len(str) > 0 && count > MaxValueBytes/len(str) {
		return "", limitErrorf("MaxValueBytes", "repeat: %d times %d bytes is more than %d bytes", count, len(str), MaxValueBytes)
	}
	return strings.Repeat(str, count), nil
}

func checkWidth(what string, width int) error {
	if width < 0 {
		return fmt.Errorf("%s: negative width %d", what, width)
	}
	if width > MaxWidth {
		return limitErrorf("MaxWidth", "%s: width %d is more than %d", what, width, MaxWidth)
	}
	return nil
}

func indentBy(what string, spaces int, v string) (string, error) {
	if err := checkWidth(what, spaces); err != nil {
		return "", err
	}
	lines := int64(strings.Count(v, "\n")) + 1
	if err := checkValueBytes(what, int64(len(v))+int64(spaces)*lines+1); err != nil {
		return "", err
	}
	pad := strings.Repeat(" ", spaces)
	return pad + strings.ReplaceAll(v, "\n", "\n"+pad), nil
}

func boundedIndent(spaces int, v string) (string, error) { return indentBy("indent", spaces, v) }

func boundedNindent(spaces int, v string) (string, error) {
	text, err := indentBy("nindent", spaces, v)
	return "\n" + text, err
}

// boundedReplace is sprig's replace OLD NEW SRC, refusing a result over
// MaxValueBytes before building it (an empty OLD matches between every
// character, so NEW is inserted len(SRC)+1 times).
func boundedReplace(old, replacement, src string) (string, error) {
	matches := int64(strings.Count(src, old))
	if err := checkValueBytes("replace", int64(len(src))+matches*(int64(len(replacement))-int64(len(old)))); err != nil {
		return "", err
	}
	return strings.ReplaceAll(src, old, replacement), nil
}

// boundedWrapWith bounds sprig's wrapWith: each line break it inserts
// consumes a space or wrapLength bytes of the text.
func boundedWrapWith(what string, wrap func(int, string, string) string) func(int, string, string) (string, error) {
	return func(wrapLength int, separator, text string) (string, error) {
		breaks := int64(strings.Count(text, " ")) + int64(len(text)/max(wrapLength, 1)) + 1
		if err := checkValueBytes(what, int64(len(text))+breaks*int64(max(len(separator), 1))); err != nil {
			return "", err
		}
		return wrap(wrapLength, separator, text), nil
	}
}

// checkFormat refuses printf widths and precisions over MaxWidth, and *
// (a width or precision taken from an argument), and returns the sum of
// those it found.
func checkFormat(format string) (int64, error) {
	var total int64
	skipIndex := func(i int) int { // past an explicit argument index [n]
		if i < len(format) && format[i] == '[' {
			if end := strings.IndexByte(format[i:], ']'); end >= 0 {
				return i + end + 1
			}
		}
		return i
	}
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0 {
			i++
		}
		for part := range 2 { // the width, then the precision
			if part == 1 {
				if i >= len(format) || format[i] != '.' {
					break
				}
				i++
			}
			i = skipIndex(i)
			if i < len(format) && format[i] == '*' {
				return 0, errors.New("printf: a width or precision taken from an argument (*) is not supported; write the number")
			}
			start := i
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				i++
			}
			if digits := format[start:i]; digits != "" {
				width, err := strconv.Atoi(digits)
				if err != nil || width > MaxWidth {
					return 0, limitErrorf("MaxWidth", "printf: width or precision %.20s is more than %d", digits, MaxWidth)
				}
				total += int64(width)
			}
		}
		i = skipIndex(i)
		// format[i] is the verb; the loop steps past it.
	}
	return total, nil
}

func boundedPrintf(format string, args ...any) (string, error) {
	widths, err := checkFormat(format)
	if err != nil {
		return "", err
	}
	size, err := valueSize("printf", args...)
	if err != nil {
		return "", err
	}
	if err := checkValueBytes("printf", int64(len(format))+widths+size); err != nil {
		return "", err
	}
	return capped("printf", fmt.Sprintf(format, args...))
}

// boundedFormatter bounds a function formatting its arguments with fmt
// (print, println, cat, quote, ...): they are measured first, so a value
// too large or too deep to print is refused before fmt walks it.
func boundedFormatter(what string, format func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		size, err := valueSize(what, args...)
		if err != nil {
			return "", err
		}
		// The separators and quotes fmt and quote add, a few per argument;
		// escaping can grow the text further, which capped refuses.
		if err := checkValueBytes(what, size+3*int64(len(args))); err != nil {
			return "", err
		}
		return capped(what, format(args...))
	}
}

func boundedJoin(join func(string, any) string) func(string, any) (string, error) {
	return func(separator string, list any) (string, error) {
		size, err := valueSize("join", list)
		if err != nil {
			return "", err
		}
		var items int64 = 1
		if v := reflect.ValueOf(list); v.Kind() == reflect.Slice || v.Kind() == reflect.Array {
			items = int64(v.Len())
		}
		if err := checkValueBytes("join", size+items*int64(len(separator))); err != nil {
			return "", err
		}
		return capped("join", join(separator, list))
	}
}

// measuredFirst bounds a sprig function walking its whole argument (toJson,
// deepCopy, toStrings, ...): the argument is measured first.
func measuredFirst[R any](what string, f func(any) R) func(any) (R, error) {
	return func(value any) (R, error) {
		if _, err := valueSize(what, value); err != nil {
			var zero R
			return zero, err
		}
		return f(value), nil
	}
}

func measuredFirstOrError[R any](what string, f func(any) (R, error)) func(any) (R, error) {
	return func(value any) (R, error) {
		if _, err := valueSize(what, value); err != nil {
			var zero R
			return zero, err
		}
		return f(value)
	}
}

// measuredToString is measuredFirst for a function returning text, capped.
func measuredToString(what string, f func(any) string) func(any) (string, error) {
	return func(value any) (string, error) {
		if _, err := valueSize(what, value); err != nil {
			return "", err
		}
		return capped(what, f(value))
	}
}

func measuredToStringOrError(what string, f func(any) (string, error)) func(any) (string, error) {
	return func(value any) (string, error) {
		if _, err := valueSize(what, value); err != nil {
			return "", err
		}
		text, err := f(value)
		if err != nil {
			return "", err
		}
		return capped(what, text)
	}
}

// boundedSet is sprig's set, refusing to store into a dict a value that
// holds that dict: printing it, or toJson, deepCopy, merge, would recurse
// forever, and a Go stack overflow kills the process rather than fail the
// render.
func boundedSet(dict map[string]any, key string, value any) (map[string]any, error) {
	if value != nil && !isScalarKind(reflect.TypeOf(value).Kind()) {
		contains, err := reachesDict("set", value, map[unsafe.Pointer]bool{reflect.ValueOf(dict).UnsafePointer(): true})
		if err != nil {
			return nil, err
		}
		if contains {
			return nil, fmt.Errorf("set %q: the value holds the dict it would be stored in, and a dict cannot contain itself", key)
		}
	}
	dict[key] = value
	return dict, nil
}

// boundedMerge bounds sprig's merge functions: every argument is measured,
// and a source sharing a dict with the destination is refused, since merging
// it could make the destination contain itself.
func boundedMerge(what string, merge func(map[string]any, ...map[string]any) (any, error)) func(map[string]any, ...map[string]any) (any, error) {
	return func(dst map[string]any, srcs ...map[string]any) (any, error) {
		all := []any{dst}
		for _, src := range srcs {
			all = append(all, src)
		}
		if _, err := valueSize(what, all...); err != nil {
			return nil, err
		}
		dstDicts, err := dictsIn(what, dst)
		if err != nil {
			return nil, err
		}
		for i, src := range srcs {
			shared, err := reachesDict(what, src, dstDicts)
			if err != nil {
				return nil, err
			}
			if shared {
				return nil, fmt.Errorf("%s: source %d shares a dict with the destination, which merging could make contain itself; merge a deepCopy of it", what, i+1)
			}
		}
		return merge(dst, srcs...)
	}
}

// boundedDict is sprig's dict; a key that is not a string is printed with
// fmt, so it is measured first.
func boundedDict(dict func(...any) map[string]any) func(...any) (map[string]any, error) {
	return func(pairs ...any) (map[string]any, error) {
		for i := 0; i < len(pairs); i += 2 {
			if _, isString := pairs[i].(string); !isString {
				if _, err := valueSize("dict", pairs[i]); err != nil {
					return nil, err
				}
			}
		}
		return dict(pairs...), nil
	}
}

func listLength(list any) int {
	if v := reflect.ValueOf(list); v.Kind() == reflect.Slice || v.Kind() == reflect.Array {
		return v.Len()
	}
	return 0
}

func boundedConcat(concat func(...any) any) func(...any) (any, error) {
	return func(lists ...any) (any, error) {
		var total uint64
		for _, list := range lists {
			total += uint64(listLength(list))
		}
		if err := checkListLength("concat", total); err != nil {
			return nil, err
		}
		return concat(lists...), nil
	}
}

// boundedGrow bounds append, push and prepend: one more item.
func boundedGrow(what string, grow func(any, any) ([]any, error)) func(any, any) ([]any, error) {
	return func(list, item any) ([]any, error) {
		if err := checkListLength(what, uint64(listLength(list))+1); err != nil {
			return nil, err
		}
		return grow(list, item)
	}
}

// boundedUniq is sprig's uniq (first occurrences, in order, compared with
// reflect.DeepEqual) in linear time for strings, numbers and booleans, the
// usual items: sprig compares every item with every kept one, which for a
// list of MaxListLength numbers is 10^12 comparisons. Dicts and lists are
// still compared pairwise, at most MaxListLength comparisons in all.
func boundedUniq(what string) func(any) ([]any, error) {
	return func(list any) ([]any, error) {
		v := reflect.ValueOf(list)
		if v.Kind() != reflect.Slice && v.Kind() != reflect.Array {
			return nil, fmt.Errorf("Cannot find uniq on type %s", v.Kind())
		}
		kept := []any{}
		seen := make(map[any]bool)
		var composites []any
		comparisons := 0
		for i := range v.Len() {
			item := v.Index(i).Interface()
			if item == nil || isScalarKind(reflect.TypeOf(item).Kind()) {
				// For these, DeepEqual is == on the same type: a map key.
				if !seen[item] {
					seen[item] = true
					kept = append(kept, item)
				}
				continue
			}
			duplicate := false
			for _, other := range composites {
				if comparisons++; comparisons > MaxListLength {
					return nil, limitErrorf("MaxListLength", "%s: more than %d comparisons of dicts or lists", what, MaxListLength)
				}
				if reflect.DeepEqual(item, other) {
					duplicate = true
					break
				}
			}
			if !duplicate {
				composites = append(composites, item)
				kept = append(kept, item)
			}
		}
		return kept, nil
	}
}

// sortedKeys is sprig's keys in sorted order: sprig's follows Go's map
// iteration, which differs from one rendering to the next.
func sortedDictKeys(dicts ...map[string]any) []string {
	keys := []string{}
	for _, dict := range dicts {
		for key := range dict {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}

// valuesByKey is sprig's values, in the order of their sorted keys.
func valuesByKey(dict map[string]any) []any {
	values := make([]any, 0, len(dict))
	for _, key := range sortedDictKeys(dict) {
		values = append(values, dict[key])
	}
	return values
}

func checkSplitCount(what, text, separator string, limit int) error {
	parts := uint64(strings.Count(text, separator)) + 1
	if limit > 0 {
		parts = min(parts, uint64(limit))
	}
	return checkListLength(what, parts)
}

func boundedSplit(split func(string, string) map[string]string) func(string, string) (map[string]string, error) {
	return func(separator, text string) (map[string]string, error) {
		if err := checkSplitCount("split", text, separator, -1); err != nil {
			return nil, err
		}
		return split(separator, text), nil
	}
}

func boundedSplitList(separator, text string) ([]string, error) {
	if err := checkSplitCount("splitList", text, separator, -1); err != nil {
		return nil, err
	}
	return strings.Split(text, separator), nil
}

func boundedSplitn(splitn func(string, int, string) map[string]string) func(string, int, string) (map[string]string, error) {
	return func(separator string, n int, text string) (map[string]string, error) {
		if err := checkSplitCount("splitn", text, separator, n); err != nil {
			return nil, err
		}
		return splitn(separator, n, text), nil
	}
}

// boundedRegexList bounds regexSplit and regexFindAll REGEX TEXT N: N
// negative (all) or over MaxListLength asks for MaxListLength+1 items, and
// getting that many is refused.
func boundedRegexList(what string, find func(*regexp.Regexp, string, int) []string) func(string, string, int) ([]string, error) {
	return func(expression, text string, n int) ([]string, error) {
		re, err := regexp.Compile(expression)
		if err != nil {
			return nil, err
		}
		if n < 0 || n > MaxListLength {
			n = MaxListLength + 1
		}
		items := find(re, text, n)
		if err := checkListLength(what, uint64(len(items))); err != nil {
			return nil, err
		}
		return items, nil
	}
}

// boundedRegexReplace is regexReplaceAll (expanding $1 and ${name} in the
// replacement) or regexReplaceAllLiteral. A first pass counts the matches
// and their bytes, so that a result over MaxValueBytes is refused before it
// is built: an expression matching the empty string matches between every
// byte, and each $1 can expand to a whole match.
func boundedRegexReplace(what string, literal bool) func(string, string, string) (string, error) {
	return func(expression, text, replacement string) (string, error) {
		re, err := regexp.Compile(expression)
		if err != nil {
			return "", err
		}
		var matches, matched int64
		re.ReplaceAllStringFunc(text, func(match string) string {
			matches++
			matched += int64(len(match))
			return ""
		})
		perMatch := int64(len(replacement))
		size := int64(len(text)) - matched + matches*perMatch
		if !literal {
			size += int64(strings.Count(replacement, "$")) * matched
		}
		if err := checkValueBytes(what, size); err != nil {
			return "", err
		}
		if literal {
			return re.ReplaceAllLiteralString(text, replacement), nil
		}
		return re.ReplaceAllString(text, replacement), nil
	}
}

func regexSplitN(re *regexp.Regexp, text string, n int) []string { return re.Split(text, n) }

func regexFindAllN(re *regexp.Regexp, text string, n int) []string {
	return re.FindAllString(text, n)
}

// The text/template builtins that format their arguments with fmt.
var (
	boundedPrint    = boundedFormatter("print", fmt.Sprint)
	boundedPrintln  = boundedFormatter("println", fmt.Sprintln)
	boundedHTML     = boundedFormatter("html", template.HTMLEscaper)
	boundedJS       = boundedFormatter("js", template.JSEscaper)
	boundedURLQuery = boundedFormatter("urlquery", template.URLQueryEscaper)
)
