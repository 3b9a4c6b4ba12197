package placement

import (
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func term(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func anyOf(terms ...corev1.NodeSelectorTerm) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: terms}
}

const (
	in     = corev1.NodeSelectorOpIn
	notIn  = corev1.NodeSelectorOpNotIn
	exists = corev1.NodeSelectorOpExists
	absent = corev1.NodeSelectorOpDoesNotExist
	gt     = corev1.NodeSelectorOpGt
	lt     = corev1.NodeSelectorOpLt
)

func TestMissingSelectorPairs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		class, pod map[string]string
		want       string
	}{
		{"all present", map[string]string{"zone": "dc1"}, map[string]string{"zone": "dc1", "disk": "ssd"}, ""},
		{"one absent", map[string]string{"zone": "dc1"}, nil, "zone=dc1"},
		{"a different value is missing too", map[string]string{"zone": "dc1"}, map[string]string{"zone": "dc2"}, "zone=dc1"},
		{"every missing pair, sorted", map[string]string{"zone": "dc1", "gpu": "true", "arch": "amd64"}, map[string]string{"gpu": "true"}, "arch=amd64,zone=dc1"},
		{"a class without selector", nil, map[string]string{"zone": "dc1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(MissingSelectorPairs(tc.class, tc.pod), ","); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestImpliesNodeAffinity(t *testing.T) {
	dc1OrDc2 := anyOf(term(req("zone", in, "dc1")), term(req("zone", in, "dc2")))
	for _, tc := range []struct {
		name     string
		selector map[string]string
		pod      *corev1.NodeSelector
		class    *corev1.NodeSelector
		ok       bool
		why      []string
	}{
		{name: "no class asks nothing", ok: true},
		{name: "a nodeSelector inside an In", selector: map[string]string{"zone": "dc1"}, class: anyOf(term(req("zone", in, "dc1", "dc2"))), ok: true},
		{name: "a Pod that says nothing may land anywhere", class: anyOf(term(req("zone", in, "dc1"))),
			why: []string{"could be scheduled on a node with no zone label", "needs zone In (dc1)"}},
		{name: "dc1 OR dc2 from an In over both (needs the case split)", pod: anyOf(term(req("zone", in, "dc1", "dc2"))), class: dc1OrDc2, ok: true},
		{name: "dc1 OR dc2 refuses a third zone", pod: anyOf(term(req("zone", in, "dc1", "dc3"))), class: dc1OrDc2,
			why: []string{"with zone=dc3", "term 1 needs zone In (dc1); term 2 needs zone In (dc2)"}},
		{name: "NotIn matches nodes without the label", pod: anyOf(term(req("zone", notIn, "dc3"))), class: anyOf(term(req("zone", notIn, "dc3"))), ok: true},
		{name: "a class NotIn is not guaranteed by silence", class: anyOf(term(req("zone", notIn, "dc3"))), why: []string{"with zone=dc3"}},
		{name: "Exists from a nodeSelector", selector: map[string]string{"gpu": "true"}, class: anyOf(term(req("gpu", exists))), ok: true},
		{name: "DoesNotExist needs DoesNotExist", pod: anyOf(term(req("spot", absent))), class: anyOf(term(req("spot", absent))), ok: true},
		{name: "DoesNotExist is not implied by NotIn", pod: anyOf(term(req("spot", notIn, "true"))), class: anyOf(term(req("spot", absent))),
			why: []string{"spot DoesNotExist"}},
		{name: "a narrower Gt", pod: anyOf(term(req("gen", gt, "5"))), class: anyOf(term(req("gen", gt, "4"))), ok: true},
		{name: "a wider Gt", pod: anyOf(term(req("gen", gt, "3"))), class: anyOf(term(req("gen", gt, "4"))), why: []string{"with gen=4"}},
		{name: "In values read as integers, the scheduler's way", pod: anyOf(term(req("gen", in, "5", "06"))), class: anyOf(term(req("gen", gt, "4"))), ok: true},
		{name: "a non-integer value fails Gt", pod: anyOf(term(req("gen", in, "5", "new"))), class: anyOf(term(req("gen", gt, "4"))), why: []string{"gen=new"}},
		{name: "Gt and Lt together cover a range split in two terms",
			pod: anyOf(term(req("gen", gt, "0"), req("gen", lt, "10"))), class: anyOf(term(req("gen", lt, "5")), term(req("gen", gt, "4"))), ok: true},
		{name: "a gap between the class's ranges",
			pod: anyOf(term(req("gen", gt, "0"), req("gen", lt, "10"))), class: anyOf(term(req("gen", lt, "5")), term(req("gen", gt, "5"))), why: []string{"with gen=5"}},
		{name: "Gt at the end of int64 matches nothing", pod: anyOf(term(req("gen", gt, "9223372036854775807"))), class: anyOf(term(req("zone", in, "x"))), ok: true},
		{name: "a contradiction can violate nothing", pod: anyOf(term(req("zone", in, "dc1"), req("zone", notIn, "dc1"))), class: anyOf(term(req("zone", in, "dc2"))), ok: true},
		{name: "a nodeSelector contradicting the affinity", selector: map[string]string{"zone": "dc3"}, pod: anyOf(term(req("zone", in, "dc1"))), class: anyOf(term(req("zone", in, "dc2"))), ok: true},
		{name: "every Pod term must be inside the class",
			pod: anyOf(term(req("zone", in, "dc1")), term(req("zone", in, "dc4"))), class: dc1OrDc2,
			why: []string{"through its required node affinity term 2", "zone=dc4"}},
		{name: "an empty Pod term adds no node", pod: anyOf(term(req("zone", in, "dc1")), corev1.NodeSelectorTerm{}), class: dc1OrDc2, ok: true},
		{name: "matchFields in the Pod only narrow it",
			pod: anyOf(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", in, "n1")}}), class: dc1OrDc2,
			why: []string{"no zone label"}},
		{name: "a class term on matchFields is never guaranteed",
			selector: map[string]string{"zone": "dc1"},
			class:    anyOf(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", in, "n1")}}),
			why:      []string{"uses matchFields"}},
		{name: "two keys, each split", pod: anyOf(term(req("zone", in, "a", "b"), req("rack", in, "1", "2"))),
			class: anyOf(term(req("zone", in, "a")), term(req("zone", in, "b"), req("rack", in, "1", "2"))), ok: true},
		{name: "a class requirement with an invalid value matches no node", pod: anyOf(term(req("zone", in, "a"))), class: anyOf(term(req("zone", in, "not a label value"))),
			why: []string{"zone In (not a label value)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := ImpliesNodeAffinity(tc.selector, tc.pod, tc.class)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%s)", ok, tc.ok, why)
			}
			for _, w := range tc.why {
				if !strings.Contains(why, w) {
					t.Errorf("explanation %q lacks %q", why, w)
				}
			}
			// Whatever the table says, the scheduler's own matching must agree.
			checkAgainstScheduler(t, placementCase{selector: tc.selector, pod: tc.pod, class: tc.class})
		})
	}
}

// The case analysis is bounded: beyond maxCases the answer is the
// term-by-term one, still sound, and the explanation says so. A class made
// of every assignment of 1 or 2 to n keys covers a Pod allowing 1 or 2 on
// each, but only the whole product of cases proves it: 2^5 fit the bound,
// 2^9 do not.
func TestImpliesNodeAffinityCaseBound(t *testing.T) {
	product := func(n int) (pod, class *corev1.NodeSelector) {
		keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}[:n]
		var podReqs []corev1.NodeSelectorRequirement
		for _, k := range keys {
			podReqs = append(podReqs, req(k, in, "1", "2"))
		}
		class = anyOf()
		for bits := 0; bits < 1<<n; bits++ {
			var reqs []corev1.NodeSelectorRequirement
			for i, k := range keys {
				reqs = append(reqs, req(k, in, []string{"1", "2"}[bits>>i&1]))
			}
			class.NodeSelectorTerms = append(class.NodeSelectorTerms, term(reqs...))
		}
		return anyOf(term(podReqs...)), class
	}
	pod, class := product(5)
	if ok, why := ImpliesNodeAffinity(nil, pod, class); !ok {
		t.Fatalf("32 cases are within the bound, yet: %s", why)
	}
	pod, class = product(9)
	ok, why := ImpliesNodeAffinity(nil, pod, class)
	if ok || !strings.Contains(why, "could not be proven, within 256 cases") {
		t.Fatalf("512 cases: ok=%v %q", ok, why)
	}
}

// placementCase is one generated input of the implication check.
type placementCase struct {
	selector map[string]string
	pod      *corev1.NodeSelector
	class    *corev1.NodeSelector
}

// Generated inputs draw from few keys and values, so that covers, gaps and
// contradictions are common, and from integers spelled several ways.
var (
	genKeys   = []string{"zone", "gen", "gpu"}
	genValues = []string{"dc1", "dc2", "dc3", "1", "2", "3", "05", "x"}
	genInts   = []string{"0", "1", "2", "3", "4", "05", "9223372036854775807", "x"}
	genOps    = []corev1.NodeSelectorOperator{in, notIn, exists, absent, gt, lt}
)

// generate builds a case from a source of small numbers (a seeded random
// generator in the test, the fuzzer's bytes in the fuzz target).
func generate(next func(n int) int) placementCase {
	pick := func(s []string) string { return s[next(len(s))] }
	requirement := func() corev1.NodeSelectorRequirement {
		r := corev1.NodeSelectorRequirement{Key: pick(genKeys), Operator: genOps[next(len(genOps))]}
		switch r.Operator {
		case in, notIn:
			for n := 1 + next(3); n > 0; n-- {
				r.Values = append(r.Values, pick(genValues))
			}
		case gt, lt:
			r.Values = []string{pick(genInts)}
		}
		return r
	}
	selector := func(maxTerms, maxReqs int, fields bool) *corev1.NodeSelector {
		ns := &corev1.NodeSelector{}
		for n := 1 + next(maxTerms); n > 0; n-- {
			var t corev1.NodeSelectorTerm
			for m := next(maxReqs + 1); m > 0; m-- {
				t.MatchExpressions = append(t.MatchExpressions, requirement())
			}
			if fields && next(8) == 0 {
				t.MatchFields = []corev1.NodeSelectorRequirement{req("metadata.name", in, "node-1")}
			}
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, t)
		}
		return ns
	}
	var c placementCase
	for n := next(3); n > 0; n-- {
		if c.selector == nil {
			c.selector = map[string]string{}
		}
		c.selector[pick(genKeys)] = pick(genValues)
	}
	if next(4) > 0 {
		c.pod = selector(3, 3, true)
	}
	c.class = selector(3, 3, next(16) == 0)
	return c
}

