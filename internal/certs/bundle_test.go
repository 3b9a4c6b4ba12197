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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestSecretPublishesItsCABundle(t *testing.T) {
	first, _ := SelfSigned([]string{"127.0.0.1"}, time.Hour)
	second, _ := SelfSigned([]string{"127.0.0.1"}, time.Hour)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": first.ServingCert, "tls.key": first.ServingKey, "ca.crt": first.CACert},
	}
	cs := fake.NewClientset(secret)
	src, err := NewSecret(context.Background(), cs, "ns", "tls", testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src.CABundle(), first.CACert) {
		t.Fatal("ca.crt not published at construction")
	}
	var calls atomic.Int32
	src.OnCABundleChange(func() { calls.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = src.Start(ctx) }()

	update := func(data map[string][]byte) {
		t.Helper()
		s := secret.DeepCopy()
		s.Data = data
		if _, err := cs.CoreV1().Secrets("ns").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Two CAs during an overlap, the serving pair unchanged.
	both := append(append([]byte{}, second.CACert...), first.CACert...)
	update(map[string][]byte{"tls.crt": first.ServingCert, "tls.key": first.ServingKey, "ca.crt": both})
	waitFor(t, func() bool { return bytes.Equal(src.CABundle(), both) })
	waitFor(t, func() bool { return calls.Load() >= 1 })

	// A broken bundle is never published; neither is a missing one.
	update(map[string][]byte{"tls.crt": first.ServingCert, "tls.key": first.ServingKey, "ca.crt": []byte("garbage")})
	update(map[string][]byte{"tls.crt": second.ServingCert, "tls.key": second.ServingKey})
	waitFor(t, func() bool {
		c, _ := src.GetCertificate(nil)
		return bytes.Equal(c.Certificate[0], leafDER(t, second))
	})
	if !bytes.Equal(src.CABundle(), both) {
		t.Fatal("a broken or missing ca.crt replaced the bundle")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d bundle callbacks, want 1", n)
	}
}

func leafDER(t *testing.T, b *Bundle) []byte {
	t.Helper()
	pair, err := ParseKeyPair(b.ServingCert, b.ServingKey, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return pair.Certificate[0]
}

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
