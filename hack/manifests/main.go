// Command manifests writes the generated parts of config/ and the Helm
// chart's generated inputs (see internal/manifests) from the built-in
// modules' static declarations. It runs from the repository root, without
// an API server.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/manifests"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

func run() error {
	root := "."
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("run from the repository root: %w", err)
	}
	files, err := manifests.Render(root, catalogue.All())
	if err != nil {
		return err
	}
	// The chart's generated directory is rewritten whole, so that a webhook a
	// module no longer declares leaves no file behind.
	if err := os.RemoveAll(filepath.Join(root, manifests.ChartGeneratedDir)); err != nil {
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
