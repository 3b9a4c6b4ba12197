package render

import (
	"reflect"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Native fuzz targets for the paths a config's author writes: indexBy
// expressions and watchedResourcesIgnoreFields. Run one with
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
