//go:build release

// make release run twice, as make test-release (make test-ci) runs it:
// the whole build, not a fake of it. make test leaves this file out.

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReleaseIsReproducible builds the release twice from this checkout
// (every binary linked again, the image assembled again, the chart
// packaged again by helm at another time) and finds every file the same
// but the signature, which cosign's ECDSA makes anew each time.
// RELEASE_TEST_DIST keeps the first build there (make test-ci installs it
// from a registry next).
func TestReleaseIsReproducible(t *testing.T) {
	first := os.Getenv("RELEASE_TEST_DIST")
	if first == "" {
		first = filepath.Join(t.TempDir(), "first")
	}
	second := filepath.Join(t.TempDir(), "second")
	for _, dist := range []string{first, second} {
		cmd := exec.Command("make", "--no-print-directory", "release", "DIST="+dist)
		cmd.Dir = filepath.Join("..", "..")
		// Not the calling make's jobserver or variables.
		cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
		out, err := cmd.CombinedOutput()
		t.Logf("make release DIST=%s:\n%s", dist, out)
		if err != nil {
			t.Fatalf("make release: %v", err)
		}
	}
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, e := range entries {
			ns = append(ns, e.Name())
		}
		return ns
	}
	a, b := names(first), names(second)
	if !slices.Equal(a, b) {
		t.Fatalf("the two releases hold different files:\n%v\n%v", a, b)
	}
	// make release's default VERSION is the chart's appVersion.
	chart, err := os.ReadFile(filepath.Join("..", "..", "charts", "gatehouse", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &meta); err != nil {
		t.Fatal(err)
	}
	n, err := namesOf("v" + meta.AppVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{n.Checksums(), n.Signature(), n.PublicKey(), n.Archive("linux/arm64"), n.Archive("linux/amd64"), n.Chart(), n.ImageIndex(), n.Provenance()} {
		if !slices.Contains(a, want) {
			t.Errorf("the release lacks %s: %v", want, a)
		}
	}
	for _, n := range a {
		if n == "checksums.txt.sig" {
			continue
		}
		x, err := os.ReadFile(filepath.Join(first, n))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(second, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of one commit", n)
		}
	}
}
