package haproxy

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// Policy is what a rendering must satisfy before haproxy -c reads it.
//
// haproxy -c runs as Gatehouse's user and does more than parse: it runs
// Lua, opens every file the configuration names and quotes what it read in
// its errors, which become the admission denial. The config author writes
// the templates and tenants control fields the templates print, so the
// rendering is hostile input. The policy holds on its own, without the
// process confinement: no code is loaded or run, no environment is read or
// changed, and every file haproxy opens is one the rendering wrote into
// the check's private directory. See the rule constants (RuleNoLua ...)
// and the tables in policy_keywords.go.
type Policy struct {
	// AllowLua permits lua-load, lua-load-per-thread and lua-prepend-path
	// (their file arguments must still be inside the directory). It is an
	// administrator's switch for platforms whose templates need Lua: the
	// Lua code then runs during the check, under the process confinement.
	AllowLua bool
}

// Violation is one line of haproxy.cfg outside the policy.
type Violation struct {
	// Line is the 1-based line in haproxy.cfg. A problem inside a file
	// that haproxy.cfg references (a crt-list, a SPOE configuration, an
	// lf-file) is reported on the referencing line; Message names the
	// file and its line.
	Line int
	// Keyword is the keyword, option, converter or action at fault, as
	// the policy matched it (lowercase).
	Keyword string
	// Rule is the stable id of the broken rule (RuleNoLua ...).
	Rule string
	// Message says why and how to proceed, quoting the offending line.
	Message string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s:%d: %s: %s (rule %s)", ConfigFile, v.Line, v.Keyword, v.Message, v.Rule)
}

// PolicyRefuses is the first line of a policy denial.
const PolicyRefuses = "the rendered configuration breaks Gatehouse's check policy:"

// maxDeniedViolations is how many violations a denial lists.
const maxDeniedViolations = 20

// PolicyDenial is the denial text for violations: PolicyRefuses, then one
// line per violation, at most 20, then "(N more)" when there are more.
func PolicyDenial(vs []Violation) string {
	var b strings.Builder
	b.WriteString(PolicyRefuses)
	for i, v := range vs {
		if i == maxDeniedViolations {
			fmt.Fprintf(&b, "\n(%d more)", len(vs)-maxDeniedViolations)
			break
		}
		b.WriteString("\n")
		b.WriteString(v.String())
	}
	return b.String()
}

const (
	// maxPerLine bounds the violations reported for one line: a line a
	// tenant filled with thousands of offending expressions makes a
	// bounded denial; fixing the first ones shows the next.
	maxPerLine = 8
	// proceedFiles is how a file reference is made acceptable.
	proceedFiles = "put the file in spec.maps, spec.files or spec.sslCertificates and refer to it as maps/<name>, general/<name> or ssl/<name>"
)

// Check returns the violations of out, ordered by line, deterministic. It
// reads only out (never the file system): the files a rendering refers to
// are the ones the checker writes into its private directory, and nothing
// else is there.
func (p Policy) Check(out render.Output) []Violation {
	run := &policyRun{
		policy:  p,
		out:     out,
		seen:    map[violationKey]bool{},
		perLine: map[int]int{},
		nested:  map[string]bool{},
	}
	run.checkNUL(out.HAProxyConfig, nil)
	run.checkConfig(out.HAProxyConfig, nil)
	slices.SortStableFunc(run.violations, func(a, b Violation) int { return a.Line - b.Line })
	return run.violations
}

type violationKey struct {
	line                  int
	keyword, rule, prefix string
}

// policyRun is the state of one Check, which reads the configuration in
// order as haproxy does (a base directive applies to the lines after it).
type policyRun struct {
	policy     Policy
	out        render.Output
	violations []Violation
	seen       map[violationKey]bool
	perLine    map[int]int
	// bases holds the value of each base directive and the line that
	// set it. As in haproxy, the first one counts (a second is an error).
	bases     [numBases]string
	baseLines [numBases]int
	// nested records the referenced files already checked, by kind and
	// path: each is checked (and reported) once.
	nested map[string]bool
}

