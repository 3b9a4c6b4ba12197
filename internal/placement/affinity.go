package placement

// The implication check between a Pod's placement and an AffinityClass.
// docs/placement-affinity.md states the algorithm and its guarantees; the
// comments here say why each rule is what it is.

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// maxCases bounds the case analysis of one Pod term: the Pod's nodes are
// split into at most this many pieces. Beyond it the check keeps the answer
// of the term-by-term test, which is sound but may refuse a Pod that does
// satisfy the class, and says so.
const maxCases = 256

// MissingSelectorPairs lists, sorted, the class's nodeSelector key=value
// pairs absent from the Pod's nodeSelector. This is the seed's literal
// contract: the pairs must be written in the Pod, not merely implied by its
// affinity, so that charts carry them visibly.
func MissingSelectorPairs(class, pod map[string]string) []string {
	var missing []string
	for k, v := range class {
		if got, ok := pod[k]; !ok || got != v {
			missing = append(missing, k+"="+v)
		}
	}
	sort.Strings(missing)
	return missing
}

// ImpliesNodeAffinity reports whether every node a Pod could be scheduled on
// — its nodeSelector AND its required node affinity terms (OR of terms;
// matchFields ignored, which only widens the Pod's set, so the answer stays
// sound) — satisfies the class's required terms. When it does not, why names
// the class requirement(s) not guaranteed, in a sentence a user can act on.
//
// The answer is sound: ok is never true while some node the Pod could land
// on violates the class. A Pod no node can satisfy (a contradiction, or
// required terms that are all empty) satisfies every class, since there is
// no node to violate it. The answer is also complete — ok whenever the Pod
// does satisfy the class — unless a Pod term needs more than 256 cases, in
// which case the term-by-term test decides and why says so. A nil class
// asks for nothing.
func ImpliesNodeAffinity(podSelector map[string]string, podRequired *corev1.NodeSelector, class *corev1.NodeSelector) (ok bool, why string) {
	d := decide(podSelector, podRequired, class)
	if d.ok {
		return true, ""
	}
	return false, d.explain(class)
}

// decision is the outcome of the check, with what an explanation needs.
type decision struct {
	ok bool
	// exhausted: the case analysis hit maxCases, so !ok means "not proven".
	exhausted bool
	// podTerm is the index of the Pod's failing term, -1 without terms.
	podTerm  int
	podTerms int
	// witness is a node the Pod can land on that violates every class term
	// (absent labels omitted); only when !ok && !exhausted.
	witness labels.Set
	// unmet lists, per class term, the requirements not guaranteed: those
	// the witness violates, or, when exhausted, those the Pod's term does
	// not imply. nil for terms no node can match (see unusable).
	unmet    [][]requirement
	unusable []string
}

func decide(podSelector map[string]string, podRequired *corev1.NodeSelector, class *corev1.NodeSelector) decision {
	if class == nil {
		return decision{ok: true}
	}
	cs := parseClass(class)
	podTerms, podTermIndex := parsePodTerms(podRequired)
	for i, term := range podTerms {
		c := conjunction{}
		for k, v := range podSelector {
			c.narrow(requirement{key: k, op: opIn, values: []string{v}})
		}
		for _, r := range term {
			c.narrow(r)
		}
		if c.contradiction() {
			continue
		}
		s := search{class: cs, conj: c}
		if s.run() {
			continue
		}
		d := decision{podTerm: -1, unusable: cs.unusable, exhausted: s.exhausted}
		if podRequired != nil {
			d.podTerm, d.podTerms = podTermIndex[i], len(podRequired.NodeSelectorTerms)
		}
		if s.exhausted {
			d.unmet = cs.unmet(c)
		} else {
			d.witness = s.witness.labels()
			d.unmet = cs.unmet(s.witness)
		}
		return d
	}
	return decision{ok: true}
}

// operator is a node selector operator as the check reads it: Gt and Lt are
// one integer range, which is how both sides of the check need them.
type operator int

const (
	opIn operator = iota
	opNotIn
	opExists
	opDoesNotExist
	opRange
	// opInvalid is a requirement the scheduler cannot parse.
	opInvalid
)

