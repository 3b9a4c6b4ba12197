package scriggo

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math"
	"path"
	"reflect"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/open2b/scriggo/native"
	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// functions are haptic's template functions, by the name templates call.
//
// Each has the parameter and result types haptic declares for the name,
// since Scriggo type-checks calls against them. A function may also take
// a native.Env first, which the template does not see: the ones that must
// refuse an argument although haptic's signature has no error result end
// the rendering through env.Stop instead.
//
// The set is haptic's registerScriggoCustomFunctions,
// registerScriggoBuiltinStrings and registerScriggoBuiltinCore, each name
// bound as haptic binds it last (its builtin "trim", strings.Trim with a
// cutset, replaces its custom one), less what unavailable lists. Where
// haptic registers one of upstream Scriggo's builtins, the standard
// library function it wraps is used, or a function here behaving as it
// does (see "Upstream's builtins" below).
var functions = map[string]any{
	"abbreviate":        abbreviate,
	"abs":               absInt,
	"append":            appendItem,
	"b64decode":         b64decode,
	"base64":            encodeBase64,
	"basename":          path.Base,
	"capitalize":        capitalize,
	"capitalizeAll":     capitalizeAll,
	"ceil":              math.Ceil,
	"coalesce":          fallback,
	"count_by":          countBy,
	"debug":             debug,
	"dig":               dig,
	"fallback":          fallback,
	"first_seen":        firstSeen,
	"formatFloat":       formatFloat,
	"formatInt":         formatInt,
	"glob_match":        globMatch,
	"group_by":          groupBy,
	"hasPrefix":         strings.HasPrefix,
	"hasSuffix":         strings.HasSuffix,
	"hex":               encodeHex,
	"hmacSHA1":          hmacSHA1,
	"hmacSHA256":        hmacSHA256,
	"indent":            indent,
	"index":             strings.Index,
	"indexAny":          strings.IndexAny,
	"index_by":          indexBy,
	"isNil":             isNil,
	"isdigit":           isDigit,
	"join":              join,
	"join_key":          joinKey,
	"keys":              sortedKeys,
	"lastIndex":         strings.LastIndex,
	"map_extract":       mapExtract,
	"marshalJSON":       marshalJSON,
	"marshalJSONIndent": marshalJSONIndent,
	"max":               maxInt,
	"md5":               md5Hex,
	"merge":             merge,
	"min":               minInt,
	"namespace":         namespace,
	"parseDuration":     parseDuration,
	"parseFloat":        parseFloat,
	"parseInt":          parseInt,
	"pow":               math.Pow,
	"queryEscape":       queryEscape,
	"regex_search":      regexSearch,
	"replace":           replaceText,
	"replaceAll":        replaceAll,
	"reverse":           reverse,
	"runeCount":         utf8.RuneCountInString,
	"sanitize_regex":    sanitizeRegex,
	"selectattr":        selectAttr,
	"seq":               seq,
	"sha1":              sha1Hex,
	"sha256":            sha256Hex,
	"shard_slice":       shardSlice,
	"sort_by":           sortBy,
	"sort_strings":      sortStrings,
	"split":             strings.Split,
	"splitAfter":        strings.SplitAfter,
	"splitAfterN":       strings.SplitAfterN,
	"splitN":            strings.SplitN,
	"sprint":            fmt.Sprint,
	"sprintf":           sprintf,
	"strings_contains":  containsText,
	"strings_lower":     lowerText,
	"strings_replace":   replaceText,
	"strings_split":     splitText,
	"strings_splitn":    splitTextN,
	"strings_trim":      trimSpace,
	"strip":             trimSpace,
	"title":             title,
	"toKebab":           toKebab,
	"toLower":           strings.ToLower,
	"toSlice":           toSlice,
	"toStringSlice":     toStringSlice,
	"toUpper":           strings.ToUpper,
	"tofloat":           toFloat,
	"toint":             toInt,
	"tostring":          toString,
	"trim":              strings.Trim,
	"trimLeft":          strings.TrimLeft,
	"trimPrefix":        strings.TrimPrefix,
	"trimRight":         strings.TrimRight,
	"trimSpace":         trimSpace,
	"trimSuffix":        strings.TrimSuffix,
	"unique_by":         uniqueBy,
	"unmarshalJSON":     unmarshalJSON,
}

// unavailable are the functions haptic declares that Gatehouse does not,
// with the reason a template calling one is refused.
var unavailable = map[string]string{
	"date":          "renderings must not depend on the host: date reads the host's time zone database",
	"htmlEscape":    "not provided: Gatehouse renders text outputs only, and no chart library calls it",
	"marshalYAML":   "not provided: its output's indentation grows with nesting without bound, and no chart library calls it",
	"now":           "renderings must not depend on the clock",
	"parseTime":     "renderings must not depend on the host: parseTime reads the host's time zone for zone abbreviations",
	"regexp":        "not provided: it compiles patterns without regex_search's bounds and its ReplaceAll can expand text without limit; use regex_search",
	"unixTime":      "renderings must not depend on the host: unixTime converts to the host's time zone",
	"unmarshalYAML": "not provided: YAML aliases let a small document expand into a large value, and no chart library calls it",
}

