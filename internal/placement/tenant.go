package placement

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// The tenant's placement settings live in Secret cozystack-values, key
// values.yaml, in the application's namespace. The tenant chart writes the
// child's merged values there (inheritance from a parent tenant is its job),
// so Gatehouse reads one Secret per namespace and nothing else.
const (
	tenantSecretName = "cozystack-values"
	tenantValuesKey  = "values.yaml"
)

// tenant is what a namespace's cozystack-values say about placement. A nil
// *tenant is a namespace that is no tenant's: any existing class may be used.
type tenant struct {
	Default string
	// Allowed is nil when the tenant sets no allow-list (any class allowed),
	// and non-nil (possibly empty: none allowed) when it sets one.
	Allowed []string
	// Err is a values.yaml that cannot be read: requests are refused with it
	// rather than judged by a guess.
	Err error
}

type tenantValues struct {
	Namespace *struct {
		DefaultAffinityClass   string    `json:"defaultAffinityClass"`
		AllowedAffinityClasses *[]string `json:"allowedAffinityClasses"`
	} `json:"_namespace"`
}

// parseTenant reads values.yaml. A Secret without the key, or values
// without either setting, is no tenant.
func parseTenant(namespace string, data []byte) *tenant {
	if len(data) == 0 {
		return nil
	}
	var v tenantValues
	if err := yaml.Unmarshal(data, &v); err != nil {
		return &tenant{Err: fmt.Errorf("Secret %s/%s key %s cannot be read: %w", namespace, tenantSecretName, tenantValuesKey, err)}
	}
	if v.Namespace == nil || (v.Namespace.DefaultAffinityClass == "" && v.Namespace.AllowedAffinityClasses == nil) {
		return nil
	}
	t := &tenant{Default: v.Namespace.DefaultAffinityClass}
	if v.Namespace.AllowedAffinityClasses != nil {
		t.Allowed = append([]string{}, *v.Namespace.AllowedAffinityClasses...)
		sort.Strings(t.Allowed)
	}
	return t
}

// allows says whether the tenant may use class.
func (t *tenant) allows(class string) bool {
	return t == nil || t.Allowed == nil || slices.Contains(t.Allowed, class)
}

func (t *tenant) allowedText() string {
	if len(t.Allowed) == 0 {
		return "none"
	}
	return strings.Join(t.Allowed, ", ")
}