// requirement is one parsed node selector requirement.
type requirement struct {
	key    string
	op     operator
	values []string // opIn, opNotIn
	lo, hi int64    // opRange: integers in [lo, hi]; empty when lo > hi
	src    corev1.NodeSelectorRequirement
}

// parseRequirement reads a requirement the way the scheduler does: values
// counts by operator, and Gt/Lt values as strconv.ParseInt base 10 (the
// node's label goes through the same function, so "05" and "+5" are 5).
func parseRequirement(r corev1.NodeSelectorRequirement) requirement {
	out := requirement{key: r.Key, op: opInvalid, src: r}
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		if len(r.Values) > 0 {
			out.op, out.values = opIn, r.Values
		}
	case corev1.NodeSelectorOpNotIn:
		if len(r.Values) > 0 {
			out.op, out.values = opNotIn, r.Values
		}
	case corev1.NodeSelectorOpExists:
		if len(r.Values) == 0 {
			out.op = opExists
		}
	case corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) == 0 {
			out.op = opDoesNotExist
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(r.Values) != 1 {
			break
		}
		n, err := strconv.ParseInt(r.Values[0], 10, 64)
		if err != nil {
			break
		}
		out.op, out.lo, out.hi = opRange, math.MinInt64, math.MaxInt64
		switch {
		case r.Operator == corev1.NodeSelectorOpGt && n == math.MaxInt64,
			r.Operator == corev1.NodeSelectorOpLt && n == math.MinInt64:
			out.lo, out.hi = 1, 0 // no int64 is beyond the end of int64
		case r.Operator == corev1.NodeSelectorOpGt:
			out.lo = n + 1
		default:
			out.hi = n - 1
		}
	}
	return out
}

// toSelection maps an operator to the one labels.NewRequirement validates.
var toSelection = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

// parseCheckedRequirement is parseRequirement plus the label syntax checks
// of labels.NewRequirement: the scheduler drops a whole term whose
// requirement fails them, so such a term matches no node, on either side.
func parseCheckedRequirement(r corev1.NodeSelectorRequirement) requirement {
	out := parseRequirement(r)
	if out.op == opInvalid {
		return out
	}
	if _, err := labels.NewRequirement(r.Key, toSelection[r.Operator], r.Values); err != nil {
		out.op = opInvalid
	}
	return out
}

// parsePodTerms returns the Pod's required terms as requirement lists, with
// the index of each in the Pod spec. No required affinity is one term that
// asks for nothing. A term the scheduler reads as matching no node adds no
// node the Pod could land on, so it is dropped: an empty term, and a term
// with a requirement it cannot parse (the API server refuses such Pods
// anyway). matchFields are ignored: they only remove nodes, so ignoring them
// widens the Pod's set and the answer stays sound.
func parsePodTerms(ns *corev1.NodeSelector) ([][]requirement, []int) {
	if ns == nil {
		return [][]requirement{nil}, nil
	}
	var terms [][]requirement
	var index []int
	for i, t := range ns.NodeSelectorTerms {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue
		}
		reqs := make([]requirement, 0, len(t.MatchExpressions))
		for _, e := range t.MatchExpressions {
			reqs = append(reqs, parseCheckedRequirement(e))
		}
		if slices.ContainsFunc(reqs, func(r requirement) bool { return r.op == opInvalid }) {
			continue
		}
		terms = append(terms, reqs)
		index = append(index, i)
	}
	return terms, index
}

// classSelector is the class's required node affinity, parsed once per call.
type classSelector struct {
	// terms holds the usable terms; index their position in the class.
	terms [][]requirement
	index []int
	// unusable says, per position in the class, why a term matches no node
	// ("" for usable terms).
	unusable []string
	// byKey lists the requirements on each key across all terms: the case
	// analysis splits a key by them.
	byKey map[string][]requirement
}

