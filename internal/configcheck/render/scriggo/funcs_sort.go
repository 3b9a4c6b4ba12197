package scriggo

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// This file holds the functions that read items by a path: haptic's
// sort_by and its fork's group_by, count_by, index_by, unique_by and
// map_extract.
//
// A path is haptic's sort_by language: "$.a.b" (or "a.b") reads field a,
// then b, of maps of any key type and of structs; a segment "[n]" reads a
// list's n-th element; "$" is the item itself. Anything else, an operator
// included, is read as a field name: "$.a ~ '/' ~ $.b" reads a field named
// "a ~ '/' ~ $" and so is nil for every item, which haptic sorts as
// equal.

// sortBy is haptic's sort_by: a sorted copy of items, by criteria in
// turn. A criterion is a path, optionally with " | length" (sort by the
// value's length) and ":exists" (by whether it is non-nil; exists wins
// over length) and ":desc" modifiers. Values compare as numbers when both
// are, as text otherwise; nil sorts last (first with :desc). The sort is
// stable, and compares as haptic's sort.Stable does, so that even values
// that do not order consistently come out in haptic's order.
func sortBy(items []any, criteria []string) ([]any, error) {
	sorted := append([]any{}, items...)
	if len(sorted) == 0 || len(criteria) == 0 {
		return sorted, nil
	}
	parsed := make([]sortCriterion, len(criteria))
	for i, c := range criteria {
		parsed[i] = parseSortCriterion(c)
	}
	// Each item's keys are read once, not at every comparison.
	keyed := make([]keyedItem, len(sorted))
	for i, item := range sorted {
		keyed[i] = keyedItem{item: item, keys: make([]any, len(parsed))}
		for j, c := range parsed {
			keyed[i].keys[j] = c.key(item)
		}
	}
	slices.SortStableFunc(keyed, func(a, b keyedItem) int {
		for j, c := range parsed {
			if order := compareSortValues(a.keys[j], b.keys[j]); order != 0 {
				if c.descending {
					return -order
				}
				return order
			}
		}
		return 0
	})
	for i := range keyed {
		sorted[i] = keyed[i].item
	}
	return sorted, nil
}

type keyedItem struct {
	item any
	keys []any
}

// sortCriterion is one parsed sort_by criterion.
type sortCriterion struct {
	path       string
	descending bool
	exists     bool
	length     bool
}

// parseSortCriterion reads a criterion as haptic does: modifiers follow
// the first ':', unknown ones are ignored, and " | length" is found (once)
// anywhere before them.
func parseSortCriterion(criterion string) sortCriterion {
	expr, modifiers, _ := strings.Cut(criterion, ":")
	var c sortCriterion
	for modifier := range strings.SplitSeq(modifiers, ":") {
		switch strings.TrimSpace(modifier) {
		case "desc":
			c.descending = true
		case "exists":
			c.exists = true
		}
	}
	if strings.Contains(expr, " | length") {
		c.length = true
		expr = strings.Replace(expr, " | length", "", 1)
	}
	c.path = strings.TrimSpace(expr)
	return c
}

// key is the value item sorts by under c.
func (c sortCriterion) key(item any) any {
	value := readPath(item, c.path)
	switch {
	case c.exists:
		return value != nil
	case c.length:
		return lengthOf(value)
	}
	return value
}

