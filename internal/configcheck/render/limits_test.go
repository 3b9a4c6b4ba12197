package render

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/Masterminds/sprig/v3"
)

// renderWith renders a haproxyConfig template with engine.
func renderWith(t testing.TB, engine goTemplateEngine, config string) (string, error) {
	t.Helper()
	renderer, err := engine.Compile(Templates{HAProxyConfig: config})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	output, err := renderer.Render(context.Background(), Data{})
	return output.HAProxyConfig, err
}

// wantLimit fails unless err is a *LimitError for limit.
func wantLimit(t *testing.T, err error, limit string) {
	t.Helper()
	var limitErr *LimitError
	if !errors.As(err, &limitErr) || limitErr.Limit != limit {
		t.Fatalf("err = %v, want a *LimitError for %s", err, limit)
	}
	if !strings.Contains(err.Error(), "(limit "+limit+")") {
		t.Errorf("message %q does not name %s", err.Error(), limit)
	}
}

// nestedList is a list holding the same list twice, forty times over: a
// few kilobytes of memory, 2^40 strings when walked.
const nestedList = `{{ $l := list "x" "x" }}{{ range until 40 }}{{ $l = list $l $l }}{{ end }}`

// TestBombsAreRefused: every function whose arguments could build a huge
// value refuses them with the limit's name, before building it (a test
// that built it would run out of memory or time instead).
func TestBombsAreRefused(t *testing.T) {
	tests := []struct{ name, config, limit string }{
		{"until", `{{ len (until 40000000) }}`, "MaxListLength"},
		{"until negative", `{{ len (until -40000000) }}`, "MaxListLength"},
		{"untilStep", `{{ len (untilStep 0 2000000000 1) }}`, "MaxListLength"},
		{"untilStep over the whole int range", `{{ len (untilStep -9223372036854775808 9223372036854775807 3) }}`, "MaxListLength"},
		{"seq", `{{ len (seq 40000000) }}`, "MaxListLength"},
		{"seq with a step", `{{ len (seq 1 1 40000000) }}`, "MaxListLength"},
		{"repeat", `{{ len (repeat 40000000 "ab") }}`, "MaxValueBytes"},
		{"repeat overflowing int", `{{ len (repeat 9223372036854775807 "ab") }}`, "MaxValueBytes"},
		{"indent width", `{{ indent 100000000 "x" }}`, "MaxWidth"},
		{"nindent width", `{{ nindent 2000 "x" }}`, "MaxWidth"},
		{"indent of many lines", `{{ len (indent 1000 (repeat 1000000 "\n")) }}`, "MaxValueBytes"},
		{"printf width", `{{ printf "%0100000000d" 1 }}`, "MaxWidth"},
		{"printf precision", `{{ printf "%.100000s" "x" }}`, "MaxWidth"},
		{"printf width after an index", `{{ printf "%[1]5000d" 1 }}`, "MaxWidth"},
		{"printf of many values", `{{ $s := repeat 10000000 "x" }}{{ len (printf "%s%s" $s $s) }}`, "MaxValueBytes"},
		{"print of many values", `{{ $s := repeat 10000000 "x" }}{{ len (print $s $s) }}`, "MaxValueBytes"},
		{"cat", `{{ $s := repeat 10000000 "x" }}{{ len (cat $s $s) }}`, "MaxValueBytes"},
		{"replace of the empty string", `{{ len (replace "" (repeat 100000 "x") (repeat 1000 "y")) }}`, "MaxValueBytes"},
		{"regexReplaceAll of the empty match", `{{ len (regexReplaceAll "" (repeat 1000 "y") (repeat 100000 "x")) }}`, "MaxValueBytes"},
		{"regexReplaceAll expanding $1", `{{ len (regexReplaceAll "(y+)" (repeat 1000000 "y") (repeat 100 "$1")) }}`, "MaxValueBytes"},
		{"regexReplaceAllLiteral", `{{ len (regexReplaceAllLiteral "" (repeat 1000 "y") (repeat 100000 "x")) }}`, "MaxValueBytes"},
		{"join with a long separator", `{{ len (join (repeat 100000 "x") (until 1000)) }}`, "MaxValueBytes"},
		{"wrapWith", `{{ len (wrapWith 1 (repeat 10000 "x") (repeat 10000 "y")) }}`, "MaxValueBytes"},
		{"splitList", `{{ len (splitList "" (repeat 2000000 "x")) }}`, "MaxListLength"},
		{"split", `{{ len (split "," (repeat 2000000 ",")) }}`, "MaxListLength"},
		{"regexSplit", `{{ len (regexSplit "" (repeat 2000000 "x") -1) }}`, "MaxListLength"},
		{"regexFindAll", `{{ len (regexFindAll "x" (repeat 2000000 "x") -1) }}`, "MaxListLength"},
		{"b64enc fed its own result", `{{ $s := "xyz" }}{{ range until 100 }}{{ $s = b64enc (print $s $s) }}{{ end }}`, "MaxValueBytes"},
		{"quote fed its own result", `{{ $s := "\\" }}{{ range until 100 }}{{ $s = quote $s $s }}{{ end }}`, "MaxValueBytes"},
		{"html fed its own result", `{{ $s := "&" }}{{ range until 100 }}{{ $s = html $s $s }}{{ end }}`, "MaxValueBytes"},
		{"concat fed its own result", `{{ $l := list 1 }}{{ range until 30 }}{{ $l = concat $l $l }}{{ end }}`, "MaxListLength"},
		{"append", `{{ $l := until 1048576 }}{{ $l = append $l 1 }}`, "MaxListLength"},
		{"printing a shared structure", nestedList + `{{ $l }}`, "MaxValueBytes"},
		{"printf %v of it", nestedList + `{{ printf "%v" $l | len }}`, "MaxValueBytes"},
		{"toJson of it", nestedList + `{{ toJson $l | len }}`, "MaxValueBytes"},
		{"toPrettyJson of it", nestedList + `{{ len (mustToPrettyJson $l) }}`, "MaxValueBytes"},
		{"deepCopy of it", nestedList + `{{ deepCopy $l | len }}`, "MaxValueBytes"},
		{"toString of it", nestedList + `{{ toString $l | len }}`, "MaxValueBytes"},
		{"join of it", nestedList + `{{ join "," $l | len }}`, "MaxValueBytes"},
		{"sortAlpha of it", nestedList + `{{ sortAlpha $l | len }}`, "MaxValueBytes"},
		{"quote of it", nestedList + `{{ quote $l | len }}`, "MaxValueBytes"},
		{"js of it", nestedList + `{{ js $l | len }}`, "MaxValueBytes"},
		{"a dict keyed by it", nestedList + `{{ dict $l 1 | len }}`, "MaxValueBytes"},
		{"merging it", nestedList + `{{ merge (dict) (dict "a" $l) | len }}`, "MaxValueBytes"},
		{"toDecimal of it", nestedList + `{{ toDecimal $l }}`, "MaxValueBytes"},
		{"a list nested too deep", `{{ $l := list }}{{ range until 1200 }}{{ $l = list $l }}{{ end }}{{ len (toJson $l) }}`, "MaxValueDepth"},
		{"range over a huge int", `{{ range 1000000000 }}{{ end }}`, "MaxIterations"},
		{"template including itself", `{{ define "loop" }}{{ template "loop" . }}{{ end }}{{ template "loop" . }}`, "MaxTemplateDepth"},
		{"snippet-like define included by render-like nesting", `{{ define "a" }}{{ template "b" . }}{{ end }}{{ define "b" }}{{ template "a" . }}{{ end }}{{ template "a" }}`, "MaxTemplateDepth"},
		{"file size", `{{ range until 17 }}{{ repeat 1048576 "x" }}{{ end }}`, "MaxFileBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderWith(t, goTemplateEngine{}, tt.config)
			wantLimit(t, err, tt.limit)
		})
	}
}

