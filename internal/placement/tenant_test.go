package placement

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseTenant(t *testing.T) {
	for _, tc := range []struct {
		name    string
		values  string
		want    *tenant
		wantErr string
	}{
		{"no values", "", nil, ""},
		{"no _namespace", "host: example.org\n", nil, ""},
		{"_namespace without the keys", "_namespace:\n  host: a\n", nil, ""},
		{"default only: any class allowed", "_namespace:\n  defaultAffinityClass: dc1\n", &tenant{Default: "dc1"}, ""},
		{"allow-list sorted", "_namespace:\n  allowedAffinityClasses: [gpu, dc1]\n", &tenant{Allowed: []string{"dc1", "gpu"}}, ""},
		{"empty allow-list: none allowed", "_namespace:\n  allowedAffinityClasses: []\n", &tenant{Allowed: []string{}}, ""},
		{"broken YAML", "_namespace: [\n", nil, "Secret ns/cozystack-values key values.yaml cannot be read"},
		{"wrong type", "_namespace:\n  allowedAffinityClasses: dc1\n", nil, "cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseTenant("ns", []byte(tc.values))
			if tc.wantErr != "" {
				if got == nil || got.Err == nil || !strings.Contains(got.Err.Error(), tc.wantErr) {
					t.Fatalf("got %+v, want an error containing %q", got, tc.wantErr)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTenantAllows(t *testing.T) {
	var none *tenant
	if !none.allows("x") || !(&tenant{Default: "a"}).allows("x") {
		t.Fatal("a namespace without an allow-list must allow any class")
	}
	listed := &tenant{Allowed: []string{"dc1"}}
	if !listed.allows("dc1") || listed.allows("gpu") || (&tenant{Allowed: []string{}}).allows("dc1") {
		t.Fatal("the allow-list is not applied")
	}
}

func TestResolveClass(t *testing.T) {
	tenantDefault := &tenant{Default: "dc1"}
	for _, tc := range []struct {
		name   string
		values map[string]any
		t      *tenant
		want   releaseClass
		err    bool
	}{
		{"the release's own", map[string]any{"affinityClass": "gpu"}, tenantDefault, releaseClass{"gpu", "spec.values.affinityClass"}, false},
		{"the tenant's default", map[string]any{}, tenantDefault, releaseClass{"dc1", "the tenant's defaultAffinityClass"}, false},
		{"empty string falls back", map[string]any{"affinityClass": ""}, tenantDefault, releaseClass{"dc1", "the tenant's defaultAffinityClass"}, false},
		{"none", nil, nil, releaseClass{}, false},
		{"not a string", map[string]any{"affinityClass": 3}, nil, releaseClass{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveClass(tc.values, tc.t)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestClassInUseMessageIsBounded(t *testing.T) {
	var users []releaseKey
	for i := 0; i < 500; i++ {
		users = append(users, releaseKey{"tenant", "app-" + strings.Repeat("x", 40)})
	}
	msg := classInUseMessage("dc1", "deleted", users)
	if len(msg) > 4096 || !strings.Contains(msg, "... and 490 more") || !strings.Contains(msg, "kubectl get helmreleases.helm.toolkit.fluxcd.io -A -l apps.cozystack.io/affinity-class=dc1") {
		t.Fatalf("message of %d bytes:\n%s", len(msg), msg)
	}
}
