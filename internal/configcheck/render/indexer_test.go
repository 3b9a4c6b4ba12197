package render

import (
	"reflect"
	"strings"
	"testing"
)

func TestIndexKeys(t *testing.T) {
	slice := decodeJSON(t, `{
		"metadata": {"namespace": "shop", "name": "api-abc12",
			"labels": {"kubernetes.io/service-name": "api", "tier": "web"}},
		"spec": {"rules": [{"host": "a.example"}, {"host": "b.example"}], "port": 8080, "ratio": 0.5, "enabled": true}
	}`)
	tests := []struct {
		indexBy []string
		want    []string
	}{
		{[]string{"metadata.namespace", "metadata.name"}, []string{"shop", "api-abc12"}},
		{[]string{".metadata.namespace", "{.metadata.name}"}, []string{"shop", "api-abc12"}},
		{[]string{"metadata.labels['kubernetes.io/service-name']"}, []string{"api"}},
		{[]string{`metadata.labels["kubernetes.io/service-name"]`}, []string{"api"}},
		{[]string{`metadata.labels.kubernetes\.io/service-name`}, []string{"api"}},
		{[]string{"metadata.labels['tier']", "metadata.labels.tier"}, []string{"web", "web"}},
		{[]string{"spec.rules[1].host"}, []string{"b.example"}},
		{[]string{"spec.rules[5].host"}, []string{""}},
		{[]string{"spec.port", "spec.ratio", "spec.enabled"}, []string{"8080", "0.5", "true"}},
		{[]string{"metadata.labels.missing", "nothing.at.all"}, []string{"", ""}},
		{nil, []string{}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.indexBy, ","), func(t *testing.T) {
			got, err := mustIndexer(t, tt.indexBy...).IndexKeys(NormalizeObject(slice))
			if err != nil {
				t.Fatalf("IndexKeys: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("IndexKeys = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIndexKeysRefusesNonScalar(t *testing.T) {
	_, err := mustIndexer(t, "metadata.labels").IndexKeys(object("ns", "a", map[string]any{"x": "y"}))
	if err == nil || !strings.Contains(err.Error(), `indexBy "metadata.labels"`) {
		t.Fatalf("IndexKeys of a map field: err = %v, want an error naming the expression", err)
	}
}

func TestNewIndexerRejectsMalformedExpressions(t *testing.T) {
	for _, expression := range []string{
		"", ".", "metadata..name", "metadata.", "metadata.labels['x'", "metadata.labels[x]",
		"metadata.labels['x'y]", `metadata\`, "spec.rules[-1]",
	} {
		t.Run(expression, func(t *testing.T) {
			if _, err := NewIndexer([]string{expression}); err == nil {
				t.Errorf("NewIndexer(%q) succeeded, want an error", expression)
			}
		})
	}
}

func TestLookupKeys(t *testing.T) {
	indexer := mustIndexer(t, "metadata.namespace", "metadata.name")
	got, err := indexer.lookupKeys("Fetch", []any{"ns", int64(80)})
	if err != nil || !reflect.DeepEqual(got, []string{"ns", "80"}) {
		t.Errorf("lookupKeys = %q, %v", got, err)
	}
	if _, err := indexer.lookupKeys("Fetch", []any{"a", "b", "c"}); err == nil ||
		!strings.Contains(err.Error(), "3 keys given, but the store is indexed by 2 (metadata.namespace, metadata.name)") {
		t.Errorf("too many keys: err = %v", err)
	}
	if _, err := indexer.lookupKeys("Fetch", []any{[]any{"x"}}); err == nil {
		t.Errorf("a list as key: want an error")
	}
}