// TestIterationBudget: nested ranges, and templates forking into two
// inclusions of themselves, spend one budget, whatever no single call
// exceeds. The budget is lowered to keep the test fast.
func TestIterationBudget(t *testing.T) {
	small := goTemplateEngine{maxIterations: 100_000}
	for _, config := range []string{
		`{{ range until 1000 }}{{ range until 1000 }}{{ end }}{{ end }}`,
		`{{ range $i := until 1000 }}{{ range $j, $k := until 1000 }}{{ end }}{{ end }}`,
		`{{ range $k, $v := dict "a" 1 }}{{ range 1000000 }}{{ end }}{{ end }}`,
		`{{ define "fork" }}{{ if lt (len .) 40 }}{{ template "fork" (append . 1) }}{{ template "fork" (append . 1) }}{{ end }}{{ end }}{{ template "fork" list }}`,
	} {
		_, err := renderWith(t, small, config)
		wantLimit(t, err, "MaxIterations")
	}
	// Templates that are not recursive are charged by their weight where
	// they are included: a chain of them, each including the next twice,
	// fails before it starts, at the top or inside a range.
	var chain strings.Builder
	for i := range 40 {
		fmt.Fprintf(&chain, `{{ define "t%d" }}{{ template "t%d" . }}{{ template "t%d" . }}{{ end }}`, i, i+1, i+1)
	}
	chain.WriteString(`{{ define "t40" }}x{{ end }}`)
	for _, config := range []string{
		chain.String() + `{{ template "t0" . }}`,
		chain.String() + `{{ range until 10 }}{{ template "t10" . }}{{ end }}`,
		chain.String() + `{{ if true }}{{ template "t15" . }}{{ else }}{{ template "t15" . }}{{ end }}`,
		// A recursive template charges what it includes on each entry.
		chain.String() + `{{ define "r" }}{{ template "t5" . }}{{ if lt (len .) 2 }}{{ template "r" (append . 1) }}{{ end }}{{ end }}{{ template "r" list }}`,
	} {
		_, err := renderWith(t, goTemplateEngine{}, config)
		wantLimit(t, err, "MaxIterations")
	}
	got, err := renderWith(t, small, chain.String()+`{{ range until 3 }}{{ template "t36" . }}{{ end }}`)
	if err != nil || got != strings.Repeat("x", 3*16)+"\n" {
		t.Fatalf("a chain within the budget: %q, %v", got, err)
	}
	// A long chain without recursion is not limited by MaxTemplateDepth.
	var long strings.Builder
	for i := range 300 {
		fmt.Fprintf(&long, `{{ define "l%d" }}{{ template "l%d" . }}{{ end }}`, i, i+1)
	}
	long.WriteString(`{{ define "l300" }}end{{ end }}{{ template "l0" . }}`)
	if got, err := renderWith(t, small, long.String()); err != nil || got != "end\n" {
		t.Fatalf("a chain of 300 templates: %q, %v", got, err)
	}

	// Within the budget, ranges run as before: else, break and continue.
	got, err = renderWith(t, small,
		`{{ range $i, $v := until 5 }}{{ if eq $i 3 }}{{ break }}{{ end }}{{ if eq $i 1 }}{{ continue }}{{ end }}{{ $i }}{{ end }}|{{ range list }}x{{ else }}empty{{ end }}|{{ range 3 }}{{ . }}{{ end }}`)
	if err != nil || got != "02|empty|012\n" {
		t.Fatalf("haproxy.cfg = %q, %v", got, err)
	}
}