// compareSortValues orders two sort keys: nil after anything, numbers
// (of Go's numeric types, not types named after them) as numbers, strings
// as strings, anything else by its %v text (false before true). NaN is
// equal to every number.
func compareSortValues(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	if x, ok := sortNumber(a); ok {
		if y, ok := sortNumber(b); ok {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y)
		}
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

// sortNumber is v as a float64 when its type is one of Go's numeric ones.
func sortNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

// lengthOf is a string's length in bytes, a list's or a map's number of
// elements (through a pointer to a map too), and 0 for anything else.
func lengthOf(v any) int {
	if s, ok := v.(string); ok {
		return len(s)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && rv.Elem().Kind() == reflect.Map {
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return rv.Len()
	}
	return 0
}

// readPath reads path (see the top of this file) from item; nil when a
// step finds nothing.
func readPath(item any, path string) any {
	path = strings.TrimSpace(path)
	switch {
	case path == "":
		return nil
	case path == "$":
		return item
	}
	path = strings.TrimPrefix(path, "$.")
	if path == "" {
		return item
	}
	current := item
	for segment := range strings.SplitSeq(path, ".") {
		if current == nil {
			return nil
		}
		if inner, ok := strings.CutPrefix(segment, "["); ok && strings.HasSuffix(inner, "]") {
			current = elementAt(current, strings.TrimSuffix(inner, "]"))
			continue
		}
		current = fieldOf(current, segment)
	}
	return current
}

// elementAt is a list's element at a decimal index; nil when the index
// does not parse or is out of range, or v is not a list.
func elementAt(v any, index string) any {
	i, err := strconv.Atoi(index)
	if err != nil || i < 0 {
		return nil
	}
	if list, ok := v.([]any); ok {
		if i < len(list) {
			return list[i]
		}
		return nil
	}
	rv := reflect.ValueOf(v)
	if (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && i < rv.Len() {
		return rv.Index(i).Interface()
	}
	return nil
}

// fieldOf is a map's entry whose key prints as name (through a pointer to
// a map too), or a struct's exported field name (through a pointer too);
// nil when there is none.
func fieldOf(v any, name string) any {
	if m, ok := v.(map[string]any); ok {
		return m[name]
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Map:
		for iter := rv.MapRange(); iter.Next(); {
			if fmt.Sprint(iter.Key().Interface()) == name {
				return iter.Value().Interface()
			}
		}
	case reflect.Struct:
		// haptic would panic reading an unexported field; it reads as
		// missing here.
		if field := rv.FieldByName(name); field.IsValid() && field.CanInterface() {
			return field.Interface()
		}
	}
	return nil
}

// The batch functions below are registered by haptic's fork of Scriggo
// (builtin.GroupBy, CountBy, IndexBy, UniqueBy, MapExtract), whose source
// is not available. Their behaviour is inferred from the chart's calls,
// group_by(allRoutes, "pathKey") whose result is ranged with keys() and
// indexed into a []any that is then assigned back, and
// map_extract(updatedRoutes, "routeId") passed to sort_strings([]any),
// and from haptic's docs (group_by("$.metadata.namespace")):
//
//   - items is any list ([]any or a typed slice); anything else is empty;
//   - key is a path as sort_by reads it, so a plain field name and a
//     "$."-path both work;
//   - a key's value is grouped, counted and indexed by as tostring prints
//     it;
//   - items whose key is nil (missing) are left out, by every function;
//   - order is the items' order; index_by keeps the last item of a key,
//     unique_by the first.
//
// Each result is a fresh, non-nil value.

// groupBy is group_by: items by their key's text, in order.
func groupBy(items any, key string) map[string][]any {
	groups := map[string][]any{}
	forEachKeyed(items, key, func(k string, item, _ any) {
		groups[k] = append(groups[k], item)
	})
	return groups
}

// countBy is count_by: how many items have each key text.
func countBy(items any, key string) map[string]int {
	counts := map[string]int{}
	forEachKeyed(items, key, func(k string, _, _ any) { counts[k]++ })
	return counts
}

// indexBy is index_by: the last item with each key text.
func indexBy(items any, key string) map[string]any {
	index := map[string]any{}
	forEachKeyed(items, key, func(k string, item, _ any) { index[k] = item })
	return index
}

// uniqueBy is unique_by: the first item with each key text, in order.
func uniqueBy(items any, key string) []any {
	unique := []any{}
	seen := map[string]bool{}
	forEachKeyed(items, key, func(k string, item, _ any) {
		if !seen[k] {
			seen[k] = true
			unique = append(unique, item)
		}
	})
	return unique
}

// mapExtract is map_extract: every item's key value, in order.
func mapExtract(items any, key string) []any {
	values := []any{}
	forEachKeyed(items, key, func(_ string, _, value any) { values = append(values, value) })
	return values
}

// forEachKeyed calls f, in order, with each item whose key is not nil,
// the key's value and its text.
func forEachKeyed(items any, key string, f func(text string, item, value any)) {
	elems, _ := listElems(items)
	for _, item := range elems {
		if value := readPath(item, key); value != nil {
			f(toString(value), item, value)
		}
	}
}