// probeValues are the label values the brute force tries under each key:
// every generated value, integers around every bound spelled as the
// scheduler reads them, and strings no requirement names.
var probeValues = []string{"dc1", "dc2", "dc3", "x", "other",
	"0", "1", "2", "3", "4", "5", "05", "006", "9223372036854775807"}

// checkAgainstScheduler decides the case with the scheduler's own node
// affinity matching (k8s.io/component-helpers, what kube-scheduler runs):
// when the check says ok, no node the Pod matches may fail the class; when
// it says no and proved it, its witness node must match the Pod and fail the
// class.
func checkAgainstScheduler(t *testing.T, c placementCase) {
	t.Helper()
	podAffinity := nodeaffinity.NewRequiredNodeAffinity(c.selector, nil)
	if c.pod != nil {
		podAffinity = nodeaffinity.NewRequiredNodeAffinity(c.selector, &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: c.pod}})
	}
	podMatches := func(node *corev1.Node) bool {
		ok, _ := podAffinity.Match(node)
		return ok
	}
	var classSelector *nodeaffinity.LazyErrorNodeSelector
	if c.class != nil {
		classSelector = nodeaffinity.NewLazyErrorNodeSelector(c.class)
	}
	classMatches := func(node *corev1.Node) bool {
		if classSelector == nil {
			return true
		}
		ok, _ := classSelector.Match(node)
		return ok
	}
	d := decide(c.selector, c.pod, c.class)
	if !d.ok {
		if d.exhausted {
			return
		}
		// Node names are not modelled: a class term on matchFields is never
		// guaranteed, so there the answer may be a sound "no" without a
		// witness; a Pod's matchFields pick the witness's name.
		if usesFields(c.class) {
			return
		}
		names := append([]string{"witness"}, fieldValues(c.pod)...)
		for _, name := range names {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: d.witness}}
			if podMatches(node) && !classMatches(node) {
				return
			}
		}
		t.Fatalf("witness %v (named any of %v) is no node the Pod may land on that the class refuses\ncase: %s", d.witness, names, describeCase(c))
	}
	// Every node over the keys, each absent or carrying a probe value, under
	// two names (a Pod's matchFields names node-1).
	labels := make(map[string]string, len(genKeys))
	var walk func(i int)
	walk = func(i int) {
		if i == len(genKeys) {
			for _, name := range []string{"node-1", "node-2"} {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
				if podMatches(node) && !classMatches(node) {
					t.Fatalf("said ok, but the Pod may land on %s %v, which the class refuses\ncase: %s", name, labels, describeCase(c))
				}
			}
			return
		}
		delete(labels, genKeys[i])
		walk(i + 1)
		for _, v := range probeValues {
			labels[genKeys[i]] = v
			walk(i + 1)
		}
		delete(labels, genKeys[i])
	}
	walk(0)
}