// TestRenderingBytesCap: outputs each under MaxFileBytes still share one
// MaxRenderingBytes.
func TestRenderingBytesCap(t *testing.T) {
	maps := map[string]string{}
	for i := range 5 {
		maps[fmt.Sprintf("%d.map", i)] = `{{ range until 15 }}{{ repeat 1048576 "x" }}{{ end }}`
	}
	_, err := compile(t, Templates{HAProxyConfig: "global", Maps: maps}).Render(context.Background(), Data{})
	wantLimit(t, err, "MaxRenderingBytes")

	// One output just under MaxFileBytes is fine, and so is a rendered
	// snippet; one over it, rendered, is not.
	output, err := compile(t, Templates{
		Snippets:      map[string]string{"big": `{{ range until 15 }}{{ repeat 1048576 "x" }}{{ end }}`},
		HAProxyConfig: `{{ render "big" }}{{ repeat 1048575 "y" }}`,
	}).Render(context.Background(), Data{})
	if err != nil || len(output.HAProxyConfig) != 16<<20 {
		t.Fatalf("%d bytes, %v; want 16 MiB", len(output.HAProxyConfig), err)
	}
	_, err = compile(t, Templates{
		Snippets:      map[string]string{"big": `{{ range until 17 }}{{ repeat 1048576 "x" }}{{ end }}`},
		HAProxyConfig: `{{ $_ := render "big" }}`,
	}).Render(context.Background(), Data{})
	wantLimit(t, err, "MaxFileBytes")
}

