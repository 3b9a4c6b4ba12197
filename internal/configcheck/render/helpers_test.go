package render

import (
	"encoding/json"
	"testing"
)

// object builds an unstructured object with the given metadata.
func object(namespace, name string, labels map[string]any) map[string]any {
	metadata := map[string]any{"name": name}
	if namespace != "" {
		metadata["namespace"] = namespace
	}
	if labels != nil {
		metadata["labels"] = labels
	}
	return map[string]any{"metadata": metadata}
}

// decodeJSON decodes a JSON object the way an admission request's raw
// object is decoded: every number a float64.
func decodeJSON(t testing.TB, text string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(text), &obj); err != nil {
		t.Fatalf("decode %s: %v", text, err)
	}
	return obj
}

// names lists the namespace/name of objs, to compare results in order.
func names(objs []map[string]any) []string {
	out := make([]string, len(objs))
	for i, obj := range objs {
		out[i] = identityOf(obj).String()
	}
	return out
}

func mustIndexer(t testing.TB, indexBy ...string) *Indexer {
	t.Helper()
	indexer, err := NewIndexer(indexBy)
	if err != nil {
		t.Fatalf("NewIndexer(%q): %v", indexBy, err)
	}
	return indexer
}

func mustStore(t testing.TB, indexer *Indexer, objs ...map[string]any) *MemoryStore {
	t.Helper()
	store, err := NewMemoryStore(indexer, objs...)
	if err != nil {
		t.Fatalf("NewMemoryStore: %v", err)
	}
	return store
}