func parseClass(ns *corev1.NodeSelector) *classSelector {
	cs := &classSelector{byKey: map[string][]requirement{}, unusable: make([]string, len(ns.NodeSelectorTerms))}
	for i, t := range ns.NodeSelectorTerms {
		switch {
		case len(t.MatchFields) > 0:
			// The Pod side ignores matchFields, so nothing a Pod states
			// guarantees a node name.
			cs.unusable[i] = "uses matchFields, which no Pod placement guarantees"
			continue
		case len(t.MatchExpressions) == 0:
			cs.unusable[i] = "is empty, and an empty term matches no node"
			continue
		}
		reqs := make([]requirement, len(t.MatchExpressions))
		for j, e := range t.MatchExpressions {
			reqs[j] = parseCheckedRequirement(e)
			cs.byKey[e.Key] = append(cs.byKey[e.Key], reqs[j])
		}
		cs.terms = append(cs.terms, reqs)
		cs.index = append(cs.index, i)
	}
	return cs
}

// someTermGuaranteed is the term-by-term test: does the conjunction imply
// one class term on its own? The Pod's nodes form a product over label keys
// and so does a term, so for a single term this is exact; for several it
// misses covers that only their union gives, which the case analysis adds.
func (cs *classSelector) someTermGuaranteed(c conjunction) bool {
	for _, term := range cs.terms {
		if c.guaranteesAll(term) {
			return true
		}
	}
	return false
}

// unmet lists, per class position, the requirements c does not guarantee.
func (cs *classSelector) unmet(c conjunction) [][]requirement {
	out := make([][]requirement, len(cs.unusable))
	for i, term := range cs.terms {
		for _, r := range term {
			if !c.guarantees(r) {
				out[cs.index[i]] = append(out[cs.index[i]], r)
			}
		}
	}
	return out
}

// valueSet is the set of values a node may carry under one label key, the
// label's absence counting as one of them. Present values are either a
// finite list or an infinite set: every string but out, restricted to
// integers in [lo, hi] and, when nonInt, strings ParseInt rejects.
type valueSet struct {
	absent bool
	finite bool
	in     []string // finite: sorted, unique
	out    map[string]bool
	nonInt bool
	lo, hi int64
}

// anyValue is a key the Pod says nothing about.
func anyValue() valueSet {
	return valueSet{absent: true, nonInt: true, lo: math.MinInt64, hi: math.MaxInt64}
}

func absentOnly() valueSet { return valueSet{absent: true, finite: true} }

func only(v string) valueSet { return valueSet{finite: true, in: []string{v}} }

// hasPresent: an infinite set is never empty unless both of its parts are,
// because removing finitely many strings from infinitely many leaves some:
// every integer has infinitely many spellings ParseInt accepts (leading
// zeros, a "+"), and there are infinitely many non-integer strings.
func (vs valueSet) hasPresent() bool {
	if vs.finite {
		return len(vs.in) > 0
	}
	return vs.nonInt || vs.lo <= vs.hi
}

func (vs valueSet) empty() bool { return !vs.absent && !vs.hasPresent() }

func (vs valueSet) contains(s string) bool {
	if vs.finite {
		_, found := slices.BinarySearch(vs.in, s)
		return found
	}
	if vs.out[s] {
		return false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return vs.lo <= n && n <= vs.hi
	}
	return vs.nonInt
}

// narrowIn: the label must be present with one of the values, so the set
// becomes finite — the values the set already allowed.
func narrowIn(vs valueSet, values []string) valueSet {
	keep := make([]string, 0, len(values))
	for _, v := range values {
		if vs.contains(v) {
			keep = append(keep, v)
		}
	}
	sort.Strings(keep)
	return valueSet{finite: true, in: slices.Compact(keep)}
}

// narrowNotIn removes values but keeps absence: the scheduler's NotIn
// matches a node without the label.
func narrowNotIn(vs valueSet, values []string) valueSet {
	if vs.finite {
		vs.in = slices.DeleteFunc(slices.Clone(vs.in), func(s string) bool { return slices.Contains(values, s) })
		return vs
	}
	out := make(map[string]bool, len(vs.out)+len(values))
	for s := range vs.out {
		out[s] = true
	}
	for _, v := range values {
		out[v] = true
	}
	vs.out = out
	return vs
}

// narrowExists and narrowDoesNotExist decide absence only, which is why
// they keep the other part of the set as it was.
func narrowExists(vs valueSet) valueSet {
	vs.absent = false
	return vs
}

