package render

import (
	"encoding/json"
	"math"
	"slices"
)

// NormalizeObject returns a deep copy of obj in the form templates and
// indexes expect: integral numbers as int64, null fields removed. JSON
// decoding yields float64 for every number, and text/template prints a
// float64 port as 8080 only by luck of %v; arithmetic (sprig's add) and
// index keys need the integer. Null fields are dropped so that a null and an
// absent field behave alike: both print empty and both let a field chain
// such as .metadata.annotations.foo continue instead of failing on nil.
func NormalizeObject(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	return normalizeMap(obj)
}

// Normalize applies NormalizeObject's rules to any decoded JSON value.
func Normalize(value any) any {
	switch v := value.(type) {
	case map[string]any:
		return normalizeMap(v)
	case []any:
		out := make([]any, len(v))
		for i, element := range v {
			out[i] = Normalize(element)
		}
		return out
	case map[string]string:
		out := make(map[string]any, len(v))
		for key, element := range v {
			out[key] = element
		}
		return out
	case []string:
		return slices.Clone(v)
	case float64:
		return integralOrFloat(v)
	case float32:
		return integralOrFloat(float64(v))
	case json.Number:
		if integer, err := v.Int64(); err == nil {
			return integer
		}
		if float, err := v.Float64(); err == nil {
			return float
		}
		return v.String()
	case int:
		return int64(v)
	case int32:
		return int64(v)
	default:
		return value
	}
}

func normalizeMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for key, element := range m {
		if element == nil {
			continue
		}
		out[key] = Normalize(element)
	}
	return out
}

// integralOrFloat keeps fractions as float64 and turns whole numbers that fit
// into int64.
func integralOrFloat(f float64) any {
	const twoTo63 = 9223372036854775808.0
	if f == math.Trunc(f) && f >= -twoTo63 && f < twoTo63 {
		return int64(f)
	}
	return f
}
