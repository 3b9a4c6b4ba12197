package suite

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// assertionTypes are the known assertion types, in the order errors list
// them.
var assertionTypes = []string{
	TypeHAProxyValid, TypeContains, TypeNotContains, TypeEquals,
	TypeMatchCount, TypeMatchOrder, TypeJSONPath, TypeDeterministic,
}

// targetForms is how errors spell the accepted targets.
const targetForms = `"haproxy.cfg" (the default), "rendering_error", "map:<name>", "file:<name>" or "cert:<name>"`

// Validate checks validation tests before they are run: fixture keys must
// be watched resource names (watched maps each name to its indexBy) and
// fixture objects must have a metadata.name and be indexable; assertions
// must have a known type, the fields that type needs (pattern, expected,
// patterns, jsonpath), valid regular expressions and JSONPath, an integer
// expected count, and a known target form. Every test but _global needs an
// assertion; _global may have none, since it is never run. Errors are under
// spec.validationTests[<name>].
func Validate(tests map[string]Test, watched map[string][]string) field.ErrorList {
	return ValidateDialect(tests, watched, DialectGatehouse)
}

// ValidateDialect is Validate under dialect's rules: haptic's _global may
// carry assertions (it is run as a test) or none, and any target is
// accepted (one haptic does not know reads haproxy.cfg; crt-list: is
// haptic's).
func ValidateDialect(tests map[string]Test, watched map[string][]string, dialect Dialect) field.ErrorList {
	var errs field.ErrorList
	known := slices.Sorted(maps.Keys(watched))
	root := field.NewPath("spec", "validationTests")
	for _, name := range slices.Sorted(maps.Keys(tests)) {
		test := tests[name]
		path := root.Key(name)
		errs = append(errs, validateFixtures(test.Fixtures, watched, known, path.Child("fixtures"))...)
		if name == GlobalTest && dialect == DialectHaptic {
			for i, assertion := range test.Assertions {
				errs = append(errs, validateAssertion(assertion, dialect, path.Child("assertions").Index(i))...)
			}
			continue
		}
		if name == GlobalTest {
			if len(test.Assertions) > 0 {
				errs = append(errs, field.Forbidden(path.Child("assertions"),
					GlobalTest+" is never run as a test, it only contributes fixtures to every test; put its assertions in a test"))
			}
			continue
		}
		if len(test.Assertions) == 0 {
			errs = append(errs, field.Required(path.Child("assertions"), "a test needs at least one assertion"))
		}
		for i, assertion := range test.Assertions {
			errs = append(errs, validateAssertion(assertion, dialect, path.Child("assertions").Index(i))...)
		}
	}
	return errs
}

func validateFixtures(fixtures map[string][]map[string]any, watched map[string][]string, known []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, resource := range slices.Sorted(maps.Keys(fixtures)) {
		resourcePath := path.Key(resource)
		indexBy, ok := watched[resource]
		if !ok {
			errs = append(errs, field.NotSupported(resourcePath, resource, known))
			continue
		}
		// An invalid indexBy is reported where it is configured; here it
		// only means the objects cannot be checked against it.
		indexer, indexErr := render.NewIndexer(indexBy)
		for i, obj := range fixtures[resource] {
			objPath := resourcePath.Index(i)
			if name, _, _ := nameOf(obj); name == "" {
				errs = append(errs, field.Required(objPath.Child("metadata", "name"), "a fixture object needs a name"))
				continue
			}
			if indexErr == nil {
				if _, err := indexer.IndexKeys(render.NormalizeObject(obj)); err != nil {
					errs = append(errs, field.Invalid(objPath, identityString(obj), err.Error()))
				}
			}
		}
	}
	return errs
}