func narrowDoesNotExist(vs valueSet) valueSet {
	return valueSet{absent: vs.absent, finite: true}
}

// narrowRange is Gt and Lt: the label must be present and parse as an
// integer in [lo, hi]. An empty infinite set becomes the empty finite one,
// so that the guarantees below may take "infinite" to mean "non-empty".
func narrowRange(vs valueSet, lo, hi int64) valueSet {
	if vs.finite {
		keep := make([]string, 0, len(vs.in))
		for _, s := range vs.in {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil && lo <= n && n <= hi {
				keep = append(keep, s)
			}
		}
		return valueSet{finite: true, in: keep}
	}
	vs.absent, vs.nonInt = false, false
	vs.lo, vs.hi = max(vs.lo, lo), min(vs.hi, hi)
	if vs.lo > vs.hi {
		return valueSet{finite: true}
	}
	return vs
}

// guaranteesIn: every possible value must be listed, and absence must be
// impossible. An infinite set is never inside a finite list.
func guaranteesIn(vs valueSet, values []string) bool {
	if vs.absent || !vs.finite {
		return false
	}
	for _, s := range vs.in {
		if !slices.Contains(values, s) {
			return false
		}
	}
	return true
}

// guaranteesNotIn: no listed value may be possible; absence is fine.
func guaranteesNotIn(vs valueSet, values []string) bool {
	for _, v := range values {
		if vs.contains(v) {
			return false
		}
	}
	return true
}

func guaranteesExists(vs valueSet) bool { return !vs.absent }

func guaranteesDoesNotExist(vs valueSet) bool { return !vs.hasPresent() }

// guaranteesRange is Gt and Lt: the label must be present and every
// possible value an integer in [lo, hi]. An infinite set with nonInt holds a
// string ParseInt rejects, which the scheduler reads as not matching.
func guaranteesRange(vs valueSet, lo, hi int64) bool {
	if vs.absent {
		return false
	}
	if vs.finite {
		for _, s := range vs.in {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < lo || n > hi {
				return false
			}
		}
		return true
	}
	return !vs.nonInt && lo <= vs.lo && vs.hi <= hi
}

// conjunction maps each label key the Pod constrains to the values a node
// it may land on can carry under it; a key not in the map is anyValue.
type conjunction map[string]valueSet

func (c conjunction) get(key string) valueSet {
	if vs, ok := c[key]; ok {
		return vs
	}
	return anyValue()
}

func (c conjunction) narrow(r requirement) {
	vs := c.get(r.key)
	switch r.op {
	case opIn:
		vs = narrowIn(vs, r.values)
	case opNotIn:
		vs = narrowNotIn(vs, r.values)
	case opExists:
		vs = narrowExists(vs)
	case opDoesNotExist:
		vs = narrowDoesNotExist(vs)
	case opRange:
		vs = narrowRange(vs, r.lo, r.hi)
	default:
		return
	}
	c[r.key] = vs
}

// contradiction: some key admits nothing, not even absence, so no node
// matches and the Pod cannot violate any class.
func (c conjunction) contradiction() bool {
	for _, vs := range c {
		if vs.empty() {
			return true
		}
	}
	return false
}

// guarantees decides whether every value the conjunction allows under the
// requirement's key satisfies it. Each rule is exact, so for one term the
// test is exact too.
func (c conjunction) guarantees(r requirement) bool { return guarantees(c.get(r.key), r) }

func guarantees(vs valueSet, r requirement) bool {
	switch r.op {
	case opIn:
		return guaranteesIn(vs, r.values)
	case opNotIn:
		return guaranteesNotIn(vs, r.values)
	case opExists:
		return guaranteesExists(vs)
	case opDoesNotExist:
		return guaranteesDoesNotExist(vs)
	case opRange:
		return guaranteesRange(vs, r.lo, r.hi)
	default:
		return false // the scheduler matches no node with it
	}
}

func (c conjunction) guaranteesAll(term []requirement) bool {
	for _, r := range term {
		if !c.guarantees(r) {
			return false
		}
	}
	return true
}

