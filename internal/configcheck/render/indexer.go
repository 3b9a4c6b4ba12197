package render

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Indexer computes the index keys of objects from a watched resource's
// indexBy expressions. The real store and every overlay of it use the same
// Indexer, so a proposed object is found by exactly the lookups that would
// find it once stored.
type Indexer struct {
	expressions []string
	paths       [][]pathStep
}

// pathStep is one step of an indexBy expression: a map field or a list index.
type pathStep struct {
	field   string
	index   int
	isIndex bool
}

// NewIndexer compiles indexBy expressions. Each expression is a dotted path
// into the object, as haptic writes them:
//
//	metadata.namespace
//	metadata.labels['kubernetes.io/service-name']   (or ["..."])
//	metadata.labels.kubernetes\.io/service-name     (a backslash escapes a dot)
//	spec.rules[0].host                              (a list index)
//
// A leading dot and JSONPath's surrounding braces ({.metadata.name}) are
// accepted. An empty indexBy is allowed: the store then supports List and a
// Fetch without keys only.
func NewIndexer(indexBy []string) (*Indexer, error) {
	indexer := &Indexer{expressions: append([]string(nil), indexBy...)}
	for _, expression := range indexBy {
		path, err := parseIndexExpression(expression)
		if err != nil {
			return nil, fmt.Errorf("indexBy %q: %w", expression, err)
		}
		indexer.paths = append(indexer.paths, path)
	}
	return indexer, nil
}

// Expressions returns the indexBy expressions, in key order.
func (ix *Indexer) Expressions() []string {
	return append([]string(nil), ix.expressions...)
}

// IndexKeys returns obj's key for every indexBy expression, in order. A
// missing field gives the empty key, so an object without the indexed label
// is still stored (List sees it) and is found by Fetch "". A field holding a
// map or a list cannot be a key and is an error.
func (ix *Indexer) IndexKeys(obj map[string]any) ([]string, error) {
	keys := make([]string, len(ix.paths))
	for i, path := range ix.paths {
		key, err := keyString(lookupPath(obj, path))
		if err != nil {
			return nil, fmt.Errorf("indexBy %q: %w", ix.expressions[i], err)
		}
		keys[i] = key
	}
	return keys, nil
}

// lookupKeys converts the keys a template passed to Fetch or GetSingle and
// checks there are no more of them than indexBy expressions.
func (ix *Indexer) lookupKeys(method string, keys []any) ([]string, error) {
	if len(keys) > len(ix.paths) {
		return nil, fmt.Errorf("%s: %d keys given, but the store is indexed by %d (%s)",
			method, len(keys), len(ix.paths), strings.Join(ix.expressions, ", "))
	}
	out := make([]string, len(keys))
	for i, key := range keys {
		converted, err := keyString(key)
		if err != nil {
			return nil, fmt.Errorf("%s: key %d: %w", method, i+1, err)
		}
		out[i] = converted
	}
	return out, nil
}

// keyString turns a scalar field value (or a template argument) into the
// string form keys are compared in: whole numbers without a decimal point,
// nil as the empty key.
func keyString(value any) (string, error) {
	switch v := value.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int:
		return strconv.Itoa(v), nil
	case int32:
		return strconv.FormatInt(int64(v), 10), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case float64:
		if integer, ok := integralOrFloat(v).(int64); ok {
			return strconv.FormatInt(integer, 10), nil
		}
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case json.Number:
		return keyString(Normalize(v))
	case fmt.Stringer:
		return v.String(), nil
	default:
		return "", fmt.Errorf("a %T cannot be an index key, only a string, number or bool", value)
	}
}

// lookupPath walks obj along path; a missing field or index gives nil.
func lookupPath(obj map[string]any, path []pathStep) any {
	var current any = obj
	for _, step := range path {
		if step.isIndex {
			list, ok := current.([]any)
			if !ok || step.index >= len(list) {
				return nil
			}
			current = list[step.index]
			continue
		}
		switch m := current.(type) {
		case map[string]any:
			current = m[step.field]
		case map[string]string:
			value, ok := m[step.field]
			if !ok {
				return nil
			}
			current = value
		default:
			return nil
		}
	}
	return current
}