func validateAssertion(a Assertion, dialect Dialect, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	requirePattern := func() {
		if a.Pattern == "" {
			errs = append(errs, field.Required(path.Child("pattern"), "a "+a.Type+" assertion needs a pattern"))
		} else if _, err := regexp.Compile(a.Pattern); err != nil {
			errs = append(errs, field.Invalid(path.Child("pattern"), a.Pattern, err.Error()))
		}
	}
	requireExpected := func() bool {
		if a.Expected == "" {
			errs = append(errs, field.Required(path.Child("expected"), "a "+a.Type+" assertion needs expected"))
			return false
		}
		return true
	}

	switch a.Type {
	case "":
		return field.ErrorList{field.Required(path.Child("type"), "")}
	case TypeContains, TypeNotContains:
		requirePattern()
	case TypeEquals:
		requireExpected()
	case TypeMatchCount:
		requirePattern()
		if requireExpected() {
			if _, err := parseCount(a.Expected); err != nil {
				errs = append(errs, field.Invalid(path.Child("expected"), a.Expected, "must be a non-negative integer, the number of matches"))
			}
		}
	case TypeMatchOrder:
		if len(a.Patterns) == 0 {
			errs = append(errs, field.Required(path.Child("patterns"), "a match_order assertion needs patterns"))
		}
		for i, pattern := range a.Patterns {
			patternPath := path.Child("patterns").Index(i)
			if pattern == "" {
				errs = append(errs, field.Required(patternPath, "an empty pattern matches anywhere"))
			} else if _, err := regexp.Compile(pattern); err != nil {
				errs = append(errs, field.Invalid(patternPath, pattern, err.Error()))
			}
		}
	case TypeJSONPath:
		if a.JSONPath == "" {
			errs = append(errs, field.Required(path.Child("jsonpath"), "a jsonpath assertion needs jsonpath"))
		} else if _, err := parseJSONPath(a.JSONPath); err != nil {
			errs = append(errs, field.Invalid(path.Child("jsonpath"), a.JSONPath, err.Error()))
		}
		requireExpected()
	case TypeHAProxyValid, TypeDeterministic:
	default:
		return field.ErrorList{field.NotSupported(path.Child("type"), a.Type, assertionTypes)}
	}

	if dialect == DialectHaptic {
		return errs
	}
	t, err := parseTarget(a.Target)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(path.Child("target"), a.Target, err.Error()))
	case !usesTarget(a.Type) && t.kind != targetHAProxyConfig:
		errs = append(errs, field.Invalid(path.Child("target"), a.Target,
			"a "+a.Type+" assertion has no target (it checks the whole rendering or the template context)"))
	}
	return errs
}

// usesTarget reports whether assertions of type look at a target's text.
func usesTarget(assertionType string) bool {
	switch assertionType {
	case TypeContains, TypeNotContains, TypeEquals, TypeMatchCount, TypeMatchOrder:
		return true
	}
	return false
}

// parseCount parses match_count's expected.
func parseCount(expected string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(expected))
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("negative count %d", n)
	}
	return n, nil
}

type targetKind int

const (
	targetHAProxyConfig targetKind = iota
	targetRenderingError
	targetMap
	targetFile
	targetCert
)

// target is a parsed Assertion.Target.
type target struct {
	kind targetKind
	// name is a map's, file's or certificate's name.
	name string
}

func parseTarget(s string) (target, error) {
	switch s {
	case "", TargetHAProxyConfig:
		return target{kind: targetHAProxyConfig}, nil
	case TargetRenderingError:
		return target{kind: targetRenderingError}, nil
	}
	for _, prefixed := range []struct {
		prefix string
		kind   targetKind
	}{{TargetMapPrefix, targetMap}, {TargetFilePrefix, targetFile}, {TargetCertPrefix, targetCert}} {
		if name, ok := strings.CutPrefix(s, prefixed.prefix); ok {
			if name == "" {
				return target{}, fmt.Errorf("%q names no %s", s, strings.TrimSuffix(prefixed.prefix, ":"))
			}
			return target{kind: prefixed.kind, name: name}, nil
		}
	}
	return target{}, fmt.Errorf("unknown target, want %s", targetForms)
}

// String is the target as errors name it: haproxy.cfg, map:<name>, ...
func (t target) String() string {
	switch t.kind {
	case targetRenderingError:
		return TargetRenderingError
	case targetMap:
		return TargetMapPrefix + t.name
	case targetFile:
		return TargetFilePrefix + t.name
	case targetCert:
		return TargetCertPrefix + t.name
	default:
		return TargetHAProxyConfig
	}
}

// nameOf returns obj's metadata.name and metadata.namespace, and whether
// obj has a metadata map at all.
func nameOf(obj map[string]any) (name, namespace string, ok bool) {
	metadata, ok := obj["metadata"].(map[string]any)
	if !ok {
		return "", "", false
	}
	name, _ = metadata["name"].(string)
	namespace, _ = metadata["namespace"].(string)
	return name, namespace, true
}

// identityString is obj's namespace/name, or its name when cluster-scoped.
func identityString(obj map[string]any) string {
	name, namespace, _ := nameOf(obj)
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
