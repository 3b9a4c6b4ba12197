package certs_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
)

// TestSecretPublishesItsCABundle follows a Secret on a real API server
// through its field-selected informer.
func TestSecretPublishesItsCABundle(t *testing.T) {
	cp := controlPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, _ := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	second, _ := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bundle-tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": first.ServingCert, "tls.key": first.ServingKey, "ca.crt": first.CACert},
	}
	if err := cp.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), secret) })
	src, err := certs.NewSecret(ctx, cp.Config, "default", "bundle-tls", testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src.CABundle(), first.CACert) {
		t.Fatal("ca.crt not published at construction")
	}
	var calls atomic.Int32
	src.OnCABundleChange(func() { calls.Add(1) })
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Start(ctx) }()
	defer func() { cancel(); <-done }()

	update := func(data map[string][]byte) {
		t.Helper()
		secret.Data = data
		if err := cp.Client.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	// Two CAs during an overlap, the serving pair unchanged.
	both := append(append([]byte{}, second.CACert...), first.CACert...)
	update(map[string][]byte{"tls.crt": first.ServingCert, "tls.key": first.ServingKey, "ca.crt": both})
	waitUntil(t, func() bool { return bytes.Equal(src.CABundle(), both) })
	waitUntil(t, func() bool { return calls.Load() >= 1 })

	// A broken bundle is never published; neither is a missing one.
	update(map[string][]byte{"tls.crt": first.ServingCert, "tls.key": first.ServingKey, "ca.crt": []byte("garbage")})
	update(map[string][]byte{"tls.crt": second.ServingCert, "tls.key": second.ServingKey})
	want, err := certs.ParseKeyPair(second.ServingCert, second.ServingKey, "", "")
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool {
		c, _ := src.GetCertificate(nil)
		return bytes.Equal(c.Certificate[0], want.Certificate[0])
	})
	if !bytes.Equal(src.CABundle(), both) {
		t.Fatal("a broken or missing ca.crt replaced the bundle")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d bundle callbacks, want 1", n)
	}
}
