package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/modules"
	"github.com/gatehouse-dev/gatehouse/internal/testenv"
)

func TestCommittedWebhookManifestsMatchTheModules(t *testing.T) {
	files, err := testenv.WebhookManifests(context.Background(), controlPlane, modules.Catalogue())
	if err != nil {
		t.Fatal(err)
	}
	root, _ := testenv.RepoRoot()
	for name, got := range files {
		want, err := os.ReadFile(filepath.Join(root, "config", name))
		if err != nil {
			t.Fatalf("config/%s: %v (run `make generate`)", name, err)
		}
		if string(got) != string(want) {
			t.Errorf("config/%s is stale: run `make generate`\n--- rendered now:\n%s", name, got)
		}
	}
}