// Bounds on what a function may build from its arguments: a tenant's
// objects reach the functions, and a rendering must not be made to
// allocate without limit by them.
const (
	// maxAddedText is how much text a function that repeats or pads text
	// (indent, replace, join, sprintf, ...) may add to the text it was
	// given.
	maxAddedText = 1 << 20
	// maxSeq is the longest sequence seq builds.
	maxSeq = 100_000
	// maxPatternBytes is the longest pattern regex_search compiles.
	maxPatternBytes = 4096
	// maxPatternInsts is the largest compiled pattern regex_search
	// accepts, in instructions: a short pattern can compile to millions
	// ((?:\pL{1000}){500}); none an HAProxy config needs comes near this.
	maxPatternInsts = 1 << 16
	// maxCachedPatterns and maxCachedInsts bound regex_search's cache of
	// compiled patterns, by count and by total size.
	maxCachedPatterns = 256
	maxCachedInsts    = 1 << 20
)

// errTooMuchText is the refusal of a result that would add more than
// maxAddedText to a function's arguments.
func errTooMuchText(function string) error {
	return fmt.Errorf("%s: the result would add more than %d bytes to its arguments", function, maxAddedText)
}

// repeatsTooMuch reports whether count copies of size bytes exceed
// maxAddedText, without overflowing.
func repeatsTooMuch(count, size int) bool {
	return count > 0 && size > 0 && size > maxAddedText/count
}

// renderScope is what one rendering's function calls share: haptic's
// SharedContext, in which first_seen records the keys it has seen. The
// engine makes one per rendering of a config, shared by all its outputs
// as haptic's renderer shares one SharedContext, and passes it in the
// context the templates run with (withRenderScope); env.Context() finds
// it there. Its values are the ones haptic's `shared` global exposes, so
// it can back that global too.
type renderScope struct {
	mu     sync.Mutex
	values map[string]any
}

// renderScopeKey is the context key under which a rendering's
// *renderScope is found.
type renderScopeKey struct{}

// withRenderScope returns ctx carrying a new, empty renderScope: the
// context one rendering's templates are run with.
func withRenderScope(ctx context.Context) context.Context {
	return context.WithValue(ctx, renderScopeKey{}, &renderScope{values: map[string]any{}})
}

// renderScopeOf returns the rendering's scope, or nil when the templates
// run without one.
func renderScopeOf(env native.Env) *renderScope {
	ctx := env.Context()
	if ctx == nil {
		return nil
	}
	scope, _ := ctx.Value(renderScopeKey{}).(*renderScope)
	return scope
}

// computeIfAbsent returns key's value, computing and storing it when it
// has none, and whether this call stored it. compute runs without the
// lock held, so that it may itself use the scope.
func (s *renderScope) computeIfAbsent(key string, compute func() any) (any, bool) {
	s.mu.Lock()
	value, ok := s.values[key]
	s.mu.Unlock()
	if ok {
		return value, false
	}
	value = compute()
	s.mu.Lock()
	defer s.mu.Unlock()
	if stored, ok := s.values[key]; ok {
		// compute stored the key itself: the first value stays.
		return stored, false
	}
	s.values[key] = value
	return value, true
}

// firstSeen is haptic's first_seen: true the first time a rendering sees
// the key its parts join into with "_", false afterwards. Without parts
// or without a scope every call is a first time, as in haptic.
func firstSeen(env native.Env, parts ...any) bool {
	if len(parts) == 0 {
		return true
	}
	scope := renderScopeOf(env)
	if scope == nil {
		return true
	}
	_, first := scope.computeIfAbsent(joinTexts("_", parts), func() any { return true })
	return first
}

// toString is haptic's tostring, the lenient conversion its functions
// apply to their arguments: nil is empty, floats print without exponent
// and without trailing zeros.
func toString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprint(v)
}

// toInt is haptic's toint: int, int64 and float64 (truncated) convert,
// a string is parsed as a decimal; anything else, or a string that does
// not parse, is 0.
func toInt(v any) int {
	switch v := v.(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	case string:
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0
		}
		return n
	}
	return 0
}

// toFloat is haptic's tofloat: nil is 0, numbers convert, a string is
// parsed, and anything else is an error.
func toFloat(v any) (float64, error) {
	switch v := v.(type) {
	case nil:
		return 0, nil
	case float64:
		return v, nil
	case int:
		return float64(v), nil
	case int64:
		return float64(v), nil
	case string:
		return strconv.ParseFloat(v, 64)
	}
	return 0, fmt.Errorf("cannot convert %T to float", v)
}

