package render

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Native fuzz targets for the paths a config's author writes (indexBy
// expressions and watchedResourcesIgnoreFields) and for the values a
// tenant writes into watched objects. Run one with
//
//	go test ./internal/configcheck/render -run '^$' -fuzz '^FuzzIndexer$' -fuzztime 30s
//
// or all of them with make fuzz.

func pathSeeds() []string {
	return []string{
		"metadata.namespace",
		"{.metadata.name}",
		".metadata.labels['kubernetes.io/service-name']",
		`metadata.labels["a\"b"]`,
		`metadata.labels.kubernetes\.io/service-name`,
		"spec.rules[1].host",
		"spec.rules[ 0 ]",
		"[0]",
		"a[0]b",
		"spec..a",
		"a.",
		"a\\",
		"['x",
		"[-1]",
		"[9223372036854775807]",
		"{}",
		"",
	}
}

const fuzzObject = `{"metadata":{"namespace":"shop","name":"api","labels":{"kubernetes.io/service-name":"api","a\"b":"q"}},` +
	`"spec":{"rules":[{"host":"a.example"},{"host":"b.example"}],"port":8080,"ratio":0.5,"big":9007199254740993,"huge":1e300,"on":true,"none":null,"list":[1,[2],{"x":3}]}}`

// FuzzIndexer compiles random indexBy expressions and applies them to
// random objects decoded as admission requests are (numbers int64 or
// float64). NewIndexer never panics, nor does IndexKeys with what it
// accepts; IndexKeys gives one key per expression, and the same keys for
// the object and its normalized copy (the store holds normalized objects;
// selectors and lookups see either).
func FuzzIndexer(f *testing.F) {
	for _, p := range pathSeeds() {
		f.Add(p, []byte(fuzzObject))
	}
	f.Add("a", []byte(`{"a":{"b":1}}`))
	f.Add("a[1]", []byte(`{"a":[null,-0.0]}`))
	f.Fuzz(func(t *testing.T, expression string, raw []byte) {
		indexBy := []string{expression}
		if strings.Contains(expression, "\n") {
			indexBy = strings.Split(expression, "\n") // several expressions
		}
		ix, err := NewIndexer(indexBy)
		if err != nil {
			return
		}
		if !reflect.DeepEqual(ix.Expressions(), indexBy) {
			t.Fatalf("expressions %q from %q", ix.Expressions(), indexBy)
		}
		var obj map[string]any
		if utiljson.Unmarshal(raw, &obj) != nil {
			return
		}
		keys, err := ix.IndexKeys(obj)
		if err == nil && len(keys) != len(indexBy) {
			t.Fatalf("%d keys for %d expressions", len(keys), len(indexBy))
		}
		normalized, nerr := ix.IndexKeys(NormalizeObject(obj))
		if (err == nil) != (nerr == nil) || !reflect.DeepEqual(keys, normalized) {
			t.Fatalf("keys %q (%v) of the object, %q (%v) of its normalized copy: %s", keys, err, normalized, nerr, raw)
		}
	})
}

// FuzzParseFieldPath parses random watchedResourcesIgnoreFields entries
// and deletes them from random objects: neither panics; what it accepts
// NewIndexer accepts too (they share one syntax); and after Delete the
// field is gone, so an indexer over the same path finds the empty key.
func FuzzParseFieldPath(f *testing.F) {
	for _, p := range pathSeeds() {
		f.Add(p, []byte(fuzzObject))
	}
	f.Fuzz(func(t *testing.T, expression string, raw []byte) {
		p, err := ParseFieldPath(expression)
		if err != nil {
			return
		}
		ix, err := NewIndexer([]string{expression})
		if err != nil {
			t.Fatalf("ParseFieldPath accepts %q, NewIndexer does not: %v", expression, err)
		}
		var obj map[string]any
		if utiljson.Unmarshal(raw, &obj) != nil || obj == nil {
			return
		}
		obj = NormalizeObject(obj)
		p.Delete(obj)
		keys, err := ix.IndexKeys(obj)
		if err != nil || keys[0] != "" {
			t.Fatalf("%q still found after Delete: %q %v in %v", expression, keys, err, obj)
		}
	})
}

// fuzzValueSnippets and fuzzValueConfig print the tenant's value (see
// tenantData) in every way a template commonly does, each on a line of its
// own.
var fuzzValueSnippets = map[string]string{
	"show":  `{{ .spec.value }}`,
	"lines": "first {{ (index .resources.ingresses.List 0).spec.value | lower }}\nsecond",
}

const fuzzValueConfig = `global
{{- range $o := .resources.ingresses.List }}
  plain {{ $o.spec.value }}
  annotation {{ index $o.metadata.annotations "haproxy.gatehouse.dev/backend-name" }}
  printf {{ printf "be_%s_%v_%q" $o.spec.value $o.spec.value $o.spec.value }}
  print {{ print $o.spec.value 1 }}
  map {{ $o.spec }}
  list {{ list $o.spec.value "x" }} {{ $o.spec.list }}
  dict {{ dict "k" $o.spec.value }}
  pipes {{ $o.spec.value | lower | trim | replace "a" "b" | upper | trunc 40 }}
  cat {{ cat $o.spec.value "x" }} {{ join "," $o.spec.list }}
  quoted {{ quote $o.spec.value }} {{ toJson $o.spec }} {{ squote $o.spec.value }}
  with {{ with $o.spec.value }}{{ . }}{{ end }}
  range {{ range $o.spec.list }}{{ . }} {{ end }}
  template {{ template "show" $o }}
  render {{ render "lines" | indent 4 }}
  b64 {{ $o.spec.value | b64enc | b64dec }}
{{- end }}
`

// FuzzRenderedValueNoExtraLine: whatever string a tenant puts in a
// watched field, the rendering either fails with the escaping step's
// *UnsafeValueError or has exactly as many lines as with a plain value.
func FuzzRenderedValueNoExtraLine(f *testing.F) {
	for _, seed := range []string{
		"plain", "", "x\nacl leak src -f /etc/passwd", "x\r\nbackend evil", "\u2028", "\u0085", "\x00", "\x1b[2J",
		"\x7f", "\xe2\x80", "a\tb", "%s%d%v", "{{ . }}", "é\u00a0", "\\n", "\"", "\uFEFF", "\U0010FFFF",
	} {
		f.Add(seed)
	}
	renderer := compile(f, Templates{
		Snippets:      fuzzValueSnippets,
		HAProxyConfig: fuzzValueConfig,
		Maps:          map[string]string{"hosts.map": `{{ range $o := .resources.ingresses.List }}{{ $o.spec.value }} be_{{ $o.metadata.name }}{{ end }}`},
	})
	lineCounts := func(t testing.TB, value string) (map[string]int, error) {
		output, err := renderer.Render(context.Background(), tenantData(t, value))
		if err != nil {
			return nil, err
		}
		return map[string]int{
			"haproxy.cfg": strings.Count(output.HAProxyConfig, "\n"),
			"hosts.map":   strings.Count(output.Maps["hosts.map"], "\n"),
		}, nil
	}
	want, err := lineCounts(f, "plain")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := lineCounts(t, value)
		if err != nil {
			var unsafeErr *UnsafeValueError
			if !errors.As(err, &unsafeErr) {
				t.Fatalf("value %q: %v, want either a rendering or an *UnsafeValueError", value, err)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("value %q: line counts %v, with a plain value %v", value, got, want)
		}
	})
}
