package certs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

// The CA file is followed: a rewrite reaches CABundle and its callbacks,
// whether renamed over the file (a mounted volume) or written in place,
// while a broken or empty rewrite keeps the last good bundle, and a file
// with no CA refuses to start.
func TestCAFileFollowsTheFileAndKeepsTheLastGoodBundle(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ca.pem")
	first, err := SelfSigned([]string{"localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	next, err := SelfSigned([]string{"localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCAFile(path, testr.New(t)); err == nil {
		t.Fatal("started without the file")
	}
	if err := os.WriteFile(path, first.ServingCert, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCAFile(path, testr.New(t)); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Fatalf("started with a serving certificate for a CA: %v", err)
	}
	if err := os.WriteFile(path, first.CACert, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := NewCAFile(path, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.CABundle(), first.CACert) {
		t.Fatal("the bundle is not the file's")
	}
	changed := make(chan struct{}, 16)
	f.OnCABundleChange(func() { changed <- struct{}{} })
	// Events only: a poll far beyond the test proves the watch works.
	f.interval = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Start(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	waitFor := func(want []byte) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for !bytes.Equal(f.CABundle(), want) {
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("bundle holds %d bytes, want the %d written", len(f.CABundle()), len(want))
			}
		}
	}
	// Renamed over the file, as kubelet updates a mounted Secret.
	tmp := filepath.Join(dir, ".ca.pem.tmp")
	if err := os.WriteFile(tmp, next.CACert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitFor(next.CACert)

	// Broken and empty rewrites are read (reload, synchronously) and kept out.
	for _, broken := range [][]byte{[]byte("-----BEGIN CERTIFICATE-----\nbroken\n"), first.ServingCert, nil} {
		if err := os.WriteFile(path, broken, 0o600); err != nil {
			t.Fatal(err)
		}
		f.reload()
		if !bytes.Equal(f.CABundle(), next.CACert) {
			t.Fatalf("a broken rewrite (%q...) replaced the bundle", broken[:min(len(broken), 20)])
		}
	}
	// Written in place, two CAs (a rotation's overlap).
	overlap := append(append([]byte{}, first.CACert...), next.CACert...)
	if err := os.WriteFile(path, overlap, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(overlap)
}
