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
	got, err := testenv.WebhookManifests(context.Background(), controlPlane, modules.Catalogue())
	if err != nil {
		t.Fatal(err)
	}
	root, _ := testenv.RepoRoot()
	want, err := os.ReadFile(filepath.Join(root, "config/webhook/manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("config/webhook/manifests.yaml is stale: run `make generate`\n--- rendered now:\n%s", got)
	}
}