// nestedFile is a file read because haproxy.cfg references it.
type nestedFile struct {
	name string // its path in the check directory, e.g. general/spoe.conf
	line int    // the line of haproxy.cfg that references it
}

// where locates a line for a report: the haproxy.cfg line, and a prefix
// naming the nested file's line when there is one.
type where struct {
	line   int
	prefix string
	text   string // the offending line, as rendered
}

// locate is the where of line lineNo (1-based) of haproxy.cfg (from ==
// nil) or of a file it references.
func locate(from *nestedFile, lineNo int, text string) where {
	if from == nil {
		return where{line: lineNo, text: text}
	}
	return where{line: from.line, prefix: fmt.Sprintf("in %s line %d: ", from.name, lineNo), text: text}
}

func (r *policyRun) report(w where, keyword, rule, why string) {
	keyword = displayKeyword(keyword)
	key := violationKey{w.line, keyword, rule, w.prefix}
	if r.seen[key] || r.perLine[w.line] >= maxPerLine {
		return
	}
	r.seen[key] = true
	r.perLine[w.line]++
	r.violations = append(r.violations, Violation{
		Line:    w.line,
		Keyword: keyword,
		Rule:    rule,
		Message: fmt.Sprintf("%s%s; line: %s", w.prefix, why, quoteBounded(w.text)),
	})
}

// maxKeyword bounds a keyword as a violation shows it: haproxy's longest is
// under 40 bytes, and the first word of a rendered line is the author's.
const maxKeyword = 64

// displayKeyword is keyword as a violation shows it: unchanged when it is
// short printable ASCII (every real keyword, such as "option external-check"), otherwise quoted and bounded,
// so that an author's line cannot make a violation long or carry control
// characters into kubectl's output.
func displayKeyword(keyword string) string {
	if len(keyword) <= maxKeyword && !strings.ContainsFunc(keyword, func(r rune) bool { return r < ' ' || r > '~' }) {
		return keyword
	}
	return strconv.Quote(bound(keyword, maxKeyword))
}

// quoteBounded quotes a rendered line for a message: at most maxQuoted
// bytes of it (as Simplify quotes lines), control characters escaped so
// that a violation stays one line.
func quoteBounded(s string) string {
	return strconv.Quote(bound(strings.TrimSpace(s), maxQuoted))
}

// checkConfig checks text, haproxy.cfg or (from != nil) a configuration
// haproxy.cfg references, line by line.
func (r *policyRun) checkConfig(text string, from *nestedFile) {
	section := ""
	for i, raw := range strings.Split(text, "\n") {
		w := locate(from, i+1, raw)
		line := splitConfigLine(raw)
		words := line.words
		if line.envExpanded {
			r.report(w, firstWord(words, "$variable"), RuleNoEnvExpansion,
				`"$NAME" or "${NAME}" inside double quotes expands an environment variable, but the check runs with no environment: it would silently become "" here (so "${X}/etc/passwd" reads /etc/passwd); write the value itself, and a literal "$" as "\$" or inside single quotes`)
		}
		r.checkWords(w, words, from)

		// readcfgfile skips a line whose first word is empty, and
		// handles ".if", ".alert" ... itself: none names a file.
		if len(words) == 0 || words[0] == "" || strings.HasPrefix(words[0], ".") {
			continue
		}
		args := words
		prefix := ""
		if len(args) > 1 {
			if p := strings.ToLower(args[0]); p == "no" || p == "default" {
				prefix, args = p, args[1:]
			}
		}
		keyword := strings.ToLower(args[0])
		if sectionKeywords[keyword] {
			section = keyword
		}
		r.checkRefusals(w, prefix, args, section)
		r.checkDirective(w, args, from)
	}
}

// firstWord is the line's keyword for a report, or fallback.
func firstWord(words []string, fallback string) string {
	if len(words) == 0 || words[0] == "" {
		return fallback
	}
	return strings.ToLower(words[0])
}