// TestCyclesAreRefused: a dict containing itself would make printing (and
// toJson, deepCopy, merge) recurse until the Go stack overflows, which
// kills the process instead of failing the render.
func TestCyclesAreRefused(t *testing.T) {
	tests := []struct{ config, want string }{
		{`{{ $d := dict }}{{ $_ := set $d "x" $d }}{{ $d }}`, "a dict cannot contain itself"},
		{`{{ $d := dict }}{{ $_ := set $d "x" (list 1 (dict "y" $d)) }}{{ $d }}`, "a dict cannot contain itself"},
		{`{{ $d := dict "a" (dict) }}{{ $_ := merge $d (dict "b" $d) }}{{ $d }}`, "shares a dict with the destination"},
		{`{{ $a := dict }}{{ $d := dict "a" $a }}{{ $_ := mergeOverwrite $d (dict "a" (dict "b" $a)) }}{{ $d }}`, "shares a dict with the destination"},
		{`{{ $d := dict }}{{ $_ := mustMerge $d $d }}`, "shares a dict with the destination"},
	}
	for _, tt := range tests {
		_, err := renderWith(t, goTemplateEngine{}, tt.config)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.config, err, tt.want)
		}
	}
}

// TestValueSizeRefusesAValueContainingItself, however it was built: set
// and merge refuse to build one, but objects come from elsewhere too.
func TestValueSizeRefusesAValueContainingItself(t *testing.T) {
	dict := map[string]any{"a": 1}
	dict["self"] = []any{"x", dict}
	_, err := valueSize("print", dict)
	wantLimit(t, err, "MaxValueDepth")
	if !strings.Contains(err.Error(), "print: the value contains itself") {
		t.Errorf("err = %v", err)
	}
	if _, err := escapePrinted(dict); err == nil {
		t.Error("printing it: no error")
	}
	// Shared, not cyclic: measured, not refused.
	shared := []any{"x"}
	if size, err := valueSize("print", []any{shared, shared, map[string]any{"k": shared}}); err != nil || size < 3 {
		t.Errorf("shared list: %d, %v", size, err)
	}
}