// isNil is haptic's isNil: nil, or a nil pointer, map, slice, channel,
// function or interface inside an interface (which == nil misses).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// dig is haptic's dig: obj[keys[0]][keys[1]]... through map[string]any
// and map[string]string, nil as soon as a key is missing or a value is
// not a map. Without keys it is obj itself.
func dig(obj any, keys ...string) any {
	if obj == nil || len(keys) == 0 {
		return obj
	}
	if isNil(obj) {
		return nil
	}
	current := obj
	for _, key := range keys {
		var found bool
		switch m := current.(type) {
		case map[string]any:
			current, found = m[key]
		case map[string]string:
			current, found = m[key]
		}
		if !found || current == nil {
			return nil
		}
	}
	return current
}

// fallback is haptic's fallback and coalesce: value unless it is nil.
// A typed nil is a value, as in haptic.
func fallback(value, def any) any {
	if value == nil {
		return def
	}
	return value
}

// listElems returns the elements of a slice of any type; false for nil and
// for what is not a slice. A []any is returned as it is.
func listElems(v any) ([]any, bool) {
	if v == nil {
		return nil, false
	}
	if s, ok := v.([]any); ok {
		return s, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return nil, false
	}
	elems := make([]any, rv.Len())
	for i := range elems {
		elems[i] = rv.Index(i).Interface()
	}
	return elems, true
}

// toSlice is haptic's toSlice, which makes any list safe to range over:
// nil is an empty slice, a slice's elements are returned as []any, and
// anything else is a nil []any.
func toSlice(items any) []any {
	if items == nil {
		return []any{}
	}
	elems, _ := listElems(items)
	return elems
}

// toStringSlice is haptic's toStringSlice: a []string as it is, a []any's
// elements printed with %v (nil is "<nil>"), anything else empty.
func toStringSlice(items any) []string {
	switch items := items.(type) {
	case []string:
		return items
	case []any:
		texts := make([]string, len(items))
		for i, item := range items {
			texts[i] = fmt.Sprint(item)
		}
		return texts
	}
	return []string{}
}

// appendItem is haptic's append, which replaces the builtin so that a
// template can append to the any a map index gives: item is appended to
// a []any, and starts a new slice when slice is nil or not a []any.
func appendItem(slice, item any) []any {
	if s, ok := slice.([]any); ok {
		return append(s, item)
	}
	return []any{item}
}

// shardSlice is haptic's shard_slice: the shardIndex-th of totalShards
// nearly equal parts of items, the first len%totalShards parts one item
// longer. An index out of range or fewer than two shards give every item.
func shardSlice(items any, shardIndex, totalShards int) []any {
	elems, ok := listElems(items)
	if !ok || len(elems) == 0 {
		return []any{}
	}
	if totalShards <= 1 || shardIndex < 0 || shardIndex >= totalShards {
		return elems
	}
	size, longer := len(elems)/totalShards, len(elems)%totalShards
	start := shardIndex*size + min(shardIndex, longer)
	end := start + size
	if shardIndex < longer {
		end++
	}
	if start >= len(elems) {
		return []any{}
	}
	return elems[start:min(end, len(elems))]
}

// seq is haptic's seq: 0 to n-1, empty for n <= 0. A longer sequence
// than maxSeq ends the rendering: haptic's signature has no error result.
func seq(env native.Env, n int) []int {
	if n > maxSeq {
		env.Stop(fmt.Errorf("seq: %d is more than the %d items allowed", n, maxSeq))
		return nil
	}
	sequence := make([]int, max(n, 0))
	for i := range sequence {
		sequence[i] = i
	}
	return sequence
}

// merge is haptic's merge: a new map with dict's entries, then updates'.
func merge(dict, updates map[string]any) map[string]any {
	merged := make(map[string]any, len(dict)+len(updates))
	for k, v := range dict {
		merged[k] = v
	}
	for k, v := range updates {
		merged[k] = v
	}
	return merged
}

// namespace is haptic's namespace: a map the template can update from
// inside loops; nil starts an empty one.
func namespace(init map[string]any) map[string]any {
	if init == nil {
		return map[string]any{}
	}
	return init
}

// sortedKeys is haptic's keys: the keys of any map, sorted, so that a
// template ranges over a map in a stable order. Keys are read with
// reflect.Value.String, as haptic does: a non-string key reads as
// "<int Value>" and the like. Anything but a map has no keys.
func sortedKeys(dict any) []string {
	if dict == nil {
		return []string{}
	}
	rv := reflect.ValueOf(dict)
	if rv.Kind() != reflect.Map {
		return []string{}
	}
	keys := make([]string, 0, rv.Len())
	for _, k := range rv.MapKeys() {
		keys = append(keys, k.String())
	}
	slices.Sort(keys)
	return keys
}

// sortStrings is haptic's sort_strings: items printed with %v, sorted.
func sortStrings(items []any) []string {
	texts := make([]string, len(items))
	for i, item := range items {
		texts[i] = fmt.Sprint(item)
	}
	slices.Sort(texts)
	return texts
}