// looseKeyword is a keyword with backslashes dropped. haproxy keeps the
// backslash of "lua\-load" (an unknown keyword for it); refusing such
// spellings too costs nothing and does not rest on that detail.
func looseKeyword(w string) string {
	return strings.ReplaceAll(strings.ToLower(w), `\`, "")
}

// checkRefusals reports keywords refused whatever their arguments.
func (r *policyRun) checkRefusals(w where, prefix string, args []string, section string) {
	keyword := looseKeyword(args[0])
	for i := range refusals {
		rf := &refusals[i]
		if keyword != rf.keyword {
			continue
		}
		next := 1
		if rf.second != "" {
			if len(args) < 2 || looseKeyword(args[1]) != rf.second {
				continue
			}
			next = 2
		}
		if rf.values != nil && (len(args) <= next || !slices.Contains(rf.values, strings.ToLower(args[next]))) {
			continue
		}
		if rf.offByNo && prefix == "no" {
			continue
		}
		if rf.lua && r.policy.AllowLua {
			continue
		}
		name := rf.keyword
		if rf.second != "" {
			name += " " + rf.second
		}
		var why string
		switch rf.rule {
		case RuleNoLua:
			why = fmt.Sprintf("%s loads Lua code, which haproxy -c runs while it reads the configuration; remove the line, or ask the Gatehouse administrator to allow Lua for this platform", name)
		case RuleNoSetenv:
			why = fmt.Sprintf("%s changes the environment the following lines expand; write the values into the configuration instead", name)
		default:
			why = fmt.Sprintf("%s %s; %s", name, rf.why, rf.proceed)
		}
		if section == "program" && rf.keyword == "command" {
			why += " (section program)"
		}
		r.report(w, name, rf.rule, why)
	}
}

// checkDirective checks the file arguments of the line's keyword.
func (r *policyRun) checkDirective(w where, args []string, from *nestedFile) {
	keyword := strings.ToLower(args[0])
	for _, e := range directiveEntries[keyword] {
		if e.lua && !r.policy.AllowLua {
			continue // refused as a whole (RuleNoLua)
		}
		for _, at := range e.at(args) {
			value := args[at]
			if e.list != 0 {
				for _, part := range strings.Split(value, string(e.list)) {
					r.checkFile(w, e, keyword, part, from)
				}
				continue
			}
			if e.sets != baseNone {
				r.setBase(w, e, value)
				continue
			}
			r.checkFile(w, e, keyword, value, from)
		}
	}
}

// setBase records a base directive, which must itself be inside.
func (r *policyRun) setBase(w where, e *fileEntry, value string) {
	if why := outsideReason(value); why != "" {
		r.report(w, e.name, RuleFileInside, fmt.Sprintf("%s %s %s, and every relative path it prefixes would be too; %s (or drop %s)", e.name, quoteBounded(value), why, proceedFiles, e.name))
	}
	if r.bases[e.sets] == "" && value != "" {
		r.bases[e.sets], r.baseLines[e.sets] = value, w.line
	}
}

// checkWords applies the checks that do not depend on the line's keyword:
// options followed by a file, actions and converters naming one.
func (r *policyRun) checkWords(w where, words []string, from *nestedFile) {
	keyword := ""
	if len(words) > 0 {
		keyword = strings.ToLower(words[0])
		if len(words) > 1 && (keyword == "no" || keyword == "default") {
			keyword = strings.ToLower(words[1])
		}
	}
	for i, word := range words {
		lower := strings.ToLower(word)
		if i > 0 && i+1 < len(words) {
			for _, e := range optionEntries[lower] {
				if e.lines == nil || slices.Contains(e.lines, keyword) {
					r.checkFile(w, e, e.name, words[i+1], from)
				}
			}
			if lower == "namespace" {
				r.checkNamespace(w, words[i+1])
			}
		}
		for _, e := range actionEntries {
			// http_act.c takes the name between "set-map(" and the
			// word's last character, whatever they are.
			if strings.HasPrefix(lower, e.name) && len(word) > len(e.name)+1 {
				r.checkFile(w, e, e.name, word[len(e.name)+1:len(word)-1], from)
			}
		}
		r.scanSamples(w, word, from)
	}
}

// checkNamespace: haproxy opens /var/run/netns/<name> for a bind or server
// "namespace" while parsing; a name with "/" would reach any file.
func (r *policyRun) checkNamespace(w where, name string) {
	if name == "*" { // server: the namespace the PROXY protocol names
		return
	}
	ok := name != "" && name != "." && name != ".."
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = cAlpha(c) || cDigit(c) || c == '.' || c == ':' || c == '_' || c == '-'
	}
	if !ok {
		r.report(w, "namespace", RuleNamespaceName, fmt.Sprintf("namespace %s is not a plain name (haproxy opens /var/run/netns/<name>); use letters, digits, '.', ':', '_' and '-' only", quoteBounded(name)))
	}
}

// scanSamples finds the converters naming a file in text: a word of the
// configuration, or the whole of an lf-file. A converter starts where an
// identifier starts (haproxy reads a name as the longest run of is_idchar
// characters). The arguments of a converter are skipped: haproxy does not
// parse them as expressions, and skipping keeps the scan linear.
func (r *policyRun) scanSamples(w where, text string, from *nestedFile) {
	r.scanSamplesAt(text, func(int) where { return w }, from)
}

// scanSamplesAt is scanSamples reporting a converter at byte i of text
// where at(i) says.
func (r *policyRun) scanSamplesAt(text string, at func(i int) where, from *nestedFile) {
	for i := 0; i < len(text); i++ {
		if i > 0 && isIDChar(text[i-1]) {
			continue
		}
		end := i
		for end < len(text) && isIDChar(text[end]) {
			end++
		}
		if end == i || end >= len(text) || text[end] != '(' {
			i = end
			continue
		}
		name := strings.ToLower(text[i:end])
		e := converterEntry(name)
		if e == nil {
			i = end
			continue
		}
		args, consumed := sampleArgs(text[end:])
		if e.argIndex < len(args) {
			r.checkFile(at(i), e, name, cString(args[e.argIndex]), from)
		}
		i = end + consumed - 1
	}
}

// outsideReason says why p is not a path inside the check's directory, or
// returns "". The directory holds only regular files the checker wrote
// (names are single path elements, see checkNames), so no symbolic link
// inside it can lead out: a relative path without ".." stays inside.
func outsideReason(p string) string {
	switch {
	case p == "":
		return "is empty"
	case strings.IndexByte(p, 0) >= 0:
		return "contains a NUL byte"
	case p[0] == '/':
		return "is an absolute path"
	case strings.Contains(p, "~"):
		return `contains "~"`
	}
	if c := path.Clean(p); c == ".." || strings.HasPrefix(c, "../") {
		return `leaves the check's directory through ".."`
	}
	return ""
}

