package scriggo

import (
	"cmp"
	"fmt"
	"reflect"
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