// selectAttr is haptic's selectattr, Jinja's filter: the items (nil ones
// dropped) whose attribute attr, read as dig reads one key, passes a
// test. With a test and a value, "eq" and "ne" compare as tostring does
// and "in" looks the attribute up in a list; otherwise (no test, a test
// without value, or an unknown test) the attribute must be non-nil.
func selectAttr(items any, attr string, args ...any) []any {
	selected := []any{}
	elems, ok := listElems(items)
	if !ok {
		return selected
	}
	test, want := "", any(nil)
	if len(args) >= 2 {
		test, _ = args[0].(string)
		want = args[1]
	}
	for _, item := range elems {
		if item != nil && attrPasses(test, dig(item, attr), want) {
			selected = append(selected, item)
		}
	}
	return selected
}

func attrPasses(test string, value, want any) bool {
	switch test {
	case "eq":
		return toString(value) == toString(want)
	case "ne":
		return toString(value) != toString(want)
	case "in":
		return inList(value, want)
	}
	return value != nil
}

// inList reports whether value is, as tostring prints it, one of list's
// elements; a nil list or one that is not a slice holds nothing.
func inList(value, list any) bool {
	elems, _ := listElems(list)
	want := toString(value)
	for _, elem := range elems {
		if toString(elem) == want {
			return true
		}
	}
	return false
}

// joinTexts joins parts printed as tostring prints them.
func joinTexts(sep string, parts []any) string {
	texts := make([]string, len(parts))
	for i, part := range parts {
		texts[i] = toString(part)
	}
	return strings.Join(texts, sep)
}

// joinKey is haptic's join_key: parts printed as tostring does, joined
// with sep.
func joinKey(env native.Env, sep string, parts ...any) string {
	if repeatsTooMuch(len(parts)-1, len(sep)) {
		env.Stop(errTooMuchText("join_key"))
		return ""
	}
	return joinTexts(sep, parts)
}

// join is haptic's join, which also takes the []any append builds: a
// []string as it is, a []any's elements printed with %v, and anything
// else joins to "".
func join(env native.Env, items any, sep string) string {
	var texts []string
	switch items := items.(type) {
	case []string:
		texts = items
	case []any:
		texts = toStringSlice(items)
	default:
		return ""
	}
	if repeatsTooMuch(len(texts)-1, len(sep)) {
		env.Stop(errTooMuchText("join"))
		return ""
	}
	return strings.Join(texts, sep)
}

// globMatch is haptic's glob_match: the names among items matching a
// path.Match pattern, items being strings or, in a []any, maps with a
// "name". No items or no pattern match nothing; items of another type
// and a malformed pattern end the rendering (haptic panics).
func globMatch(env native.Env, items any, pattern string) []string {
	if items == nil || pattern == "" {
		return []string{}
	}
	var names []string
	switch items := items.(type) {
	case []string:
		names = items
	case []any:
		for _, item := range items {
			if name := globName(item); name != "" {
				names = append(names, name)
			}
		}
	default:
		env.Stop(fmt.Errorf("glob_match: expected []string or []interface{}, got %T", items))
		return nil
	}
	matched := make([]string, 0, len(names))
	for _, name := range names {
		ok, err := path.Match(pattern, name)
		if err != nil {
			env.Stop(fmt.Errorf("glob_match: invalid pattern %q: %w", pattern, err))
			return nil
		}
		if ok {
			matched = append(matched, name)
		}
	}
	return matched
}

// globName is the name glob_match matches an element of a []any by.
func globName(item any) string {
	switch item := item.(type) {
	case string:
		return item
	case map[string]any:
		name, _ := item["name"].(string)
		return name
	}
	return ""
}

// trimSpace is haptic's strip, strings_trim and trimSpace: the argument
// as tostring prints it, without surrounding white space.
func trimSpace(s any) string {
	return strings.TrimSpace(toString(s))
}

// b64decode is haptic's b64decode, for a Secret's data: standard base64,
// the argument printed as tostring does.
func b64decode(s any) (string, error) {
	decoded, err := base64.StdEncoding.DecodeString(toString(s))
	if err != nil {
		return "", err
	}
	return string(decoded), nil
}

// containsText is haptic's strings_contains, on tostring's texts.
func containsText(s, substr any) bool {
	return strings.Contains(toString(s), toString(substr))
}

// splitText is haptic's strings_split, on tostring's texts.
func splitText(s, sep any) []string {
	return strings.Split(toString(s), toString(sep))
}

// splitTextN is haptic's strings_splitn, on tostring's texts.
func splitTextN(s, sep any, n int) []string {
	return strings.SplitN(toString(s), toString(sep), n)
}

// lowerText is haptic's strings_lower, on tostring's text.
func lowerText(s any) string {
	return strings.ToLower(toString(s))
}

// replaceText is haptic's replace and strings_replace: every old in s
// replaced with new, all three printed as tostring does.
func replaceText(env native.Env, s, old, new any) string {
	return replaceAllBounded(env, "replace", toString(s), toString(old), toString(new))
}

// replaceAll is upstream's replaceAll, which haptic registers, bounded.
func replaceAll(env native.Env, s, old, new string) string {
	return replaceAllBounded(env, "replaceAll", s, old, new)
}

