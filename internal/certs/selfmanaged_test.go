package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testlog"
)

var (
	sharedPlane    *testenv.ControlPlane
	sharedPlaneErr error
	sharedOnce     sync.Once
)

// controlPlane starts one API server for the tests that need it, on first
// use; TestMain stops it.
func controlPlane(t *testing.T) *testenv.ControlPlane {
	t.Helper()
	sharedOnce.Do(func() {
		sharedPlane, sharedPlaneErr = testenv.StartControlPlane(testenv.ControlPlaneOptions{CRDPaths: []string{}})
	})
	if sharedPlaneErr != nil {
		t.Fatal(sharedPlaneErr)
	}
	return sharedPlane
}

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	code := m.Run()
	if sharedPlane != nil {
		_ = sharedPlane.Stop()
	}
	os.Exit(code)
}

// serve accepts TLS connections with src's certificate and completes each
// handshake; it stops with ctx.
func serve(t *testing.T, ctx context.Context, src certs.Source) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { <-ctx.Done(); ln.Close() }()
	tln := tls.NewListener(ln, &tls.Config{GetCertificate: src.GetCertificate, MinVersion: tls.VersionTLS12})
	go func() {
		for {
			conn, err := tln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = conn.(*tls.Conn).HandshakeContext(ctx)
				conn.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// TestSelfManagedRotationNeverBreaksAHandshake runs two replicas on a real
// API server: both create-or-read the Secret, one leads the rotation, and a
// client trusting only the published CA bundle (as the API server trusts the
// webhook configurations' caBundle) shakes hands with both replicas through
// two CA rotations. Not one handshake may fail.
func TestSelfManagedRotationNeverBreaksAHandshake(t *testing.T) {
	cp := controlPlane(t)
	ctx, cancel := context.WithCancel(logf.IntoContext(context.Background(), testr.New(t)))
	defer cancel()
	const ns = "gatehouse-system"
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	opts := certs.SelfManagedOptions{
		Namespace: ns, Name: "gatehouse-serving-cert",
		DNSNames: certs.ServiceDNSNames("gatehouse-webhook", ns),
		// A CA rotation starts ten seconds after each new CA.
		CAValidity: 40 * time.Second, CARenewBefore: 30 * time.Second,
		LeafValidity: 40 * time.Second, LeafRenewBefore: 10 * time.Second,
		Grace: 3 * time.Second,
	}
	var replicas []*certs.SelfManaged
	var wg sync.WaitGroup
	for range 2 {
		sm, err := certs.NewSelfManaged(ctx, cp.Config, opts)
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, sm)
	}
	var secret corev1.Secret
	if err := cp.Client.Get(ctx, clientKey(ns, opts.Name), &secret); err != nil {
		t.Fatalf("the Secret was not created: %v", err)
	}
	if secret.Type != corev1.SecretTypeTLS || len(secret.Data["ca.crt"]) == 0 || len(secret.Data["ca.key"]) == 0 {
		t.Fatalf("Secret of type %s with keys %v", secret.Type, keysOf(secret.Data))
	}

	// What the API server trusts: the leader's bundle, published a second
	// after it changes, as a webhook configuration reconciler would.
	var published atomic.Pointer[x509.CertPool]
	var maxCAs atomic.Int32
	publish := func(bundle []byte) {
		cas, err := certs.ParseCABundle(bundle)
		if err != nil {
			t.Errorf("published bundle: %v", err)
			return
		}
		pool := x509.NewCertPool()
		for _, ca := range cas {
			pool.AddCert(ca)
		}
		published.Store(pool)
		if n := int32(len(cas)); n > maxCAs.Load() {
			maxCAs.Store(n)
		}
	}
	publish(replicas[0].CABundle())
	replicas[0].OnCABundleChange(func() {
		bundle := replicas[0].CABundle()
		time.AfterFunc(time.Second, func() { publish(bundle) })
	})

	var addrs []string
	for _, sm := range replicas {
		wg.Add(1)
		go func() { defer wg.Done(); _ = sm.Start(ctx) }()
		addrs = append(addrs, serve(t, ctx, sm))
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = replicas[0].Rotator().Start(ctx) }()
	defer wg.Wait()
	defer cancel()

	// Handshake with both replicas until each has served certificates from
	// three CAs (two rotations) and the bundle is back to one CA.
	issuers := []map[string]bool{{}, {}}
	var handshakes, failures int
	deadline := time.Now().Add(2 * time.Minute)
	for {
		for i, addr := range addrs {
			d := tls.Dialer{Config: &tls.Config{RootCAs: published.Load(), ServerName: opts.DNSNames[0], MinVersion: tls.VersionTLS12}}
			dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
			conn, err := d.DialContext(dctx, "tcp", addr)
			dcancel()
			handshakes++
			if err != nil {
				failures++
				t.Errorf("handshake %d with replica %d: %v", handshakes, i, err)
				continue
			}
			issuers[i][conn.(*tls.Conn).ConnectionState().PeerCertificates[0].Issuer.CommonName] = true
			conn.Close()
		}
		cas, _ := certs.ParseCABundle(replicas[0].CABundle())
		if len(issuers[0]) >= 3 && len(issuers[1]) >= 3 && len(cas) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two rotations not seen in 2m: issuers %v, bundle of %d CAs", issuers, len(cas))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("%d handshakes, %d failed, through two CA rotations", handshakes, failures)
	if failures != 0 {
		t.Fatalf("%d of %d handshakes failed", failures, handshakes)
	}
	if maxCAs.Load() != 2 {
		t.Errorf("the published bundle held at most %d CAs, want 2 during each overlap", maxCAs.Load())
	}
	// Both replicas serve the same, current certificate from the Secret.
	if err := cp.Client.Get(ctx, clientKey(ns, opts.Name), &secret); err != nil {
		t.Fatal(err)
	}
	want, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool {
		for _, sm := range replicas {
			got, err := sm.GetCertificate(nil)
			if err != nil || string(got.Certificate[0]) != string(want.Certificate[0]) {
				return false
			}
		}
		return true
	})
}

// TestSelfManagedRequestedRotation checks the operator's trigger: the
// annotation starts phase 1 on the leader and is removed.
func TestSelfManagedRequestedRotation(t *testing.T) {
	cp := controlPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "default"
	sm, err := certs.NewSelfManaged(ctx, cp.Config, certs.SelfManagedOptions{
		Namespace: ns, Name: "tls", DNSNames: []string{"localhost"}, Grace: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = sm.Start(ctx) }()
	// The rotator logs through the logger it is started with, as the
	// manager starts it (named, with the Secret it writes).
	var logs testlog.Lines
	// Both return before the test does: the rotator logs through t.
	rotated := make(chan struct{})
	go func() {
		defer close(rotated)
		_ = sm.Rotator().Start(logf.IntoContext(ctx, logs.Logger(t).WithName("certs")))
	}()
	defer func() { cancel(); <-done; <-rotated }()
	if err := sm.RequestCARotation(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool {
		cas, err := certs.ParseCABundle(sm.CABundle())
		return err == nil && len(cas) == 2
	})
	var secret corev1.Secret
	if err := cp.Client.Get(ctx, clientKey(ns, "tls"), &secret); err != nil {
		t.Fatal(err)
	}
	if _, ok := secret.Annotations[certs.AnnotationRotateCA]; ok {
		t.Error("the request annotation stayed")
	}
	if !logs.Has(`certs/rotator`, `"msg"="certificate rotation step written"`, `"secret"="default/tls"`, `"step"="add-ca"`) {
		t.Error("the rotation step was not logged through the logger in the rotator's context")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(errors.New("condition not met within 30s"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