// labels is a node carrying, under every key of the conjunction, one value
// it allows; keys it leaves absent or does not mention are left off.
func (c conjunction) labels() labels.Set {
	out := labels.Set{}
	for k, vs := range c {
		if v, present := example(vs); present {
			out[k] = v
		}
	}
	return out
}

// region is one piece of the case split on a key: a value standing for a
// part of the key's set on which every class requirement on the key is
// either always or never satisfied.
type region struct {
	point valueSet // absentOnly() or only(value)
}

// regions splits the Pod's set for key into pieces on which every class
// requirement on the key is constant, and keeps one piece per distinct
// outcome. The pieces: absence; each value of a finite set; for an infinite
// set, each value the class names, the other non-integers, and the other
// integers cut at the class's Gt/Lt bounds. A piece other than a single value
// holds no named value, so In and NotIn are constant on it, and lies on one
// side of every bound, so Gt and Lt are too.
func regions(vs valueSet, reqs []requirement) []region {
	var points []valueSet
	if vs.absent {
		points = append(points, absentOnly())
	}
	if vs.finite {
		for _, s := range vs.in {
			points = append(points, only(s))
		}
	} else {
		named := map[string]bool{}
		var cuts []int64
		for _, r := range reqs {
			for _, v := range r.values {
				if !named[v] && vs.contains(v) {
					points = append(points, only(v))
				}
				named[v] = true
			}
			if r.op == opRange {
				if r.lo > vs.lo && r.lo <= vs.hi {
					cuts = append(cuts, r.lo)
				}
				if r.hi < vs.hi && r.hi >= vs.lo {
					cuts = append(cuts, r.hi+1)
				}
			}
		}
		free := func(s string) bool { return vs.contains(s) && !named[s] }
		if vs.nonInt {
			points = append(points, only(pickNonInt(free)))
		}
		if vs.lo <= vs.hi {
			slices.Sort(cuts)
			lo := vs.lo
			for _, c := range slices.Compact(cuts) {
				points = append(points, only(pickInt(lo, c-1, free)))
				lo = c
			}
			points = append(points, only(pickInt(lo, vs.hi, free)))
		}
	}
	// Two pieces with the same outcome on every requirement are
	// interchangeable for every class term, so one stands for both.
	seen := map[string]bool{}
	var out []region
	for _, p := range points {
		sig := make([]byte, len(reqs))
		for i, r := range reqs {
			if guarantees(p, r) {
				sig[i] = 1
			}
		}
		if !seen[string(sig)] {
			seen[string(sig)] = true
			out = append(out, region{point: p})
		}
	}
	return out
}

// pickNonInt finds a string ParseInt rejects that free allows; free
// excludes finitely many strings, so the loop ends.
func pickNonInt(free func(string) bool) string {
	for i := 0; ; i++ {
		s := "other"
		if i > 0 {
			s += "-" + strconv.Itoa(i)
		}
		if free(s) {
			return s
		}
	}
}

// pickInt finds a spelling of an integer in [lo, hi] that free allows,
// trying plain spellings first and then longer runs of leading zeros, which
// ParseInt reads as the same integer; free excludes finitely many strings,
// so the loop ends.
func pickInt(lo, hi int64, free func(string) bool) string {
	for zeros := 0; ; zeros++ {
		for n := lo; ; n++ {
			s := strconv.FormatInt(n, 10)
			if zeros > 0 {
				digits := strings.TrimPrefix(s, "-")
				s = strings.TrimSuffix(s, digits) + strings.Repeat("0", zeros) + digits
			}
			if free(s) {
				return s
			}
			if n == hi || n-lo >= 64 {
				break
			}
		}
	}
}

// example is one value of a non-empty set, preferring absence; present
// reports whether it is a label value rather than absence.
func example(vs valueSet) (v string, present bool) {
	switch {
	case vs.absent:
		return "", false
	case vs.finite:
		return vs.in[0], true
	case vs.nonInt:
		return pickNonInt(vs.contains), true
	default:
		return pickInt(vs.lo, vs.hi, vs.contains), true
	}
}