// replaceAllBounded replaces every old in s with new unless that adds
// more than maxAddedText: new is copied once per match (once per rune
// and once more when old is empty).
func replaceAllBounded(env native.Env, function, s, old, new string) string {
	if repeatsTooMuch(strings.Count(s, old), len(new)-len(old)) {
		env.Stop(errTooMuchText(function))
		return ""
	}
	return strings.ReplaceAll(s, old, new)
}

// title is haptic's title: English title case (each word's first letter
// upper case, the others lower case) of tostring's text.
func title(s any) string {
	return cases.Title(language.English).String(toString(s))
}

// sanitizeRegex is haptic's sanitize_regex: tostring's text with every
// regular expression metacharacter escaped.
func sanitizeRegex(s any) string {
	return regexp.QuoteMeta(toString(s))
}

// isDigit is haptic's isdigit: true for a non-empty text of Unicode
// digits only.
func isDigit(s any) bool {
	text := toString(s)
	if text == "" {
		return false
	}
	for _, r := range text {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// indent is haptic's indent (Jinja's): every line of tostring's text but
// the first and the blank ones (only white space) prefixed. args are the
// prefix (an int of spaces or a string; 4 spaces when absent or nil),
// then whether to indent the first line and the blank ones too.
func indent(s any, args ...any) (string, error) {
	prefix, err := indentPrefix(args)
	if err != nil {
		return "", err
	}
	first, err := indentFlag(args, 1, "first")
	if err != nil {
		return "", err
	}
	blank, err := indentFlag(args, 2, "blank")
	if err != nil {
		return "", err
	}
	lines := strings.Split(toString(s), "\n")
	indented := make([]bool, len(lines))
	count := 0
	for i, line := range lines {
		indented[i] = (i > 0 || first) && (blank || strings.TrimSpace(line) != "")
		if indented[i] {
			count++
		}
	}
	if count == 0 {
		return strings.Join(lines, "\n"), nil
	}
	if repeatsTooMuch(count, prefix.size()) {
		return "", errTooMuchText("indent")
	}
	text := prefix.text()
	var b strings.Builder
	for i, line := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		if indented[i] {
			b.WriteString(text)
		}
		b.WriteString(line)
	}
	return b.String(), nil
}

// indentation is indent's prefix, kept as a count of spaces until the
// result's size is known to be within bounds: indent(s, 1<<40) must not
// build its prefix first.
type indentation struct {
	spaces int
	prefix string
}

func (p indentation) size() int { return p.spaces + len(p.prefix) }

func (p indentation) text() string { return strings.Repeat(" ", p.spaces) + p.prefix }

func indentPrefix(args []any) (indentation, error) {
	if len(args) == 0 || args[0] == nil {
		return indentation{spaces: 4}, nil
	}
	switch width := args[0].(type) {
	case int:
		if width < 0 {
			return indentation{}, fmt.Errorf("indent width must be non-negative, got %d", width)
		}
		return indentation{spaces: width}, nil
	case string:
		return indentation{prefix: width}, nil
	}
	return indentation{}, fmt.Errorf("indent width must be int or string, got %T", args[0])
}

func indentFlag(args []any, i int, name string) (bool, error) {
	if len(args) <= i || args[i] == nil {
		return false, nil
	}
	flag, ok := args[i].(bool)
	if !ok {
		return false, fmt.Errorf("indent '%s' must be bool, got %T", name, args[i])
	}
	return flag, nil
}

// debug is haptic's debug: value as indented JSON (or %v when it has no
// JSON form) in HAProxy comment lines under "# DEBUG label:". A value
// whose indented form is past the bound is named, not shown: debug takes
// no native.Env (a template may use the name as a value, which upstream
// cannot do with a function taking one), so it cannot stop the rendering.
func debug(value any, label ...string) string {
	const prefix, indent = "# ", "  "
	heading := "# DEBUG:"
	if len(label) > 0 && label[0] != "" {
		heading = "# DEBUG " + label[0] + ":"
	}
	var dump string
	if compact, err := json.Marshal(value); err != nil {
		dump = fmt.Sprint(value)
	} else if indentationTooLarge(compact, prefix, indent) {
		return fmt.Sprintf("%s\n# (not shown: indented, it is over %d bytes)\n", heading, maxAddedText)
	} else {
		// What json.MarshalIndent gives, without marshalling twice.
		var indented bytes.Buffer
		_ = json.Indent(&indented, compact, prefix, indent)
		dump = indented.String()
	}
	return heading + "\n# " + dump + "\n"
}

// marshalJSONIndent is upstream's marshalJSONIndent: v as JSON, each
// element on a line of prefix and one indent per level, both white space
// only. An indentation that would add more than maxAddedText (a long
// indent repeated at every level of a deep value) is refused.
func marshalJSONIndent(v any, prefix, indent string) (native.JSON, error) {
	if !onlyJSONSpace(prefix) {
		return "", errors.New("marshalJSONIndent: prefix does not contain only whitespace")
	}
	if !onlyJSONSpace(indent) {
		return "", errors.New("marshalJSONIndent: indent does not contain only whitespace")
	}
	compact, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	if indentationTooLarge(compact, prefix, indent) {
		return "", errTooMuchText("marshalJSONIndent")
	}
	// What json.MarshalIndent gives, without marshalling twice.
	var indented bytes.Buffer
	_ = json.Indent(&indented, compact, prefix, indent)
	return native.JSON(indented.String()), nil
}

func onlyJSONSpace(s string) bool {
	return strings.Trim(s, " \t\n\r") == ""
}

// indentationTooLarge reports whether indenting compact JSON could add
// more than maxAddedText: each bracket and comma may start a line of
// prefix and one indent per level of nesting, each colon gains a space.
func indentationTooLarge(compact []byte, prefix, indent string) bool {
	added, depth := 0, 0
	inString, escaped := false, false
	for _, c := range compact {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			continue
		case ':':
			added++
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ',':
		default:
			continue
		}
		added += 1 + len(prefix) + max(depth, 0)*len(indent)
		if added > maxAddedText {
			return true
		}
	}
	return added > maxAddedText
}

