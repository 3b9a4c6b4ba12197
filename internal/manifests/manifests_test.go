package manifests_test

import (
	"io/fs"
	"os"
	"path/filepath"
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
