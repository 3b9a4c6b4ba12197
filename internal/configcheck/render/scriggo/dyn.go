package scriggo

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
)

// The dyn_ helpers are what the transformation calls where haptic's
// templates use a value whose type is only known at run time (an
// unstructured object's field) in a way upstream's checker wants typed.
// Their names are not haptic's: a template calling one by name gets what
// the transformation would have given it.
var dynHelpers = map[string]any{
	"dyn_cmp":         dynCompare,
	"dyn_m_Fetch":     dynFetch,
	"dyn_m_GetSingle": dynGetSingle,
}

// dynCompare orders a and b for op (<, <=, > or >=): as numbers when both
// are numbers (an object's 8080 is an int64, a literal an int), otherwise
// as their text; nil is 0 beside a number and "" beside anything else.
func dynCompare(op string, a, b any) bool {
	var c int
	x, xNumber := number(a)
	y, yNumber := number(b)
	switch {
	case xNumber && yNumber:
		c = cmp.Compare(x, y)
	case xNumber && b == nil:
		c = cmp.Compare(x, 0)
	case yNumber && a == nil:
		c = cmp.Compare(0, y)
	default:
		c = cmp.Compare(text(a), text(b))
	}
	switch op {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	default:
		return c >= 0
	}
}

// number returns v as a float64 when it is a number.
func number(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

// text is v as a template prints it; nil is empty.
func text(v any) string {
	switch s := v.(type) {
	case nil:
		return ""
	case string:
		return s
	case fmt.Stringer:
		return s.String()
	}
	return fmt.Sprint(v)
}

// dynFetch is x.Fetch(keys...) (see rerouteVariadicMethod); nil fetches
// nothing.
func dynFetch(x any, keys ...any) []any {
	if store, ok := x.(interface{ Fetch(...any) []any }); ok {
		return store.Fetch(keys...)
	}
	return []any{}
}

// dynGetSingle is x.GetSingle(keys...); nil gets nil.
func dynGetSingle(x any, keys ...any) any {
	if store, ok := x.(interface{ GetSingle(...any) any }); ok {
		return store.GetSingle(keys...)
	}
	return nil
}

func init() {
	for name, fn := range map[string]any{
		"dyn_arith":         dynArith,
		"dyn_concat":        dynConcat,
		"dyn_index":         dynIndex,
		"dyn_set":           dynSet,
		"dyn_range":         dynRange,
		"dyn_as_map":        asMap,
		"dyn_as_slice":      asSlice,
		"dyn_as_string":     asString,
		"dyn_as_bool":       asBool,
		"dyn_as_int":        asInt,
		"dyn_as_int64":      asInt64,
		"dyn_as_float":      asFloat,
		"dyn_as_strings":    asStrings,
		"dyn_as_string_map": asStringMap,
		"dyn_as_map_slice":  asMapSlice,
	} {
		dynHelpers[name] = fn
	}
}

// dynArith is a op b on loosely typed values: numbers as numbers (whole
// numbers stay int64), + on text concatenates, nil is 0 or "".
func dynArith(op string, a, b any) (any, error) {
	if op == "+" {
		if _, ok := a.(string); ok {
			return dynConcat(a, b), nil
		}
		if _, ok := b.(string); ok {
			return dynConcat(a, b), nil
		}
	}
	x, xOK := number(orZero(a))
	y, yOK := number(orZero(b))
	if !xOK || !yOK {
		return nil, fmt.Errorf("invalid operation: %v %s %v (operands must be numbers)", a, op, b)
	}
	whole := isWhole(a) && isWhole(b)
	switch op {
	case "+":
		return numberResult(x+y, whole), nil
	case "-":
		return numberResult(x-y, whole), nil
	case "*":
		return numberResult(x*y, whole), nil
	case "/":
		if y == 0 {
			return nil, fmt.Errorf("invalid operation: division by zero")
		}
		if whole {
			return int64(x) / int64(y), nil
		}
		return x / y, nil
	case "%":
		if !whole || y == 0 {
			return nil, fmt.Errorf("invalid operation: %v %% %v (operands must be whole numbers, the second not 0)", a, b)
		}
		return int64(x) % int64(y), nil
	}
	return nil, fmt.Errorf("invalid operation: operator %s", op)
}

func orZero(v any) any {
	if v == nil {
		return int64(0)
	}
	return v
}

func isWhole(v any) bool {
	switch reflect.ValueOf(orZero(v)).Kind() {
	case reflect.Float32, reflect.Float64:
		return false
	}
	return true
}

func numberResult(v float64, whole bool) any {
	if whole {
		return int64(v)
	}
	return v
}

// dynConcat is a + b where either is text: both as text.
func dynConcat(a, b any) string { return text(a) + text(b) }

// dynIndex is x[k] on a loosely typed x: a map's value (nil when absent),
// a list's element (nil out of range), nil on nil.
func dynIndex(x, k any) (any, error) {
	switch v := x.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return v[text(k)], nil
	case map[string]string:
		s, ok := v[text(k)]
		if !ok {
			return nil, nil
		}
		return s, nil
	}
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Map:
		key := reflect.ValueOf(k)
		if !key.IsValid() || !key.Type().AssignableTo(rv.Type().Key()) {
			return nil, nil
		}
		value := rv.MapIndex(key)
		if !value.IsValid() {
			return nil, nil
		}
		return value.Interface(), nil
	case reflect.Slice, reflect.Array, reflect.String:
		i, ok := number(k)
		if !ok || i < 0 || int(i) >= rv.Len() {
			return nil, nil
		}
		return rv.Index(int(i)).Interface(), nil
	}
	return nil, fmt.Errorf("cannot index %T", x)
}