func usesFields(ns *corev1.NodeSelector) bool {
	return len(fieldValues(ns)) > 0
}

func fieldValues(ns *corev1.NodeSelector) []string {
	var out []string
	if ns == nil {
		return nil
	}
	for _, t := range ns.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			out = append(out, f.Values...)
		}
	}
	return out
}

func describeCase(c placementCase) string {
	var b strings.Builder
	b.WriteString("nodeSelector ")
	b.WriteString(strings.TrimSpace(strings.ReplaceAll(strings.TrimPrefix(strings.TrimSpace(stringify(c.selector)), "map"), "\n", " ")))
	b.WriteString("; pod terms ")
	b.WriteString(formatSelector(c.pod))
	b.WriteString("; class terms ")
	b.WriteString(formatSelector(c.class))
	return b.String()
}

func stringify(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func formatSelector(ns *corev1.NodeSelector) string {
	if ns == nil {
		return "none"
	}
	var terms []string
	for _, t := range ns.NodeSelectorTerms {
		var reqs []string
		for _, r := range t.MatchExpressions {
			reqs = append(reqs, formatRequirement(requirement{src: r}))
		}
		for _, r := range t.MatchFields {
			reqs = append(reqs, "field "+formatRequirement(requirement{src: r}))
		}
		terms = append(terms, "("+strings.Join(reqs, " AND ")+")")
	}
	return strings.Join(terms, " OR ")
}

// TestImpliesNodeAffinityAgainstScheduler runs the fuzz target's property
// over many seeded random cases, so that every `go test` exercises it.
func TestImpliesNodeAffinityAgainstScheduler(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i++ {
		c := generate(r.IntN)
		checkAgainstScheduler(t, c)
	}
}

// FuzzImpliesNodeAffinity: go test ./internal/placement -run '^$' -fuzz FuzzImpliesNodeAffinity
func FuzzImpliesNodeAffinity(f *testing.F) {
	for _, seed := range []string{"", "\x01\x02\x03", "zone In dc1 OR dc2", "\xff\x00\xff\x00\x10\x20\x30\x40\x50\x60", "gen Gt 4 and Lt 10, gen In 05"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		i := 0
		next := func(n int) int {
			if i >= len(data) {
				return 0
			}
			b := int(data[i])
			i++
			return b % n
		}
		checkAgainstScheduler(t, generate(next))
	})
}

