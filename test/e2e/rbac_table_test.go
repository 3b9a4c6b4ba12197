package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// rbacRow is one row of docs/security.md's RBAC table.
type rbacRow struct {
	line                            int
	source, scope                   string
	groups, resources, names, verbs []string
}

// rbacTable parses the table under docs/security.md's "## RBAC": the first
// Markdown table of that section, one rule per row.
func rbacTable(t *testing.T) []rbacRow {
	t.Helper()
	root, _ := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "docs/security.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []rbacRow
	inSection, inTable := false, false
	list := func(cell string) []string {
		var out []string
		for _, f := range strings.Split(cell, ",") {
			out = append(out, strings.Trim(strings.TrimSpace(f), "`"))
		}
		slices.Sort(out)
		return out
	}
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			inSection = line == "## RBAC"
			continue
		case !inSection:
			continue
		case !strings.HasPrefix(line, "|"):
			if inTable {
				inSection = false // the first table only
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 7 {
			t.Fatalf("docs/security.md:%d: want 7 cells (source, scope, API group, resources, names, verbs, why), got %d", i+1, len(cells))
		}
		if !inTable { // the header, then the separator
			inTable = true
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		row := rbacRow{line: i + 1, source: strings.TrimSpace(cells[0]), scope: strings.TrimSpace(cells[1]),
			groups: list(cells[2]), resources: list(cells[3]), verbs: list(cells[5])}
		for j, g := range row.groups {
			if g == "core" {
				row.groups[j] = "" // the legacy API group
			}
		}
		if names := strings.TrimSpace(cells[4]); names != "-" {
			row.names = list(names)
		}
		if strings.TrimSpace(cells[6]) == "" {
			t.Errorf("docs/security.md:%d: say why the rule is needed", i+1)
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal(`docs/security.md: no table under "## RBAC"`)
	}
	return rows
}

// chartVariant is a set of option values rendered with every module combination.
type chartVariant struct {
	name string
	set  []string
	// certSecret is the serving certificate Secret's name; publish the
	// namespaces configcheck may publish in; owner and watched the kinds
	// placement's and configcheck's values add ("group/resource").
	certSecret     string
	publish        []string
	owner, watched []string
	onDemand       []string
}

var chartVariants = []chartVariant{
	{name: "defaults (selfManaged, managed, leader election)", certSecret: helmRelease + "-gatehouse-serving-cert"},
	{name: "certManager, static (no leader election)", set: []string{"certificates.mode=certManager", "webhooks.mode=static"},
		certSecret: helmRelease + "-gatehouse-serving-cert"},
	{name: "certManager, managed", set: []string{"certificates.mode=certManager"}, certSecret: helmRelease + "-gatehouse-serving-cert"},
	{name: "secret, static", set: []string{"certificates.mode=secret", "certificates.secret.name=my-tls", "webhooks.mode=static", "certificates.secret.caBundle=Cg=="},
		certSecret: "my-tls"},
	{name: "secret, managed, publishing, extra kinds and protected metrics", certSecret: "my-tls",
		set: []string{"certificates.mode=secret", "certificates.secret.name=my-tls", "metrics.secure=true",
			"modules.configcheck.publishNamespaces={lb-a,lb-b}",
			"modules.placement.ownerResources[0].apiGroup=kubevirt.io", "modules.placement.ownerResources[0].resources={virtualmachineinstances}",
			"modules.configcheck.watchedResources[0].apiGroup=", "modules.configcheck.watchedResources[0].resources={configmaps}",
			"modules.configcheck.onDemandResources[0].apiGroup=", "modules.configcheck.onDemandResources[0].resources={secrets}"},
		publish: []string{"lb-a", "lb-b"}, owner: []string{"kubevirt.io/virtualmachineinstances"}, watched: []string{"/configmaps"}, onDemand: []string{"/secrets"}},
}

var chartModules = []string{"configcheck", "nodegroup", "placement", "pvsafe"}

// moduleCombinations are the 15 non-empty subsets of chartModules, as --set values.
func moduleCombinations() [][]string {
	var out [][]string
	for mask := 1; mask < 1<<len(chartModules); mask++ {
		var on []string
		for i, m := range chartModules {
			if mask&(1<<i) != 0 {
				on = append(on, m)
			}
		}
		out = append(out, on)
	}
	return out
}

func moduleValues(on []string) []string {
	var set []string
	for _, m := range chartModules {
		set = append(set, fmt.Sprintf("modules.%s.enabled=%t", m, slices.Contains(on, m)))
	}
	return set
}

// ruleAtom is one (resource, verb) a rendered rule grants, with where and
// for whom.
type ruleAtom struct {
	source, scope, group, resource, verb string
	names                                []string
}

func (a ruleAtom) String() string {
	names := "-"
	if len(a.names) > 0 {
		names = strings.Join(a.names, ", ")
	}
	group := a.group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", a.source, a.scope, group, a.resource, names, a.verb)
}

// renderedAtoms renders the chart with set in namespace ns and returns what
// its roles grant. Every role must be labelled with its source, which must
// be the core or an enabled module, and be bound to the release's
// ServiceAccount only; roles for users to bind (labelled
// gatehouse.dev/granted-to: users) are bound to no one.
func renderedAtoms(t *testing.T, ns string, on []string, v chartVariant) []ruleAtom {
	t.Helper()
	objs := renderChart(t, ns, append(moduleValues(on), v.set...)...)
	sa := helmRelease + "-gatehouse"
	var atoms []ruleAtom
	userRoles := map[string]bool{}
	add := func(kind, name, namespace string, labels map[string]string, rules []rbacv1.PolicyRule) {
		source := labels["gatehouse.dev/rbac-for"]
		if source != "core" && source != "uninstall" && source != "test" && !slices.Contains(on, source) {
			t.Errorf("%s %s/%s: gatehouse.dev/rbac-for %q is neither the core nor an enabled module %v", kind, namespace, name, source, on)
		}
		if labels["gatehouse.dev/granted-to"] == "users" {
			// A role for administrators to bind to people (pvsafe's
			// bypass): not Gatehouse's, so never bound by the chart.
			userRoles[kind+"/"+name] = true
			return
		}
		scope := "cluster"
		switch {
		case kind == "ClusterRole":
		case strings.HasSuffix(name, "-configcheck-publish"):
			scope = "publish namespaces"
			if !slices.Contains(v.publish, namespace) {
				t.Errorf("Role %s in namespace %s, which modules.configcheck.publishNamespaces does not list", name, namespace)
			}
		case namespace == ns:
			scope = "own namespace"
		default:
			scope = namespace
		}
		for _, r := range rules {
			names := slices.Clone(r.ResourceNames)
			for i, n := range names {
				if n == v.certSecret {
					names[i] = "<cert-secret>"
					continue
				}
				// The install's names (--instance-name is the fullname).
				if rest, ok := strings.CutPrefix(n, sa+"-"); ok {
					names[i] = "<fullname>-" + rest
				} else if n == sa {
					names[i] = "<fullname>"
				}
			}
			slices.Sort(names)
			if len(r.NonResourceURLs) > 0 {
				t.Errorf("%s %s: non-resource URLs %v", kind, name, r.NonResourceURLs)
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, verb := range r.Verbs {
						atoms = append(atoms, ruleAtom{source: source, scope: scope, group: g, resource: res, verb: verb, names: names})
					}
				}
			}
		}
	}
	for _, r := range findObjects[rbacv1.ClusterRole](t, objs, "ClusterRole") {
		add("ClusterRole", r.Name, "", r.Labels, r.Rules)
	}
	for _, r := range findObjects[rbacv1.Role](t, objs, "Role") {
		add("Role", r.Name, r.Namespace, r.Labels, r.Rules)
	}
	bound := func(kind, name string, role rbacv1.RoleRef, subjects []rbacv1.Subject) {
		if userRoles[role.Kind+"/"+role.Name] {
			t.Errorf("%s %s binds %s %s, a role for users", kind, name, role.Kind, role.Name)
		}
		want := sa
		if strings.HasSuffix(role.Name, "-uninstall") {
			want = sa + "-uninstall" // the pre-delete hook's own
		}
		if strings.HasSuffix(role.Name, "-selftest") {
			want = sa + "-selftest" // the helm test's own
		}
		if len(subjects) != 1 || subjects[0].Kind != rbacv1.ServiceAccountKind || subjects[0].Name != want || subjects[0].Namespace != ns {
			t.Errorf("%s %s binds %+v, want only ServiceAccount %s/%s", kind, name, subjects, ns, want)
		}
	}
	for _, b := range findObjects[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding") {
		bound("ClusterRoleBinding", b.Name, b.RoleRef, b.Subjects)
	}
	for _, b := range findObjects[rbacv1.RoleBinding](t, objs, "RoleBinding") {
		bound("RoleBinding", b.Namespace+"/"+b.Name, b.RoleRef, b.Subjects)
	}
	return atoms
}

// matches says whether row lists atom; the placeholders for the kinds the
// values add stand for exactly those.
func (row rbacRow) matches(a ruleAtom, v chartVariant) bool {
	if row.source != a.source || row.scope != a.scope || !slices.Contains(row.verbs, a.verb) || !slices.Equal(row.names, a.names) {
		return false
	}
	kind := a.group + "/" + a.resource
	switch {
	case slices.Equal(row.resources, []string{"<ownerResources>"}):
		return slices.Contains(v.owner, kind)
	case slices.Equal(row.resources, []string{"<watchedResources>"}):
		return slices.Contains(v.watched, kind)
	case slices.Equal(row.resources, []string{"<onDemandResources>"}):
		return slices.Contains(v.onDemand, kind)
	}
	return slices.Contains(row.groups, a.group) && slices.Contains(row.resources, a.resource)
}

// TestChartRBACIsInTheTable renders the chart for every non-empty
// combination of modules with each variant of the options that change RBAC,
// and fails on any rule docs/security.md's RBAC table does not list (for
// that source, scope, group, resource, names and verb), and on a row that
// no rendering uses.
func TestChartRBACIsInTheTable(t *testing.T) {
	rows := rbacTable(t)
	used := make([]bool, len(rows))
	const ns = "gatehouse-rbac"
	for _, v := range chartVariants {
		for _, on := range moduleCombinations() {
			missing := map[string]bool{}
			for _, a := range renderedAtoms(t, ns, on, v) {
				found := false
				for i, row := range rows {
					if row.matches(a, v) {
						used[i], found = true, true
					}
				}
				if !found {
					missing[a.String()] = true
				}
			}
			if len(missing) > 0 {
				var lines []string
				for l := range missing {
					lines = append(lines, l)
				}
				slices.Sort(lines)
				t.Errorf("modules %v, %s: rules docs/security.md's RBAC table does not list (source | scope | group | resource | names | verb):\n%s",
					on, v.name, strings.Join(lines, "\n"))
			}
		}
	}
	for i, row := range rows {
		if !used[i] {
			t.Errorf("docs/security.md:%d: no rendering of the chart grants this row's rule (%s %s %v %v %v): remove or correct it",
				row.line, row.source, row.scope, row.groups, row.resources, row.verbs)
		}
	}
}