// sprintf is upstream's sprintf (fmt.Sprintf), refusing widths and
// precisions that would pad the result by more than maxAddedText
// ("%1000000d" is a megabyte from ten bytes).
func sprintf(env native.Env, format string, a ...any) string {
	if formatPadding(format, a) > maxAddedText {
		env.Stop(errTooMuchText("sprintf"))
		return ""
	}
	return fmt.Sprintf(format, a...)
}

// fmtMaxWidth is the largest width or precision fmt honours.
const fmtMaxWidth = 1_000_000

// formatPadding is at most how much format's widths and precisions can
// pad or extend its operands: their sum, a '*' counting as the largest
// integer argument.
func formatPadding(format string, args []any) int {
	star := 0
	for _, arg := range args {
		if n, ok := sortNumber(arg); ok && n == math.Trunc(n) {
			star = max(star, int(min(math.Abs(n), fmtMaxWidth)))
		}
	}
	total := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		n := 0
	verb:
		for i++; i < len(format); i++ {
			switch c := format[i]; {
			case c >= '0' && c <= '9':
				n = min(n*10+int(c-'0'), fmtMaxWidth)
			case c == '*':
				total += star
			case c == '[':
				// An argument index, not a width.
				if end := strings.IndexByte(format[i:], ']'); end > 0 {
					i += end
				}
			case c == '.' || strings.IndexByte("+-# ", c) >= 0:
				total, n = total+n, 0
			default:
				break verb
			}
		}
		total += n
	}
	return total
}

// regexSearch is haptic's regex_search: whether tostring's text of s
// holds a match of pattern (Go's regexp, linear in the text). A pattern
// that does not compile, or is too large, ends the rendering (haptic
// stops with env.Fatal).
func regexSearch(env native.Env, s, pattern any) bool {
	re, err := searchPatterns.compile(toString(pattern))
	if err != nil {
		env.Stop(fmt.Errorf("regex_search: %w", err))
		return false
	}
	return re.MatchString(toString(s))
}

// patternCache holds compiled patterns, within maxCachedPatterns and
// maxCachedInsts: a template calling regex_search in a loop compiles each
// pattern once, and a tenant's patterns cannot make it grow. Compiled
// patterns are safe to share between renderings.
type patternCache struct {
	mu       sync.Mutex
	compiled map[string]cachedPattern
	insts    int
	// maxPatterns and maxInsts bound what the cache holds.
	maxPatterns, maxInsts int
}

type cachedPattern struct {
	re    *regexp.Regexp
	insts int
}

var searchPatterns = newPatternCache(maxCachedPatterns, maxCachedInsts)

func newPatternCache(maxPatterns, maxInsts int) *patternCache {
	return &patternCache{compiled: map[string]cachedPattern{}, maxPatterns: maxPatterns, maxInsts: maxInsts}
}

func (c *patternCache) compile(pattern string) (*regexp.Regexp, error) {
	if len(pattern) > maxPatternBytes {
		return nil, fmt.Errorf("a pattern of %d bytes is longer than the %d allowed", len(pattern), maxPatternBytes)
	}
	c.mu.Lock()
	cached, ok := c.compiled[pattern]
	c.mu.Unlock()
	if ok {
		return cached.re, nil
	}
	insts, err := patternSize(pattern)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("invalid pattern %q: %w", pattern, err)
	}
	c.store(pattern, cachedPattern{re: re, insts: insts})
	return re, nil
}

// store caches a compiled pattern, evicting arbitrary ones to stay within
// bounds: which one goes only costs a later compilation.
func (c *patternCache) store(pattern string, p cachedPattern) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for other, old := range c.compiled {
		if len(c.compiled) < c.maxPatterns && c.insts+p.insts <= c.maxInsts {
			break
		}
		delete(c.compiled, other)
		c.insts -= old.insts
	}
	if _, ok := c.compiled[pattern]; !ok {
		c.compiled[pattern] = p
		c.insts += p.insts
	}
}

