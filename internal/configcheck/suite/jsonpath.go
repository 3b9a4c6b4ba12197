package suite

import (
	"fmt"
	"strings"

	"k8s.io/client-go/util/jsonpath"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// parseJSONPath compiles a jsonpath assertion's expression for
// k8s.io/client-go/util/jsonpath, accepting haptic's spelling: a store's
// List() is dropped, since the materialized context holds each resource as
// its list already ({.resources.services.List()[0].metadata.name} becomes
// {.resources.services[0].metadata.name}), and an expression without braces
// is wrapped in them, with a leading dot added if missing
// (resources.services[0] becomes {.resources.services[0]}).
//
// A fresh JSONPath is returned for each evaluation: FindResults keeps range
// state in the parsed template.
func parseJSONPath(expression string) (*jsonpath.JSONPath, error) {
	text := strings.ReplaceAll(strings.TrimSpace(expression), ".List()", "")
	if !strings.Contains(text, "{") {
		if !strings.HasPrefix(text, ".") && !strings.HasPrefix(text, "[") {
			text = "." + text
		}
		text = "{" + text + "}"
	}
	path := jsonpath.New("assertion").AllowMissingKeys(true)
	if err := path.Parse(text); err != nil {
		return nil, err
	}
	return path, nil
}

// templateContext is the data templates see, materialized as plain values
// for JSONPath: each store as the list of its objects (ordered as List
// orders them), extraContext normalized as Render normalizes it.
func templateContext(stores map[string]render.Store, extraContext map[string]any) map[string]any {
	resources := make(map[string]any, len(stores))
	for name, store := range stores {
		objs := store.List()
		list := make([]any, len(objs))
		for i, obj := range objs {
			list[i] = obj
		}
		resources[name] = list
	}
	extra, _ := render.Normalize(extraContext).(map[string]any)
	if extra == nil {
		extra = map[string]any{}
	}
	return map[string]any{"resources": resources, "extraContext": extra}
}

// evaluateJSONPath returns the expression's results joined as kubectl's
// -o jsonpath prints them (scalars as text, maps and lists as JSON, values
// of one expression separated by spaces), and how many values there were.
func evaluateJSONPath(expression string, data map[string]any) (string, int, error) {
	path, err := parseJSONPath(expression)
	if err != nil {
		return "", 0, fmt.Errorf("invalid JSONPath %q: %w", expression, err)
	}
	results, err := path.FindResults(data)
	if err != nil {
		// AllowMissingKeys covers missing fields, not list indexes: an
		// index past a list's end is as much "nothing there" as a missing
		// field (List()[0] of an empty store).
		if strings.Contains(err.Error(), "array index out of bounds") {
			return "", 0, nil
		}
		return "", 0, fmt.Errorf("JSONPath %q: %w", expression, err)
	}
	var out strings.Builder
	count := 0
	for _, values := range results {
		count += len(values)
		if err := path.PrintResults(&out, values); err != nil {
			return "", 0, fmt.Errorf("JSONPath %q: %w", expression, err)
		}
	}
	return out.String(), count, nil
}