// search is the case analysis for one Pod term. It tries the term-by-term
// test first; when that fails it splits the Pod's set on one class key into
// its regions and decides each piece, recursively, until every piece is
// decided or maxCases would be exceeded. Once every key the class names is
// one region or fixed to one, the term-by-term test is exact, so a failure
// there is a real counterexample.
type search struct {
	class     *classSelector
	conj      conjunction
	order     []string
	regions   map[string][]region
	cases     int
	exhausted bool
	witness   conjunction
}

func (s *search) run() bool {
	if s.class.someTermGuaranteed(s.conj) {
		return true
	}
	s.regions = make(map[string][]region, len(s.class.byKey))
	for k, reqs := range s.class.byKey {
		s.regions[k] = regions(s.conj.get(k), reqs)
		if len(s.regions[k]) > 1 {
			s.order = append(s.order, k)
		}
	}
	// Keys with fewer pieces first: they cost less to split and often
	// settle the question (zone In [a,b] against "a OR b").
	sort.Slice(s.order, func(i, j int) bool {
		a, b := s.order[i], s.order[j]
		if len(s.regions[a]) != len(s.regions[b]) {
			return len(s.regions[a]) < len(s.regions[b])
		}
		return a < b
	})
	s.cases = 1
	return s.split(0)
}

func (s *search) split(i int) bool {
	if i > 0 && s.class.someTermGuaranteed(s.conj) {
		return true
	}
	if i == len(s.order) {
		s.witness = conjunction{}
		for k, vs := range s.conj {
			s.witness[k] = vs
		}
		for k, rs := range s.regions {
			if len(rs) == 1 {
				s.witness[k] = rs[0].point
			}
		}
		return false
	}
	key := s.order[i]
	rs := s.regions[key]
	if s.cases+len(rs)-1 > maxCases {
		s.exhausted = true
		return false
	}
	s.cases += len(rs) - 1
	saved, had := s.conj[key]
	defer func() {
		if had {
			s.conj[key] = saved
		} else {
			delete(s.conj, key)
		}
	}()
	for _, r := range rs {
		s.conj[key] = r.point
		if !s.split(i + 1) {
			return false
		}
	}
	return true
}

// explain turns a failed decision into a sentence naming what the class
// asks for and the Pod does not guarantee.
func (d decision) explain(class *corev1.NodeSelector) string {
	var b strings.Builder
	if d.podTerms > 1 {
		fmt.Fprintf(&b, "through its required node affinity term %d, ", d.podTerm+1)
	}
	if d.exhausted {
		fmt.Fprintf(&b, "the Pod's placement could not be proven, within %d cases, to keep it on nodes the class's required node affinity allows; "+
			"make its nodeSelector and required node affinity imply one class term: ", maxCases)
	} else {
		fmt.Fprintf(&b, "the Pod could be scheduled on a node %s, which the class's required node affinity does not allow: ", describeNode(d.witness, d.unmet))
	}
	var parts []string
	for i, reason := range d.unusable {
		prefix := "it"
		if len(class.NodeSelectorTerms) > 1 {
			prefix = fmt.Sprintf("term %d", i+1)
		}
		switch {
		case reason != "":
			parts = append(parts, prefix+" "+reason)
		case len(d.unmet[i]) > 0:
			reqs := make([]string, len(d.unmet[i]))
			for j, r := range d.unmet[i] {
				reqs[j] = formatRequirement(r)
			}
			parts = append(parts, prefix+" needs "+strings.Join(reqs, " and "))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "it has no term a node can match")
	}
	b.WriteString(strings.Join(parts, "; "))
	return b.String()
}

// describeNode names the witness's labels on the keys the unmet
// requirements look at: the ones the user has to change.
func describeNode(witness labels.Set, unmet [][]requirement) string {
	keys := map[string]bool{}
	for _, term := range unmet {
		for _, r := range term {
			keys[r.key] = true
		}
	}
	if len(keys) == 0 {
		return "it matches"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if v, ok := witness[k]; ok {
			parts = append(parts, k+"="+v)
		} else {
			parts = append(parts, "no "+k+" label")
		}
	}
	return "with " + strings.Join(parts, " and ")
}

func formatRequirement(r requirement) string {
	s := r.src.Key + " " + string(r.src.Operator)
	if len(r.src.Values) > 0 {
		s += " (" + strings.Join(r.src.Values, ", ") + ")"
	}
	return s
}
