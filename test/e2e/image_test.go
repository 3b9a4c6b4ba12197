package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// TestChartPullsTheImageMakeImageTags: the image the chart's Deployment
// names by default is the reference `make image` writes into
// bin/gatehouse-image.tar (the Makefile's IMAGE), so an installed chart
// finds the imported image. Both are derived from the chart (values.yaml's
// image.repository, Chart.yaml's appVersion): a change to either side's
// derivation shows here.
func TestChartPullsTheImageMakeImageTags(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "print-image")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make print-image: %v", err)
	}
	tagged := strings.TrimSpace(string(out))

	var images []string
	for _, obj := range renderChart(t, "gatehouse-system") {
		if obj.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if m, ok := c.(map[string]any); ok {
				image, _ := m["image"].(string)
				images = append(images, image)
			}
		}
	}
	if len(images) != 1 || images[0] != tagged {
		t.Fatalf("the chart's Deployment pulls %q; make image tags %q", images, tagged)
	}
}