// patternSize is the number of instructions pattern compiles to, or an
// error when it does not compile or is larger than maxPatternInsts.
func patternSize(pattern string) (int, error) {
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0, fmt.Errorf("invalid pattern %q: %w", pattern, err)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return 0, fmt.Errorf("invalid pattern %q: %w", pattern, err)
	}
	if len(prog.Inst) > maxPatternInsts {
		return 0, fmt.Errorf("the pattern compiles to more than the %d instructions allowed", maxPatternInsts)
	}
	return len(prog.Inst), nil
}

// Upstream's builtins. haptic registers these from its fork's copy of
// upstream Scriggo's builtin package; upstream's cannot be imported here
// (it needs gopkg.in/yaml.v3, which go.mod does not require), so they are
// written again to upstream's documented behaviour and error messages.
// Where upstream panics on an argument, the rendering is stopped with the
// same message instead: a panic is a rendering error there too, only a
// less readable one.

// absInt is abs; the smallest int is its own absolute value.
func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// maxInt is max; Go's builtin cannot be passed as a value.
func maxInt(x, y int) int { return max(x, y) }

// minInt is min.
func minInt(x, y int) int { return min(x, y) }

// abbreviate shortens s, without its trailing white space, to fewer than
// n runes ending in "...", cut at a word boundary. As upstream does, a
// text of more than n bytes but exactly n runes is shortened too.
func abbreviate(s string, n int) string {
	const spaces = " \n\r\t\f"
	s = strings.TrimRight(s, spaces)
	switch {
	case len(s) <= n:
		return s
	case n < 3:
		return ""
	case utf8.RuneCountInString(s) < n:
		return s
	}
	// The words that end before the (n-2)th rune leave room for "...".
	room := runeOffset(s, n-2)
	kept := ""
	if space := strings.LastIndexAny(s[:room], spaces); space > 0 {
		kept = strings.TrimRight(s[:space], spaces)
	}
	if strings.HasSuffix(kept, ".") || strings.HasSuffix(kept, ",") {
		kept = kept[:len(kept)-1]
	}
	return kept + "..."
}

// runeOffset is the byte offset of s's rune number k (from 0), or len(s).
func runeOffset(s string, k int) int {
	for i := range s {
		if k == 0 {
			return i
		}
		k--
	}
	return len(s)
}

// isWordSeparator is upstream's (and strings.Title's) word boundary: any
// ASCII but letters, digits and '_', and white space beyond ASCII.
func isWordSeparator(r rune) bool {
	if r <= unicode.MaxASCII {
		return !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || r == '_')
	}
	if unicode.IsLetter(r) || unicode.IsDigit(r) {
		return false
	}
	return unicode.IsSpace(r)
}

