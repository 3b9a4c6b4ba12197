// Command manifests writes the generated parts of config/ (the webhook
// configurations and the CRD conversion patches) and the Helm chart's
// generated inputs under charts/gatehouse/files/generated (each module's
// webhook entries and conversion stanzas, the CRDs, the RBAC rules), rendered
// from the built-in modules' declarations and controller-gen's output.
//
// controller-gen's webhook markers cannot express a namespaceSelector, and the
// generic /validate rules are known only once modules resolve them through
// discovery, so these manifests come from the declarations the server itself
// serves. A test in test/e2e fails when the committed files are stale.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gatehouse-dev/gatehouse/internal/modules"
	"github.com/gatehouse-dev/gatehouse/internal/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{})
	if err != nil {
		return err
	}
	defer cp.Stop()
	files, err := testenv.WebhookManifests(context.Background(), cp, modules.Catalogue())
	if err != nil {
		return err
	}
	// The chart's generated directory is rewritten whole, so that a webhook a
	// module no longer declares leaves no file behind.
	if err := os.RemoveAll(filepath.Join(root, testenv.ChartGeneratedDir)); err != nil {
		return err
	}
	for name, data := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