// TestBoundedFunctionsWithNormalArguments return what sprig's (and
// text/template's) return.
func TestBoundedFunctionsWithNormalArguments(t *testing.T) {
	tests := []struct{ config, want string }{
		{`{{ until 5 }} {{ until -3 }} {{ len (until 1048576) }}`, "[0 1 2 3 4] [0 -1 -2] 1048576"},
		{`{{ untilStep 0 10 3 }} {{ untilStep 10 0 -4 }} {{ untilStep 0 10 -1 }}`, "[0 3 6 9] [10 6 2] []"},
		{`{{ seq 5 }}|{{ seq 3 1 }}|{{ seq 0 2 6 }}|{{ seq -2 }}|{{ seq }}`, "1 2 3 4 5|3 2 1|0 2 4 6|1 0 -1 -2|"},
		{`{{ repeat 3 "ab" }}|{{ indent 2 "a" }}|{{ nindent 2 "a\nb" | trusted }}`, "ababab|  a|\n  a\n  b"},
		{`{{ printf "%05d|%-4s|%.2f|%[1]x|%%" 42 "ab" 3.14159 }}`, "00042|ab  |3.14|2a|%"},
		{`{{ print 1 2 "a" }}|{{ println "a" | trimSuffix "\n" }}|{{ html "<a>" }}|{{ js "'" }}|{{ urlquery "a b" }}`, `1 2a|a|&lt;a&gt;|\'|a+b`},
		{`{{ replace "a" "b" "banana" }}|{{ regexReplaceAll "a(n)" "banana" "<$1>" }}|{{ regexReplaceAllLiteral "a" "banana" "$1" }}`, "bbnbnb|b<n><n>a|b$1n$1n$1"},
		{`{{ join "," (list 1 2 3) }}|{{ cat "a" 1 nil }}|{{ quote "a" 1 }}|{{ squote "a" }}|{{ toString 5 }}`, `1,2,3|a 1|"a" "1"|'a'|5`},
		{`{{ wrapWith 3 "|" "ab cd ef" }}|{{ wrap 80 "short" }}`, "ab|cd|ef|short"},
		{`{{ splitList "," "a,b" }}|{{ (split "," "a,b")._1 }}|{{ (splitn "," 2 "a,b,c")._1 }}`, "[a b]|b|b,c"},
		{`{{ regexSplit "," "a,b,c" -1 }}|{{ regexSplit "," "a,b,c" 2 }}|{{ regexFindAll "[0-9]" "a1b2" -1 }}`, "[a b c]|[a b,c]|[1 2]"},
		{`{{ concat (list 1) (list 2) }}|{{ append (list 1) 2 }}|{{ prepend (list 1) 0 }}`, "[1 2]|[1 2]|[0 1]"},
		{`{{ uniq (list 1 "1" 1 2 (list 1) (list 1) nil nil) }}|{{ len (uniq (until 1000000)) }}`, "[1 1 2 [1] <nil>]|1000000"},
		{`{{ keys (dict "b" 1 "a" 2 "c" 3) }}|{{ values (dict "b" 1 "a" 2) }}|{{ keys (dict "b" 1) (dict "a" 2) }}`, "[a b c]|[2 1]|[a b]"},
		{`{{ toJson (dict "a" (list 1 "x")) }}|{{ toRawJson (list "<") }}|{{ deepCopy (list 1 2) }}|{{ sortAlpha (list "b" "a") }}`, `{"a":[1,"x"]}|["<"]|[1 2]|[a b]`},
		{`{{ $d := dict "a" 1 }}{{ $_ := set $d "b" (dict "c" 2) }}{{ $d }}|{{ merge (dict "a" 1) (dict "b" 2) }}|{{ mergeOverwrite (dict "a" 1) (dict "a" 2) }}`, "map[a:1 b:map[c:2]]|map[a:1 b:2]|map[a:2]"},
		{`{{ b64enc "hi" }}|{{ upper "x" }}|{{ kebabcase "aB" }}|{{ regexQuoteMeta "a.b" }}|{{ toDecimal "777" }}|{{ urlJoin (dict "scheme" "https" "host" "a") }}`, `aGk=|X|a-b|a\.b|511|https://a`},
		{`{{ len (printf "%1024d" 1) }}|{{ dict 1 2 }}`, "1024|map[1:2]"},
	}
	for _, tt := range tests {
		got, err := renderWith(t, goTemplateEngine{}, tt.config)
		if err != nil || got != tt.want+"\n" {
			t.Errorf("%s = %q, %v; want %q", tt.config, got, err, tt.want)
		}
	}
}