// dynSet is x[k] = v on a loosely typed x, a map or a list.
func dynSet(x, k, v any) error {
	switch m := x.(type) {
	case map[string]any:
		m[text(k)] = v
		return nil
	case nil:
		return fmt.Errorf("assignment to entry in nil map")
	}
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Map:
		key, value := reflect.ValueOf(k), reflect.ValueOf(v)
		if !key.IsValid() || !key.Type().AssignableTo(rv.Type().Key()) || !value.IsValid() || !value.Type().AssignableTo(rv.Type().Elem()) {
			return fmt.Errorf("cannot set %v in %T", k, x)
		}
		rv.SetMapIndex(key, value)
		return nil
	case reflect.Slice:
		i, ok := number(k)
		if !ok || i < 0 || int(i) >= rv.Len() {
			return fmt.Errorf("index %v out of range", k)
		}
		rv.Index(int(i)).Set(reflect.ValueOf(v))
		return nil
	}
	return fmt.Errorf("cannot index %T", x)
}

// dynRange is what range over a loosely typed value walks: a list's
// elements, a map's keys in order, nothing for nil.
func dynRange(x any) []any {
	switch v := x.(type) {
	case nil:
		return []any{}
	case []any:
		return v
	}
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface()
		}
		return out
	case reflect.Map:
		keys := rv.MapKeys()
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = k.Interface()
		}
		slices.SortFunc(out, func(a, b any) int { return cmp.Compare(text(a), text(b)) })
		return out
	}
	return []any{}
}

func asMap(v any) map[string]any {
	switch m := v.(type) {
	case map[string]any:
		return m
	case nil:
		return nil
	}
	// Any other map keyed by text, as group_by's map[string][]any which
	// a template assigns to a map[string]any: the fork converts it, so
	// the entries are copied under the same keys.
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String {
		return nil
	}
	out := make(map[string]any, rv.Len())
	for iter := rv.MapRange(); iter.Next(); {
		out[iter.Key().String()] = iter.Value().Interface()
	}
	return out
}

func asSlice(v any) []any {
	if v == nil {
		return nil
	}
	return dynRangeList(v)
}

// dynRangeList is v's elements when v is a list, else nil.
func dynRangeList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out
}

func asString(v any) string { return text(v) }

func asBool(v any) bool {
	b, _ := v.(bool)
	return b
}

func asInt(v any) int { return int(asInt64(v)) }

func asInt64(v any) int64 {
	n, _ := number(v)
	return int64(n)
}

func asFloat(v any) float64 {
	n, _ := number(v)
	return n
}

func asStrings(v any) []string {
	if s, ok := v.([]string); ok {
		return s
	}
	list := dynRangeList(v)
	if list == nil {
		return nil
	}
	out := make([]string, len(list))
	for i, item := range list {
		out[i] = text(item)
	}
	return out
}

func asStringMap(v any) map[string]string {
	switch m := v.(type) {
	case map[string]string:
		return m
	case map[string]any:
		out := make(map[string]string, len(m))
		for k, item := range m {
			out[k] = text(item)
		}
		return out
	}
	return nil
}

func asMapSlice(v any) []map[string]any {
	if s, ok := v.([]map[string]any); ok {
		return s
	}
	list := dynRangeList(v)
	if list == nil {
		return nil
	}
	out := make([]map[string]any, len(list))
	for i, item := range list {
		out[i] = asMap(item)
	}
	return out
}