// BenchmarkImpliesNodeAffinity: the check on the shapes classes take, next
// to the nodeSelector check as the baseline.
//
//	go test ./internal/placement -run '^$' -bench 'ImpliesNodeAffinity|MissingSelectorPairs' -benchmem -count 3
func BenchmarkImpliesNodeAffinity(b *testing.B) {
	dc1OrDc2 := anyOf(term(req("zone", in, "dc1")), term(req("zone", in, "dc2")))
	for _, bc := range []struct {
		name     string
		selector map[string]string
		pod      *corev1.NodeSelector
		class    *corev1.NodeSelector
	}{
		{"term-by-term", map[string]string{"zone": "dc1"}, nil, dc1OrDc2},
		{"case-split", nil, anyOf(term(req("zone", in, "dc1", "dc2"))), dc1OrDc2},
		{"refused-with-witness", nil, anyOf(term(req("zone", in, "dc1", "dc3"))), dc1OrDc2},
		{"ranges", nil, anyOf(term(req("gen", gt, "0"), req("gen", lt, "10"), req("zone", in, "dc1"))),
			anyOf(term(req("gen", lt, "5"), req("zone", exists)), term(req("gen", gt, "4"), req("zone", notIn, "dc9")))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				ImpliesNodeAffinity(bc.selector, bc.pod, bc.class)
			}
		})
	}
}

func BenchmarkMissingSelectorPairs(b *testing.B) {
	class := map[string]string{"topology.kubernetes.io/zone": "dc1"}
	pod := map[string]string{"topology.kubernetes.io/zone": "dc1", "kubernetes.io/arch": "amd64"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		MissingSelectorPairs(class, pod)
	}
}
