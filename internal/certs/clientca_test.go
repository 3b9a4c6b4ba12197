package certs

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

func verifiesClient(t *testing.T, pool *x509.CertPool, b *ClientBundle) bool {
	t.Helper()
	block, _ := pem.Decode(b.ClientCert)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

// A rotated client CA is picked up without a restart; a half-written or
// broken file keeps the CAs in force.
func TestClientCAFollowsTheFileAndKeepsThePreviousOnABrokenRewrite(t *testing.T) {
	first, err := SelfSignedClient("kube-apiserver", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	second, err := SelfSignedClient("kube-apiserver", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.crt")
	if _, err := NewClientCA(path, testr.New(t)); err == nil {
		t.Fatal("a missing client CA file was accepted")
	}
	if err := os.WriteFile(path, first.CACert, 0o600); err != nil {
		t.Fatal(err)
	}
	ca, err := NewClientCA(path, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	pool := ca.Pool()
	if !verifiesClient(t, pool, first) || verifiesClient(t, pool, second) {
		t.Fatal("the first CA's pool does not verify exactly its own client")
	}
	if err := ca.reload(); err != nil || ca.Pool() != pool {
		t.Fatalf("an unchanged file gave a new pool (err %v): connections would be verified again for nothing", err)
	}

	if err := os.WriteFile(path, append(append([]byte{}, first.CACert...), second.CACert...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ca.reload(); err != nil {
		t.Fatal(err)
	}
	if !verifiesClient(t, ca.Pool(), first) || !verifiesClient(t, ca.Pool(), second) {
		t.Fatal("during the overlap both CAs must verify")
	}

	for _, broken := range [][]byte{[]byte("-----BEGIN CERTIFICATE-----\ntrunc"), second.ClientCert, {}} {
		if err := os.WriteFile(path, broken, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := ca.reload(); err == nil {
			t.Fatalf("%q accepted as a client CA bundle", broken)
		}
		if !verifiesClient(t, ca.Pool(), second) {
			t.Fatal("a broken rewrite dropped the CAs in force")
		}
	}
}
