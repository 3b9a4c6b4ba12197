package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// TestPVSafeExampleShowsTheRefusalKubectlPrints walks examples/pvsafe as
// its README does, through kube-apiserver: volume.yaml applied and bound,
// the claim's deletion refused with exactly the message the README quotes
// (kubectl prints the API server's error after "Error from server
// (Forbidden): "), the namespace's refused too, then the third way out the
// message offers (the label, as the README's user, who holds the bypass
// permission) lets the claim go. A change to the message that leaves the
// README behind fails here.
func TestPVSafeExampleShowsTheRefusalKubectlPrints(t *testing.T) {
	startPVSafe(t, module.Enforce)
	ctx := context.Background()
	c := controlPlane.Client
	root, _ := testenv.RepoRoot()
	quoted := readmeRefusal(t, filepath.Join(root, "examples/pvsafe/README.md"))

	applyExample(t, filepath.Join(root, "examples/pvsafe/volume.yaml"))
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pvsafe-demo"}}
	t.Cleanup(func() { _ = c.Delete(context.Background(), namespace) })
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "pvsafe-demo", Name: "data"}}
	volume := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvsafe-demo-data"}}
	t.Cleanup(func() { _ = c.Delete(context.Background(), volume) })
	settle(t, "the example's claim bound", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		if claim.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim %q", claim.Status.Phase)
		}
		return nil
	})

	err := c.Delete(ctx, claim.DeepCopy())
	if err == nil {
		t.Fatal("the example's claim was deleted")
	}
	// kubectl ends the message's own trailing newline with its own. The
	// snapshot's class is the cluster's retaining VolumeSnapshotClass when
	// there is one (another test of this control plane may have made
	// one), the README's placeholder otherwise: that value alone may
	// differ.
	got := "Error from server (Forbidden): " + strings.TrimRight(err.Error(), "\n")
	if snapshotClass.ReplaceAllString(got, "") != snapshotClass.ReplaceAllString(quoted, "") {
		t.Fatalf("the refusal differs from what examples/pvsafe/README.md quotes.\ngot:\n%s\n\nREADME:\n%s", got, quoted)
	}
	mustDeny(t, c.Delete(ctx, namespace.DeepCopy(), client.DryRunAll),
		"Namespace 'pvsafe-demo' would lose data permanently", "  - data: volume pvsafe-demo-data has reclaimPolicy Delete and no VolumeSnapshot",
		"kubectl label namespace pvsafe-demo pv-safe.io/force-delete=true")

	labelForDeletion(t, c, claim)
	if err := c.Delete(ctx, claim.DeepCopy()); err != nil {
		t.Fatalf("the README's third way out (label, then delete): %v", err)
	}
}

// snapshotClass is the class the refusal's snapshot suggestion names.
var snapshotClass = regexp.MustCompile(`"volumeSnapshotClassName":"[^"]*"`)

// readmeRefusal is the first quoted block of the README that starts with
// kubectl's "Error from server (Forbidden): admission webhook", whole, up
// to the fence that closes it.
func readmeRefusal(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case block == nil && strings.HasPrefix(line, "Error from server (Forbidden): admission webhook"):
			block = []string{line}
		case block != nil && line == "```":
			return strings.Join(block, "\n")
		case block != nil:
			block = append(block, line)
		}
	}
	t.Fatalf("%s quotes no refusal in a block of its own", path)
	return ""
}

// applyExample creates every object of a multi-document YAML file.
func applyExample(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := controlPlane.Client.Create(context.Background(), obj); err != nil {
			t.Fatalf("%s: create %s %s: %v", path, obj.GetKind(), obj.GetName(), err)
		}
	}
}