// parseIndexExpression splits an indexBy expression into steps.
func parseIndexExpression(expression string) ([]pathStep, error) {
	s := strings.TrimSpace(expression)
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	s = strings.TrimPrefix(s, ".")
	if s == "" {
		return nil, fmt.Errorf("empty path")
	}

	var steps []pathStep
	var field strings.Builder
	fieldStarted := false
	endField := func(position int) error {
		if !fieldStarted {
			return fmt.Errorf("empty field name at offset %d", position)
		}
		steps = append(steps, pathStep{field: field.String()})
		field.Reset()
		fieldStarted = false
		return nil
	}

	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf("trailing backslash")
			}
			i++
			field.WriteByte(s[i])
			fieldStarted = true
		case '.':
			if fieldStarted {
				if err := endField(i); err != nil {
					return nil, err
				}
			} else if len(steps) == 0 || !stepEndedByBracket(s, i) {
				return nil, fmt.Errorf("empty field name at offset %d", i)
			}
		case '[':
			if fieldStarted {
				if err := endField(i); err != nil {
					return nil, err
				}
			}
			step, next, err := parseBracket(s, i)
			if err != nil {
				return nil, err
			}
			steps = append(steps, step)
			i = next
		default:
			field.WriteByte(c)
			fieldStarted = true
		}
	}
	if fieldStarted {
		steps = append(steps, pathStep{field: field.String()})
	} else if !strings.HasSuffix(s, "]") {
		return nil, fmt.Errorf("path ends with a dot")
	}
	return steps, nil
}

// stepEndedByBracket reports whether the dot at position follows a ']', as
// in spec.rules[0].host.
func stepEndedByBracket(s string, position int) bool {
	return position > 0 && s[position-1] == ']'
}

// parseBracket parses ['field'], ["field"] or [index] starting at s[open] ==
// '[' and returns the step and the position of the closing bracket.
func parseBracket(s string, open int) (pathStep, int, error) {
	if open+1 >= len(s) {
		return pathStep{}, 0, fmt.Errorf("unterminated [ at offset %d", open)
	}
	if quote := s[open+1]; quote == '\'' || quote == '"' {
		var field strings.Builder
		for i := open + 2; i < len(s); i++ {
			switch s[i] {
			case '\\':
				if i+1 < len(s) {
					i++
					field.WriteByte(s[i])
				}
			case quote:
				if i+1 >= len(s) || s[i+1] != ']' {
					return pathStep{}, 0, fmt.Errorf("expected ] after the quoted field at offset %d", i+1)
				}
				return pathStep{field: field.String()}, i + 1, nil
			default:
				field.WriteByte(s[i])
			}
		}
		return pathStep{}, 0, fmt.Errorf("unterminated quote at offset %d", open+1)
	}
	closing := strings.IndexByte(s[open:], ']')
	if closing < 0 {
		return pathStep{}, 0, fmt.Errorf("unterminated [ at offset %d", open)
	}
	closing += open
	index, err := strconv.Atoi(strings.TrimSpace(s[open+1 : closing]))
	if err != nil || index < 0 {
		return pathStep{}, 0, fmt.Errorf("[%s] is neither a quoted field nor a list index", s[open+1:closing])
	}
	return pathStep{index: index, isIndex: true}, closing, nil
}

// FieldPath is a path written as an indexBy expression, used to remove a
// field from objects (watchedResourcesIgnoreFields).
type FieldPath struct {
	steps []pathStep
}

// ParseFieldPath reads a path as NewIndexer reads indexBy expressions.
func ParseFieldPath(expression string) (FieldPath, error) {
	steps, err := parseIndexExpression(expression)
	if err != nil {
		return FieldPath{}, fmt.Errorf("%q: %w", expression, err)
	}
	if steps[len(steps)-1].isIndex {
		return FieldPath{}, fmt.Errorf("%q: the path must end with a field, not a list index", expression)
	}
	return FieldPath{steps: steps}, nil
}

// Delete removes the field at p from obj, if present. It changes obj: call
// it on a copy (NormalizeObject returns one).
func (p FieldPath) Delete(obj map[string]any) {
	parent := lookupPath(obj, p.steps[:len(p.steps)-1])
	if m, ok := parent.(map[string]any); ok {
		delete(m, p.steps[len(p.steps)-1].field)
	}
}
