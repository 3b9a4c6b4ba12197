package manifests_test

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/manifests"
)

// TestCommittedWebhookManifestsMatchTheModules renders what `make generate`
// (hack/manifests) writes, with no API server, — config/ and the chart's generated inputs — and
// compares it with the committed files; the chart's generated directory must
// hold nothing else.
func TestCommittedWebhookManifestsMatchTheModules(t *testing.T) {
	root := "../.."
	files, err := manifests.Render(root, catalogue.All())
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range files {
		want, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatalf("%s: %v (run `make generate`)", name, err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run `make generate`\n--- rendered now:\n%s", name, got)
		}
	}
	dir := filepath.Join(root, manifests.ChartGeneratedDir)
	n := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if _, ok := files[filepath.ToSlash(rel)]; !ok {
			t.Errorf("%s is not generated any more: run `make generate`", rel)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("%s is empty: run `make generate`", manifests.ChartGeneratedDir)
	}
}

var rbacMarker = regexp.MustCompile(`(?m)^\s*//\s*\+kubebuilder:rbac:`)

// TestRBACMarkersBelongToOneSource: the Makefile runs controller-gen once per
// source (the core, each module) on that source's directory, so a marker
// anywhere else would be silently dropped, and a module without a source
// would get no rules.
func TestRBACMarkersBelongToOneSource(t *testing.T) {
	root := "../.."
	sources, err := manifests.RBACSources(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{manifests.CoreRBAC}
	for _, m := range catalogue.All() {
		want = append(want, m.Name())
	}
	slices.Sort(want)
	if !slices.Equal(sources, want) {
		t.Errorf("config/rbac has roles of %v, want the core's and every module's %v: add it to RBAC_SOURCES in the Makefile", sources, want)
	}
	dirs := map[string]bool{}
	for _, s := range sources {
		dirs[manifests.RBACMarkerDir(s)] = true
	}
	err = filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !rbacMarker.Match(data) {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for dir := range dirs {
			if strings.HasPrefix(filepath.ToSlash(rel), dir+"/") {
				return nil
			}
		}
		t.Errorf("%s holds RBAC markers outside the core's and the modules' directories %v: make generate ignores them", rel, slices.Sorted(maps.Keys(dirs)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
