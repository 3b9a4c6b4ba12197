package render

import (
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// What a template may call: every function of sprig v3 is kept as it is,
// bounded (replaced by a version of bounded.go refusing arguments that
// would build a huge value), or removed, as the table below records.
// TestEverySprigFunctionHasAPolicy fails when sprig gains a function, so
// that none reaches templates before someone has read it.
//
// Renderings must be deterministic (the verdict cache and publication
// compare them) and cheap enough to run inside an admission request, so
// whatever reads the clock, the environment, the network or a random
// source is removed, and so is whatever costs seconds of CPU per call.

type funcPolicy int

const (
	kept funcPolicy = iota
	bounded
	removed
)

var sprigPolicies = []struct {
	names  string // separated by spaces
	policy funcPolicy
	why    string
}{
	{"hello", kept, "a constant"},
	{"abbrev abbrevboth trunc substr initials nospace trim trimAll trimall trimPrefix trimSuffix " +
		"contains hasPrefix hasSuffix plural sha1sum sha256sum sha512sum adler32sum b64dec b32dec " +
		"regexMatch mustRegexMatch regexFind mustRegexFind", kept,
		"the result is no longer than the arguments, or of a fixed size; linear time (regexp is RE2)"},
	{"b64enc b32enc regexQuoteMeta upper lower title untitle swapcase snakecase camelcase kebabcase", bounded,
		"the result is a few times the input at most, capped at MaxValueBytes so that a loop feeding one its own result stops"},
	{"urlJoin", bounded, "result capped at MaxValueBytes, as above"},
	{"add add1 add1f addf sub subf mul mulf div divf mod max min biggest maxf minf ceil floor round " +
		"int int64 float64 atoi", kept, "numbers in, a number out"},
	{"toDecimal", bounded, "prints its argument with fmt: measured first (valueSize)"},
	{"list tuple first mustFirst last mustLast rest mustRest initial mustInitial reverse mustReverse " +
		"slice mustSlice compact mustCompact chunk mustChunk has mustHas without mustWithout", kept,
		"a list no longer than the arguments; reflect.DeepEqual is safe on shared and cyclic values"},
	{"get unset hasKey pluck pick omit dig", kept, "one level of a dict; no larger than the arguments"},
	{"default empty coalesce all any ternary typeOf typeIs typeIsLike kindOf kindIs deepEqual " +
		"fromJson mustFromJson", kept, "one level of the arguments, or a result in proportion to the text given"},
	{"base dir clean ext isAbs osBase osClean osDir osExt osIsAbs", kept, "path functions; Gatehouse runs on Linux only"},
	{"semver semverCompare urlParse duration durationRound decryptAES buildCustomCert", kept,
		"parse or format their arguments; durationRound reads the clock only for a time value, which no kept function makes"},
	{"until untilStep seq", bounded, "at most MaxListLength numbers, counted before any is made"},
	{"repeat", bounded, "count × length ≤ MaxValueBytes, checked before repeating"},
	{"indent nindent", bounded, "width ≤ MaxWidth and the result ≤ MaxValueBytes, checked before indenting"},
	{"replace", bounded, "result ≤ MaxValueBytes, computed from the number of matches before replacing"},
	{"regexReplaceAll mustRegexReplaceAll regexReplaceAllLiteral mustRegexReplaceAllLiteral", bounded,
		"result ≤ MaxValueBytes, computed from a first pass over the matches"},
	{"regexSplit mustRegexSplit regexFindAll mustRegexFindAll split splitList splitn", bounded,
		"at most MaxListLength parts"},
	{"wrap wrapWith", bounded, "result ≤ MaxValueBytes, computed from the breaks it can insert"},
	{"cat join quote squote toString toStrings sortAlpha", bounded,
		"format their arguments with fmt: measured first (valueSize: MaxValueBytes, MaxValueDepth), result capped"},
	{"toJson mustToJson toPrettyJson mustToPrettyJson toRawJson mustToRawJson", bounded,
		"measured first, result capped"},
	{"deepCopy mustDeepCopy", bounded, "measured first: a list holding the same list twice, forty times over, copies to 2^40 items"},
	{"set", bounded, "refuses a value holding the dict it is stored in (a cycle would make printing recurse until the stack overflows)"},
	{"merge mustMerge mergeOverwrite mustMergeOverwrite", bounded,
		"measured first, and a source sharing a dict with the destination is refused (it could make a cycle)"},
	{"dict", bounded, "a key that is not a string is printed with fmt: measured first"},
	{"concat append push mustAppend mustPush prepend mustPrepend", bounded, "at most MaxListLength items"},
	{"uniq mustUniq", bounded, "linear for strings, numbers and booleans; at most MaxListLength comparisons of dicts or lists"},
	{"keys values", bounded, "sorted by key: sprig follows Go's random map order"},
	{"fail", bounded, "replaced by Gatehouse's, whose error carries the message as a *FailError"},
	{"env expandenv", removed, "would copy the controller's environment, credentials included, into a published config"},
	{"getHostByName", removed, "a rendering would depend on DNS and wait on the network inside an admission request"},
	{"now ago date dateInZone date_in_zone dateModify date_modify mustDateModify must_date_modify " +
		"htmlDate htmlDateInZone toDate mustToDate unixEpoch", removed,
		"read the clock or the machine's time zone (date of anything but a time is now): not deterministic"},
	{"randAlpha randAlphaNum randAscii randNumeric randBytes randInt shuffle uuidv4", removed, "random: not deterministic"},
	{"genPrivateKey genCA genCAWithKey genSelfSignedCert genSelfSignedCertWithKey genSignedCert genSignedCertWithKey " +
		"bcrypt htpasswd encryptAES", removed, "random (keys, salts, IVs), and key generation costs up to seconds of CPU per call"},
	{"derivePassword", removed, "scrypt: deterministic, but tens of megabytes and milliseconds of CPU per call, unbounded by repetition"},
}

// templateBuiltinOverrides replace text/template's builtins that format
// their arguments with fmt; the others (and, or, not, len, index, slice,
// eq, ne, lt, le, gt, ge, call) take constant space.
var templateBuiltinOverrides = template.FuncMap{
	"print":    boundedPrint,
	"printf":   boundedPrintf,
	"println":  boundedPrintln,
	"html":     boundedHTML,
	"js":       boundedJS,
	"urlquery": boundedURLQuery,
}

// boundedSprigFuncs are the bounded replacements, made from sprig's own
// functions where only a check is added.
func boundedSprigFuncs(sprigFuncs template.FuncMap) template.FuncMap {
	stringFunc := func(name string) func(string) (string, error) {
		return cappedString(name, sprigFuncs[name].(func(string) string))
	}
	anyToString := func(name string) func(any) (string, error) {
		return measuredToString(name, sprigFuncs[name].(func(any) string))
	}
	anyToStringOrError := func(name string) func(any) (string, error) {
		return measuredToStringOrError(name, sprigFuncs[name].(func(any) (string, error)))
	}
	formatter := func(name string) func(...any) (string, error) {
		return boundedFormatter(name, sprigFuncs[name].(func(...any) string))
	}
	merge := func(name string) func(map[string]any, ...map[string]any) (any, error) {
		switch f := sprigFuncs[name].(type) {
		case func(map[string]any, ...map[string]any) any:
			return boundedMerge(name, func(dst map[string]any, srcs ...map[string]any) (any, error) { return f(dst, srcs...), nil })
		case func(map[string]any, ...map[string]any) (any, error):
			return boundedMerge(name, f)
		}
		panic(fmt.Sprintf("sprig's %s changed its signature", name))
	}
	grow := func(name string) func(any, any) ([]any, error) {
		switch f := sprigFuncs[name].(type) {
		case func(any, any) []any:
			return boundedGrow(name, func(list, item any) ([]any, error) { return f(list, item), nil })
		case func(any, any) ([]any, error):
			return boundedGrow(name, f)
		}
		panic(fmt.Sprintf("sprig's %s changed its signature", name))
	}
	urlJoin := sprigFuncs["urlJoin"].(func(map[string]any) string)
	deepCopy := sprigFuncs["mustDeepCopy"].(func(any) (any, error))

	funcs := template.FuncMap{
		"until":     boundedUntil,
		"untilStep": func(start, stop, step int) ([]int, error) { return boundedUntilStep("untilStep", start, stop, step) },
		"seq":       boundedSeq,
		"repeat":    boundedRepeat,
		"indent":    boundedIndent,
		"nindent":   boundedNindent,
		"replace":   boundedReplace,
		"wrap": func(wrapLength int, text string) (string, error) {
			return boundedWrapWith("wrap", func(l int, _, s string) string {
				return sprigFuncs["wrap"].(func(int, string) string)(l, s)
			})(wrapLength, "\n", text)
		},
		"wrapWith":                   boundedWrapWith("wrapWith", sprigFuncs["wrapWith"].(func(int, string, string) string)),
		"regexReplaceAll":            boundedRegexReplace("regexReplaceAll", false),
		"mustRegexReplaceAll":        boundedRegexReplace("mustRegexReplaceAll", false),
		"regexReplaceAllLiteral":     boundedRegexReplace("regexReplaceAllLiteral", true),
		"mustRegexReplaceAllLiteral": boundedRegexReplace("mustRegexReplaceAllLiteral", true),
		"regexSplit":                 boundedRegexList("regexSplit", regexSplitN),
		"mustRegexSplit":             boundedRegexList("mustRegexSplit", regexSplitN),
		"regexFindAll":               boundedRegexList("regexFindAll", regexFindAllN),
		"mustRegexFindAll":           boundedRegexList("mustRegexFindAll", regexFindAllN),
		"split":                      boundedSplit(sprigFuncs["split"].(func(string, string) map[string]string)),
		"splitList":                  boundedSplitList,
		"splitn":                     boundedSplitn(sprigFuncs["splitn"].(func(string, int, string) map[string]string)),
		"cat":                        formatter("cat"),
		"quote":                      formatter("quote"),
		"squote":                     formatter("squote"),
		"join":                       boundedJoin(sprigFuncs["join"].(func(string, any) string)),
		"toString":                   anyToString("toString"),
		"toStrings":                  measuredFirst("toStrings", sprigFuncs["toStrings"].(func(any) []string)),
		"sortAlpha":                  measuredFirst("sortAlpha", sprigFuncs["sortAlpha"].(func(any) []string)),
		"toDecimal":                  measuredFirst("toDecimal", sprigFuncs["toDecimal"].(func(any) int64)),
		"toJson":                     anyToString("toJson"),
		"mustToJson":                 anyToStringOrError("mustToJson"),
		"toPrettyJson":               anyToString("toPrettyJson"),
		"mustToPrettyJson":           anyToStringOrError("mustToPrettyJson"),
		"toRawJson":                  anyToString("toRawJson"),
		"mustToRawJson":              anyToStringOrError("mustToRawJson"),
		"deepCopy":                   measuredFirstOrError("deepCopy", deepCopy),
		"mustDeepCopy":               measuredFirstOrError("mustDeepCopy", deepCopy),
		"set":                        boundedSet,
		"merge":                      merge("merge"),
		"mustMerge":                  merge("mustMerge"),
		"mergeOverwrite":             merge("mergeOverwrite"),
		"mustMergeOverwrite":         merge("mustMergeOverwrite"),
		"dict":                       boundedDict(sprigFuncs["dict"].(func(...any) map[string]any)),
		"concat":                     boundedConcat(sprigFuncs["concat"].(func(...any) any)),
		"append":                     grow("append"),
		"push":                       grow("push"),
		"mustAppend":                 grow("mustAppend"),
		"mustPush":                   grow("mustPush"),
		"prepend":                    grow("prepend"),
		"mustPrepend":                grow("mustPrepend"),
		"uniq":                       boundedUniq("uniq"),
		"mustUniq":                   boundedUniq("mustUniq"),
		"keys":                       sortedDictKeys,
		"values":                     valuesByKey,
		"urlJoin":                    func(parts map[string]any) (string, error) { return capped("urlJoin", urlJoin(parts)) },
		"fail":                       fail,
	}
	for _, name := range strings.Fields("b64enc b32enc regexQuoteMeta upper lower title untitle swapcase snakecase camelcase kebabcase") {
		funcs[name] = stringFunc(name)
	}
	return funcs
}

// errOutsideRendering is what the functions bound to a rendering return if
// called on the compiled (never executed) template set instead of a
// rendering's clone; Render always rebinds them, so seeing it is a bug.
var errOutsideRendering = errors.New("only available while rendering")

// baseFuncs are the functions templates are parsed with. The functions
// bound to one rendering (render, renderGlob and the guards the rewrite
// inserts) are rebound on a clone of the template set by every run; the
// placeholders here only declare them.
var baseFuncs = newBaseFuncs()

func newBaseFuncs() template.FuncMap {
	sprigFuncs := sprig.TxtFuncMap()
	replacements := boundedSprigFuncs(sprigFuncs)
	funcs := template.FuncMap{}
	for _, entry := range sprigPolicies {
		for _, name := range strings.Fields(entry.names) {
			switch entry.policy {
			case kept:
				funcs[name] = sprigFuncs[name]
			case bounded:
				funcs[name] = replacements[name]
			}
		}
	}
	for name, f := range templateBuiltinOverrides {
		funcs[name] = f
	}
	funcs[trustedFunc] = printedText
	funcs[escapeFunc] = escapePrinted
	funcs[emptyWhenMissingFunc] = emptyWhenMissing
	notBound := func() (string, error) { return "", errOutsideRendering }
	funcs["render"] = func(string) (string, error) { return notBound() }
	funcs["renderGlob"] = func(string) (string, error) { return notBound() }
	funcs[enterTemplateFunc] = func(int64) (string, error) { return notBound() }
	funcs[leaveTemplateFunc] = notBound
	funcs[rangeCheckFunc] = func(int64, any) (any, error) { return nil, errOutsideRendering }
	return funcs
}

// fail stops the rendering with exactly message.
func fail(message string) (string, error) {
	return "", &FailError{Message: message}
}
