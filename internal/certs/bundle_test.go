package certs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

func TestDirPublishesCAFile(t *testing.T) {
	dir := t.TempDir()
	first, _ := SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err := first.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	src, err := NewDir(dir, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src.CABundle(), first.CACert) {
		t.Fatal("ca.crt not published at construction")
	}
	var calls atomic.Int32
	src.OnCABundleChange(func() { calls.Add(1) })
	src.interval = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = src.Start(ctx) }()

	// ca.crt alone changes: certwatcher does not see it, the poll does.
	second, _ := SelfSigned([]string{"127.0.0.1"}, time.Hour)
	both := append(append([]byte{}, second.CACert...), first.CACert...)
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), both, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return bytes.Equal(src.CABundle(), both) && calls.Load() == 1 })

	// Without ca.crt the bundle stays unknown.
	plain := t.TempDir()
	if err := first.WriteDir(plain); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(plain, "ca.crt")); err != nil {
		t.Fatal(err)
	}
	src2, err := NewDir(plain, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if src2.CABundle() != nil {
		t.Fatal("a bundle without ca.crt")
	}
}
