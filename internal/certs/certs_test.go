package certs

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

func TestParseKeyPairNamesTheBrokenPart(t *testing.T) {
	good, err := SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := SelfSigned([]string{"127.0.0.1"}, time.Hour)
	cases := []struct {
		name      string
		cert, key []byte
		want      string
	}{
		{"empty cert", nil, good.ServingKey, "certificate crt is empty"},
		{"blank key", good.ServingCert, []byte("\n "), "private key key is empty"},
		{"cert not PEM", []byte("hello"), good.ServingKey, "certificate crt: no PEM data found"},
		{"cert unparsable", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), good.ServingKey, "certificate crt is unparsable"},
		{"key not PEM", good.ServingCert, []byte("hello"), "private key key: no PEM data found"},
		{"mismatched pair", good.ServingCert, other.ServingKey, "certificate crt and key key do not form a pair"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKeyPair(tc.cert, tc.key, "crt", "key")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ParseKeyPair(good.ServingCert, good.ServingKey, "crt", "key"); err != nil {
		t.Fatalf("good pair refused: %v", err)
	}
}

func TestDirServesRotatedFilesAndKeepsTheOldPairOnABrokenWrite(t *testing.T) {
	dir := t.TempDir()
	first, _ := SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err := first.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	src, err := NewDir(dir, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	src.interval = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = src.Start(ctx) }()

	served := func() string {
		c, err := src.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return string(c.Certificate[0])
	}
	leaf := func(b *Bundle) string {
		pair, _ := ParseKeyPair(b.ServingCert, b.ServingKey, "", "")
		return string(pair.Certificate[0])
	}
	if served() != leaf(first) {
		t.Fatal("first pair not served")
	}
	second, _ := SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err := second.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return served() == leaf(second) })

	// A half-written rotation must not take the server down.
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if served() != leaf(second) {
		t.Fatal("a broken write replaced the served pair")
	}
}

func TestNewDirFailsOnMissingFiles(t *testing.T) {
	_, err := NewDir(t.TempDir(), testr.New(t))
	if err == nil || !strings.Contains(err.Error(), "read certificate") {
		t.Fatalf("error %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