// TestCountsMatchSprig: until, untilStep and seq give sprig's numbers for
// every small argument.
func TestCountsMatchSprig(t *testing.T) {
	sprigFuncs := sprig.TxtFuncMap()
	sprigUntilStep := sprigFuncs["untilStep"].(func(int, int, int) []int)
	sprigUntil := sprigFuncs["until"].(func(int) []int)
	sprigSeq := sprigFuncs["seq"].(func(...int) string)
	for a := -7; a <= 7; a++ {
		if got, _ := boundedUntil(a); !reflect.DeepEqual(got, sprigUntil(a)) {
			t.Errorf("until %d = %v, sprig %v", a, got, sprigUntil(a))
		}
		if got, _ := boundedSeq(a); got != sprigSeq(a) {
			t.Errorf("seq %d = %q, sprig %q", a, got, sprigSeq(a))
		}
		for b := -7; b <= 7; b++ {
			if got, _ := boundedSeq(a, b); got != sprigSeq(a, b) {
				t.Errorf("seq %d %d = %q, sprig %q", a, b, got, sprigSeq(a, b))
			}
			for c := -7; c <= 7; c++ {
				if got, _ := boundedUntilStep("untilStep", a, b, c); !reflect.DeepEqual(got, sprigUntilStep(a, b, c)) {
					t.Errorf("untilStep %d %d %d = %v, sprig %v", a, b, c, got, sprigUntilStep(a, b, c))
				}
				if got, _ := boundedSeq(a, b, c); got != sprigSeq(a, b, c) {
					t.Errorf("seq %d %d %d = %q, sprig %q", a, b, c, got, sprigSeq(a, b, c))
				}
			}
		}
	}
}

// TestEverySprigFunctionHasAPolicy: the table of funcs.go names each of
// sprig's functions once; a function sprig adds fails this test until
// someone decides about it.
func TestEverySprigFunctionHasAPolicy(t *testing.T) {
	replacements := boundedSprigFuncs(sprig.TxtFuncMap())
	decided := map[string]funcPolicy{}
	for _, entry := range sprigPolicies {
		for _, name := range strings.Fields(entry.names) {
			if _, twice := decided[name]; twice {
				t.Errorf("%s has two policies", name)
			}
			decided[name] = entry.policy
		}
	}
	for name := range sprig.TxtFuncMap() {
		policy, found := decided[name]
		switch {
		case !found:
			t.Errorf("sprig's %s has no policy in sprigPolicies", name)
		case policy == bounded && replacements[name] == nil:
			t.Errorf("%s is bounded but has no replacement", name)
		case policy == removed && baseFuncs[name] != nil:
			t.Errorf("%s is removed but available", name)
		case policy != removed && baseFuncs[name] == nil:
			t.Errorf("%s is not available", name)
		}
	}
	for name := range decided {
		if _, found := sprig.TxtFuncMap()[name]; !found {
			t.Errorf("%s has a policy but is not sprig's", name)
		}
	}
	for name := range replacements {
		if decided[name] != bounded {
			t.Errorf("%s has a replacement but is not bounded", name)
		}
	}
}

// TestRemovedFunctionsAreUndefined: a template calling one does not
// compile.
func TestRemovedFunctionsAreUndefined(t *testing.T) {
	for _, name := range []string{"now", "randAlphaNum", "uuidv4", "genPrivateKey", "derivePassword", "bcrypt", "shuffle", "randInt", "date", "env"} {
		_, err := goTemplateEngine{}.Compile(Templates{HAProxyConfig: "{{ " + name + " }}"})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("function %q not defined", name)) {
			t.Errorf("%s: err = %v, want it undefined", name, err)
		}
	}
}

// TestRenderStopsInALoopThatWritesNothing: the context is checked at each
// iteration, not only when the template writes.
func TestRenderStopsInALoopThatWritesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	renderer := compile(t, Templates{HAProxyConfig: `{{ range .resources.slow.List }}{{ end }}{{ range until 3 }}{{ end }}`})
	data := Data{Resources: map[string]Store{"slow": cancellingStore{cancel: cancel}}}
	if _, err := renderer.Render(ctx, data); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