// capitalize upper-cases the first rune that is not a word separator,
// unless it is upper case already. (Upstream skips the upper-cased
// rune's length rather than the original's, which garbles or panics on
// the few letters whose cases differ in length; this skips the
// original's.)
func capitalize(s string) string {
	for i, r := range s {
		if isWordSeparator(r) {
			continue
		}
		if unicode.IsUpper(r) {
			return s
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		return s[:i] + string(unicode.ToUpper(r)) + s[i+size:]
	}
	return s
}

// capitalizeAll upper-cases every rune that follows a word separator, and
// the first one.
func capitalizeAll(s string) string {
	previous := ' '
	return strings.Map(func(r rune) rune {
		startsWord := isWordSeparator(previous)
		previous = r
		if startsWord {
			return unicode.ToUpper(r)
		}
		return r
	}, s)
}

// toKebab is upstream's toKebab: letters lower-cased, a dash where a word
// starts with an upper-case letter after a letter or digit (or ends a run
// of capitals: "HTTPServer" is "http-server"), and one dash for each run
// of other characters between words.
func toKebab(s string) string {
	runes := []rune(s)
	var b strings.Builder
	b.Grow(len(s) + 2)
	inWord := false
	for i, r := range runes {
		switch {
		case unicode.IsLower(r) || unicode.IsDigit(r):
			b.WriteRune(r)
			inWord = true
		case unicode.IsUpper(r):
			if inWord && (unicode.IsLower(runes[i-1]) || i+1 < len(runes) && unicode.IsLower(runes[i+1])) {
				b.WriteByte('-')
			}
			b.WriteRune(unicode.ToLower(r))
			inWord = true
		default:
			if inWord && i+1 < len(runes) {
				b.WriteByte('-')
				inWord = false
			}
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// formatFloat is f in format "e", "f" or "g" with precision digits
// (-1 to 1000; -1 is the fewest that read back as f).
func formatFloat(env native.Env, f float64, format string, precision int) string {
	if format != "e" && format != "f" && format != "g" {
		env.Stop(errors.New("formatFloat: invalid format " + strconv.Quote(format)))
		return ""
	}
	if precision < -1 || precision > 1000 {
		env.Stop(errors.New("formatFloat: invalid precision " + strconv.Itoa(precision)))
		return ""
	}
	return strconv.FormatFloat(f, format[0], precision, 64)
}

// formatInt is i in base 2 to 36, with lower-case letters.
func formatInt(env native.Env, i, base int) string {
	if base < 2 || base > 36 {
		env.Stop(errors.New("formatInt: invalid base " + strconv.Itoa(base)))
		return ""
	}
	return strconv.FormatInt(int64(i), base)
}

// parseFloat reads a decimal float; hexadecimal ("0x..."), NaN and
// infinities are refused.
func parseFloat(s string) (float64, error) {
	invalid := errors.New("parseFloat: parsing " + strconv.Quote(s) + ": invalid syntax")
	if strings.HasPrefix(s, "0x") {
		return 0, invalid
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errors.New("parseFloat: parsing " + strconv.Quote(s) + ": " + numError(err))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, invalid
	}
	return f, nil
}

// parseInt reads an int in base 2 to 36; base 0 is refused (upstream
// does not guess the base from a prefix).
func parseInt(s string, base int) (int, error) {
	if base == 0 {
		return 0, errors.New("parseInt: parsing " + strconv.Quote(s) + ": invalid base 0")
	}
	i, err := strconv.ParseInt(s, base, 0)
	if err != nil {
		return 0, errors.New("parseInt: parsing " + strconv.Quote(s) + ": " + numError(err))
	}
	return int(i), nil
}

// numError is the reason in a strconv error, without its quoting of the
// input.
func numError(err error) string {
	var numErr *strconv.NumError
	if errors.As(err, &numErr) {
		return numErr.Err.Error()
	}
	return err.Error()
}

// parseDuration reads a duration such as "300ms" or "2h45m".
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, renamedError(err, "time", "parseDuration")
	}
	return d, nil
}

// renamedError is err with its package prefix ("json: ") replaced by the
// template function's name, as upstream reports errors.
func renamedError(err error, pkg, function string) error {
	return errors.New(function + ": " + strings.TrimPrefix(err.Error(), pkg+": "))
}

// encodeBase64 is base64: standard encoding, with padding.
func encodeBase64(s string) string {
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// encodeHex is hex: lower-case hexadecimal of s's bytes.
func encodeHex(s string) string {
	return hex.EncodeToString([]byte(s))
}

// md5Hex, sha1Hex and sha256Hex are md5, sha1 and sha256: the checksum
// of s in hexadecimal.
func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// hmacSHA1 and hmacSHA256 are the HMAC of message under key, in standard
// base64.
func hmacSHA1(message, key string) string { return hmacBase64(sha1.New, message, key) }

func hmacSHA256(message, key string) string { return hmacBase64(sha256.New, message, key) }

func hmacBase64(newHash func() hash.Hash, message, key string) string {
	mac := hmac.New(newHash, []byte(key))
	mac.Write([]byte(message))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// queryEscape escapes s for a URL query: every byte but ASCII letters,
// digits, '-', '.' and '_' as %xx, in lower-case hexadecimal (a space is
// %20, not '+').
func queryEscape(s string) string {
	const digits = "0123456789abcdef"
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(digits[c>>4])
		b.WriteByte(digits[c&0xf])
	}
	return b.String()
}

// reverse reverses a slice in place; nil is left alone, and anything but
// a slice is refused.
func reverse(env native.Env, slice any) {
	if slice == nil {
		return
	}
	if kind := reflect.TypeOf(slice).Kind(); kind != reflect.Slice {
		env.Stop(errors.New("reverse: cannot reverse non-slice value of type " + reflect.TypeOf(slice).String()))
		return
	}
	swap := reflect.Swapper(slice)
	for i, j := 0, reflect.ValueOf(slice).Len()-1; i < j; i, j = i+1, j-1 {
		swap(i, j)
	}
}

// marshalJSON is v as JSON.
func marshalJSON(v any) (native.JSON, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", renamedError(err, "json", "marshalJSON")
	}
	return native.JSON(b), nil
}

// unmarshalJSON parses data into the value v points to. The value is
// replaced only when data parses: it is decoded into a new one first.
func unmarshalJSON(data string, v any) error {
	if v == nil {
		return errors.New("unmarshalJSON: cannot unmarshal into nil")
	}
	target := reflect.ValueOf(v)
	if target.Kind() != reflect.Pointer {
		return errors.New("unmarshalJSON: cannot unmarshal into non-pointer value of type " + target.Type().String())
	}
	if target.IsNil() {
		return errors.New("unmarshalJSON: cannot unmarshal into a nil pointer of type " + target.Type().String())
	}
	decoded := reflect.New(target.Type().Elem())
	if err := json.Unmarshal([]byte(data), decoded.Interface()); err != nil {
		return unmarshalError(err)
	}
	target.Elem().Set(decoded.Elem())
	return nil
}

// unmarshalError words json.Unmarshal's error as upstream does.
func unmarshalError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		return renamedError(err, "json", "unmarshalJSON")
	}
	if typeErr.Struct != "" || typeErr.Field != "" {
		return errors.New("unmarshalJSON: cannot unmarshal " + typeErr.Value + " into struct field " + typeErr.Struct + "." + typeErr.Field + " of type " + typeErr.Type.String())
	}
	return errors.New("unmarshalJSON: cannot unmarshal " + typeErr.Value + " into value of type " + typeErr.Type.String())
}