// patternFileName is the file a pattern file's name reads, and the prefix
// that was taken off: haproxy 3.0 takes one "file@" or "opt@" (and reads
// no file for "virt@"). Every such prefix is taken off here, so the rest is
// checked whatever haproxy makes of it (only stricter: 2.6 reads the whole
// name as a relative path).
func patternFileName(value string) (name, prefix string) {
	name = value
	for {
		lower := strings.ToLower(name)
		cut := ""
		for _, p := range []string{"file@", "opt@", "virt@"} {
			if strings.HasPrefix(lower, p) {
				cut = name[:len(p)]
			}
		}
		if cut == "" {
			return name, prefix
		}
		prefix += cut
		name = name[len(cut):]
	}
}

// checkFile checks one file argument of entry e, written value, and reads
// it when it is itself configuration.
func (r *policyRun) checkFile(w where, e *fileEntry, keyword, value string, from *nestedFile) {
	if e.systemCA && value == "@system-ca" && (e.base == baseNone || r.bases[e.base] == "") {
		return // the system's CA store: public certificates
	}
	label := keyword
	if e.kind == kindCrtList {
		// Reported on the haproxy.cfg line's crt-list option.
		label, keyword = e.name, "crt-list"
	}
	if e.patternName {
		if name, prefix := patternFileName(value); prefix != "" {
			if why := outsideReason(name); why != "" {
				r.report(w, keyword, RuleFileInside, fmt.Sprintf("%s %s names the file %s after %s, which %s; %s", label, quoteBounded(value), quoteBounded(name), prefix, why, proceedFiles))
				return
			}
		}
	}
	if why := outsideReason(value); why != "" {
		r.report(w, keyword, RuleFileInside, fmt.Sprintf("%s %s %s; %s", label, quoteBounded(value), why, proceedFiles))
		return
	}
	resolved := value
	if base := r.bases[e.base]; e.base != baseNone && base != "" {
		resolved = base + "/" + value
		if why := outsideReason(resolved); why != "" {
			r.report(w, keyword, RuleFileInside, fmt.Sprintf("%s %s resolves to %s through %s (line %d), which %s; %s", label, quoteBounded(value), quoteBounded(resolved), baseNames[e.base], r.baseLines[e.base], why, proceedFiles))
			return
		}
	}
	if e.nested == nestedNone {
		return
	}
	if from != nil {
		r.report(w, keyword, RuleUnsupportedNestedConfig, fmt.Sprintf("%s %s names more configuration from within %s; the policy reads referenced configuration one level deep only: reference it from haproxy.cfg", keyword, quoteBounded(value), from.name))
		return
	}
	r.checkNested(w, e.nested, resolved)
}

