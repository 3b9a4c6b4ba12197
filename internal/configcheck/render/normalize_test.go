package render

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"whole float becomes int64", 8080.0, int64(8080)},
		{"fraction stays float", 0.5, 0.5},
		{"float too large for int64 stays float", 1e19, 1e19},
		{"json.Number integer", json.Number("443"), int64(443)},
		{"json.Number fraction", json.Number("1.5"), 1.5},
		{"int becomes int64", 3, int64(3)},
		{"string unchanged", "x", "x"},
		{"null fields dropped, nested numbers converted",
			map[string]any{"a": nil, "b": map[string]any{"port": 80.0, "c": nil}},
			map[string]any{"b": map[string]any{"port": int64(80)}}},
		{"list elements converted, nil elements kept in place",
			[]any{1.0, nil, "x"},
			[]any{int64(1), nil, "x"}},
		{"string map becomes any map", map[string]string{"k": "v"}, map[string]any{"k": "v"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Normalize(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Normalize(%#v) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestNormalizeObjectCopies(t *testing.T) {
	original := map[string]any{"spec": map[string]any{"port": 80.0}}
	normalized := NormalizeObject(original)
	normalized["spec"].(map[string]any)["port"] = int64(1)
	if original["spec"].(map[string]any)["port"] != 80.0 {
		t.Errorf("NormalizeObject changed its argument: %v", original)
	}
}
