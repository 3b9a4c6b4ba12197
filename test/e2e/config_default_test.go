package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// kustomize builds a kustomization of config/ with the pinned kubectl's
// kustomize, as `kubectl apply -k` does.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "bin/kubectl"), "kustomize", dir)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v: %s", dir, err, stderr.String())
	}
	return decodeObjects(t, out)
}

// chartDefaultModules are the modules values.yaml turns on.
func chartDefaultModules(t *testing.T) []string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "charts/gatehouse/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Modules map[string]struct {
			Enabled bool `json:"enabled"`
		} `json:"modules"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	var on []string
	for name, m := range values.Modules {
		if m.Enabled {
			on = append(on, name)
		}
	}
	slices.Sort(on)
	return on
}

// TestConfigDefaultIsTheChartsDefault: `kubectl apply -k config/default`
// installs what the chart installs by default: the same modules, no CRD
// (pvsafe needs none, and nodegroups.deckhouse.io is Deckhouse's), and the
// RBAC of the core and of those modules only, every object accepted by the
// API server. config/crd marks its CRDs never to be pruned, as the chart
// does.
func TestConfigDefaultIsTheChartsDefault(t *testing.T) {
	objs := kustomize(t, "config/default")
	want := chartDefaultModules(t)
	if len(want) == 0 {
		t.Fatal("values.yaml turns no module on")
	}
	deployment := findObject[appsv1.Deployment](t, objs, "Deployment")
	var modules []string
	for _, arg := range deployment.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(arg, "--modules="); ok {
			modules = strings.Split(v, ",")
		}
	}
	slices.Sort(modules)
	if !slices.Equal(modules, want) {
		t.Errorf("config/default runs modules %v, the chart's defaults are %v", modules, want)
	}
	sources := append([]string{"core"}, want...)
	var roles []string
	for _, obj := range objs {
		switch obj.GetKind() {
		case "CustomResourceDefinition":
			t.Errorf("config/default installs CRD %s; the chart's defaults install none", obj.GetName())
		case "ClusterRole", "Role":
			roles = append(roles, obj.GetName())
			source := strings.TrimPrefix(obj.GetName(), "gatehouse-")
			if !slices.Contains(sources, source) && obj.GetName() != pvsafe.BypassClusterRole {
				t.Errorf("config/default installs %s %s, of a module it does not run", obj.GetKind(), obj.GetName())
			}
		}
	}
	for _, s := range sources {
		if !slices.Contains(roles, "gatehouse-"+s) {
			t.Errorf("config/default has no role of %s (it has %v)", s, roles)
		}
	}
	// The Namespace config/default creates is created first, as kubectl
	// apply -k does before what it holds (a dry run creates nothing).
	fixedNamespace(t, "gatehouse-system")
	dryRunApply(t, objs)

	for _, obj := range kustomize(t, "config/crd") {
		a := obj.GetAnnotations()
		if a["argocd.argoproj.io/sync-options"] != "Prune=false,Delete=false" || a["kustomize.toolkit.fluxcd.io/prune"] != "disabled" {
			t.Errorf("config/crd's %s %s may be pruned: %v", obj.GetKind(), obj.GetName(), a)
		}
	}
}