// renderedFile returns the rendering's file at p, relative to the check's
// directory, if there is one.
func (r *policyRun) renderedFile(p string) (name, content string, ok bool) {
	name = path.Clean(p)
	if name == ConfigFile {
		return name, r.out.HAProxyConfig, true
	}
	dir, base := path.Split(name)
	var files map[string]string
	switch dir {
	case MapsDir + "/":
		files = r.out.Maps
	case FilesDir + "/":
		files = r.out.Files
	case CertsDir + "/":
		files = r.out.Certs
	}
	content, ok = files[base]
	return name, content, ok
}

// checkNested checks a referenced file whose contents name more files. A
// reference to a file the rendering does not have needs nothing: haproxy
// fails to open it, and nothing else is in the directory.
func (r *policyRun) checkNested(w where, kind nestedKind, p string) {
	name, content, ok := r.renderedFile(p)
	key := fmt.Sprintf("%d:%s", kind, name)
	if !ok || r.nested[key] {
		return
	}
	r.nested[key] = true
	from := &nestedFile{name: name, line: w.line}
	switch kind {
	case nestedSPOE:
		r.checkNUL(content, from)
		r.checkConfig(content, from)
	case nestedLogFormat:
		// haproxy parses the whole file as one log-format string, up
		// to its first NUL: an expression may span lines. Each line is
		// scanned on its own too, as the policy always did: the union
		// does not rest on where the scan of an unclosed argument list
		// ends.
		r.checkNUL(content, from)
		text := cString(content)
		r.scanSamplesAt(text, lineLocator(text, from), from)
		for i, line := range strings.Split(content, "\n") {
			r.scanSamples(locate(from, i+1, line), line, from)
		}
	case nestedCrtList:
		r.checkCrtList(content, from)
	}
}

// lineLocator locates byte offsets of text, a file from references, by
// line. The scan asks for increasing offsets, so counting the line breaks
// from the previous one keeps it linear.
func lineLocator(text string, from *nestedFile) func(i int) where {
	pos, line, start, end := 0, 1, 0, -1
	return func(i int) where {
		for ; pos < i; pos++ {
			if text[pos] == '\n' {
				line++
				start, end = pos+1, -1
			}
		}
		if end < 0 { // once per line
			end = strings.IndexByte(text[start:], '\n')
			if end < 0 {
				end = len(text) - start
			}
			end += start
		}
		return locate(from, line, text[start:end])
	}
}

// checkCrtListLine checks a crt-list line: its certificate and the ssl
// options naming files (conservatively, wherever they appear in it).
func (r *policyRun) checkCrtListLine(w where, words []string, from *nestedFile) {
	if len(words) == 0 {
		return
	}
	r.checkFile(w, crtListCertificate, "crt-list", words[0], from)
	for i := 1; i+1 < len(words); i++ {
		if e := crtListOptions[strings.ToLower(words[i])]; e != nil {
			r.checkFile(w, e, e.name, words[i+1], from)
		}
	}
}
