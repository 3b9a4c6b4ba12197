package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

var testNames = ServiceDNSNames("gatehouse-webhook", "gatehouse-system")

func testOptions() *SelfManagedOptions {
	o := &SelfManagedOptions{
		Namespace: "gatehouse-system", Name: "serving",
		DNSNames:   testNames,
		CAValidity: time.Hour, CARenewBefore: 20 * time.Minute,
		LeafValidity: 30 * time.Minute, LeafRenewBefore: 10 * time.Minute,
		Grace: time.Minute,
	}
	o.setDefaults()
	return o
}

func mustPlan(t *testing.T, s *corev1.Secret, now time.Time, o *SelfManagedOptions, want Step) (*corev1.Secret, time.Time) {
	t.Helper()
	step, next, wake, err := planRotation(s, now, o)
	if err != nil {
		t.Fatal(err)
	}
	if step != want {
		t.Fatalf("at %v: step %q, want %q", now, step, want)
	}
	if want == StepNone {
		if next != nil {
			t.Fatal("no step but a Secret to write")
		}
		return s, wake
	}
	return next, wake
}

func bundleOf(t *testing.T, s *corev1.Secret) []*x509.Certificate {
	t.Helper()
	cas, err := ParseCABundle(s.Data[caCertKey])
	if err != nil {
		t.Fatal(err)
	}
	return cas
}

func leafOf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	pair, err := ParseKeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], "tls.crt", "tls.key")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// trusted checks what a client trusting only ca.crt sees: the served
// certificate verifies for every name at now.
func trusted(t *testing.T, s *corev1.Secret, now time.Time) {
	t.Helper()
	pool := x509.NewCertPool()
	for _, ca := range bundleOf(t, s) {
		pool.AddCert(ca)
	}
	for _, name := range testNames {
		if _, err := leafOf(t, s).Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: now, KeyUsages: serverAuth}); err != nil {
			t.Fatalf("at %v: the bundle does not verify the serving certificate for %s: %v", now, name, err)
		}
	}
}

func stampOf(t *testing.T, s *corev1.Secret, key string) time.Time {
	t.Helper()
	ts, ok := readStamp(s.Annotations, key)
	if !ok {
		t.Fatalf("annotation %s missing or unparsable: %q", key, s.Annotations[key])
	}
	return ts
}

func TestRotationBootstrapsAnEmptySecret(t *testing.T) {
	o := testOptions()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := mustPlan(t, nil, t0, o, StepAddCA)
	if s.Type != corev1.SecretTypeTLS || s.Namespace != "gatehouse-system" || s.Name != "serving" {
		t.Fatalf("Secret %s/%s of type %s", s.Namespace, s.Name, s.Type)
	}
	if n := len(bundleOf(t, s)); n != 1 {
		t.Fatalf("bundle holds %d CAs, want 1", n)
	}
	trusted(t, s, t0)
	if got := leafOf(t, s).NotAfter; !got.Equal(t0.Add(o.LeafValidity).Truncate(time.Second)) {
		t.Errorf("serving certificate expires %v, want %v", got, t0.Add(o.LeafValidity))
	}
	if !stampOf(t, s, AnnotationBundleChanged).Equal(t0) || !stampOf(t, s, AnnotationServingIssued).Equal(t0) {
		t.Errorf("annotations %v, want both stamped %v", s.Annotations, t0)
	}
	// Nothing is due until the serving certificate nears expiry.
	_, wake := mustPlan(t, s, t0, o, StepNone)
	if want := leafOf(t, s).NotAfter.Add(-o.LeafRenewBefore); !wake.Equal(want) {
		t.Errorf("wake %v, want %v", wake, want)
	}
}

// TestRotationPhases walks a CA rotation and checks at every step that a
// client trusting only the published bundle accepts both the certificate
// being served and the one about to be served.
func TestRotationPhases(t *testing.T) {
	o := testOptions()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := mustPlan(t, nil, t0, o, StepAddCA)
	firstCA := bundleOf(t, s)[0]

	// The serving certificate renews from the same CA, the bundle unchanged.
	at := t0.Add(21 * time.Minute)
	renewed, _ := mustPlan(t, s, at, o, StepRenewServing)
	if !bytes.Equal(renewed.Data[caCertKey], s.Data[caCertKey]) || bytes.Equal(renewed.Data[corev1.TLSCertKey], s.Data[corev1.TLSCertKey]) {
		t.Fatal("renewal changed the bundle or kept the certificate")
	}
	if got, want := leafOf(t, renewed).NotAfter, at.Add(o.LeafValidity); !got.Equal(want) {
		t.Errorf("renewed certificate expires %v, want %v", got, want)
	}
	trusted(t, renewed, at)
	s = renewed

	// Phase 1: the CA nears expiry; a second CA joins the bundle and signs
	// nothing served yet.
	at = t0.Add(41 * time.Minute)
	p1, _ := mustPlan(t, s, at, o, StepAddCA)
	cas := bundleOf(t, p1)
	if len(cas) != 2 || !cas[1].Equal(firstCA) || cas[0].Equal(firstCA) {
		t.Fatalf("bundle after phase 1: %d CAs, want the new one and %s", len(cas), firstCA.Subject.CommonName)
	}
	if cas[0].Subject.CommonName == firstCA.Subject.CommonName {
		t.Error("the new CA has the old CA's name")
	}
	if !bytes.Equal(p1.Data[corev1.TLSCertKey], s.Data[corev1.TLSCertKey]) {
		t.Fatal("phase 1 changed the served certificate before the bundle was published")
	}
	trusted(t, p1, at)
	if !stampOf(t, p1, AnnotationBundleChanged).Equal(at) {
		t.Errorf("bundle change not stamped: %v", p1.Annotations)
	}

	// Phase 2 waits for the grace period, then moves the certificate.
	_, wake := mustPlan(t, p1, at.Add(30*time.Second), o, StepNone)
	if want := at.Add(o.Grace); !wake.Equal(want) {
		t.Errorf("phase 2 wake %v, want %v", wake, want)
	}
	at = at.Add(o.Grace)
	p2, _ := mustPlan(t, p1, at, o, StepReissue)
	if !bytes.Equal(p2.Data[caCertKey], p1.Data[caCertKey]) {
		t.Fatal("phase 2 changed the bundle")
	}
	if err := leafOf(t, p2).CheckSignatureFrom(cas[0]); err != nil {
		t.Fatalf("phase 2 certificate not from the new CA: %v", err)
	}
	trusted(t, p2, at)
	// The certificate replicas still serve stays trusted too.
	trusted(t, p1, at)

	// Phase 3 waits for the grace period, then drops the old CA.
	_, wake = mustPlan(t, p2, at.Add(time.Second), o, StepNone)
	if want := at.Add(o.Grace); !wake.Equal(want) {
		t.Errorf("phase 3 wake %v, want %v", wake, want)
	}
	at = at.Add(o.Grace)
	p3, _ := mustPlan(t, p2, at, o, StepDropCA)
	if cas := bundleOf(t, p3); len(cas) != 1 || !cas[0].Equal(bundleOf(t, p2)[0]) {
		t.Fatalf("bundle after phase 3: %d CAs, want only the new one", len(cas))
	}
	if !bytes.Equal(p3.Data[corev1.TLSCertKey], p2.Data[corev1.TLSCertKey]) {
		t.Fatal("phase 3 changed the served certificate")
	}
	trusted(t, p3, at)
	mustPlan(t, p3, at, o, StepNone)
}

func TestServingCertificateNeverOutlivesItsCA(t *testing.T) {
	o := testOptions()
	o.LeafValidity = 2 * o.CAValidity
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := mustPlan(t, nil, t0, o, StepAddCA)
	if got, ca := leafOf(t, s).NotAfter, bundleOf(t, s)[0].NotAfter; !got.Equal(ca) {
		t.Errorf("serving certificate expires %v, its CA %v", got, ca)
	}
}

func TestRotationOnRequest(t *testing.T) {
	o := testOptions()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := mustPlan(t, nil, t0, o, StepAddCA)
	s.Annotations[AnnotationRotateCA] = "now"
	next, _ := mustPlan(t, s, t0.Add(time.Minute), o, StepAddCA)
	if _, ok := next.Annotations[AnnotationRotateCA]; ok {
		t.Error("the request annotation was not removed")
	}
	if len(bundleOf(t, next)) != 2 || !bytes.Equal(next.Data[corev1.TLSCertKey], s.Data[corev1.TLSCertKey]) {
		t.Error("a requested rotation must start at phase 1")
	}
}

func TestRotationStampsAMissingTimestampBeforeWaiting(t *testing.T) {
	o := testOptions()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := mustPlan(t, nil, t0, o, StepAddCA)
	s.Annotations[AnnotationRotateCA] = ""
	p1, _ := mustPlan(t, s, t0, o, StepAddCA)
	delete(p1.Annotations, AnnotationBundleChanged)
	// Long after: without the stamp, the grace period restarts.
	at := t0.Add(5 * time.Minute)
	stamped, _ := mustPlan(t, p1, at, o, StepStamp)
	if !stampOf(t, stamped, AnnotationBundleChanged).Equal(at) {
		t.Fatal("not stamped")
	}
	mustPlan(t, stamped, at, o, StepNone)
	mustPlan(t, stamped, at.Add(o.Grace), o, StepReissue)
}

func TestRotationRepairs(t *testing.T) {
	o := testOptions()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := mustPlan(t, nil, t0, o, StepAddCA)

	t.Run("broken serving certificate is reissued at once", func(t *testing.T) {
		broken := s.DeepCopy()
		broken.Data[corev1.TLSCertKey] = []byte("garbage")
		next, _ := mustPlan(t, broken, t0, o, StepRenewServing)
		trusted(t, next, t0)
	})
	t.Run("changed DNS names are reissued", func(t *testing.T) {
		o2 := *o
		o2.DNSNames = append([]string{}, testNames[0], "extra.example")
		next, _ := mustPlan(t, s, t0, &o2, StepRenewServing)
		if got := leafOf(t, next).DNSNames; len(got) != 2 || got[1] != "extra.example" {
			t.Errorf("DNS names %v", got)
		}
	})
	t.Run("a lost CA key keeps the served certificate trusted", func(t *testing.T) {
		lost := s.DeepCopy()
		delete(lost.Data, caKeyKey)
		next, _ := mustPlan(t, lost, t0, o, StepAddCA)
		if len(bundleOf(t, next)) != 2 || !bytes.Equal(next.Data[corev1.TLSCertKey], s.Data[corev1.TLSCertKey]) {
			t.Error("want a new CA added next to the old one, the certificate kept")
		}
		trusted(t, next, t0)
	})
	t.Run("expired everything starts over", func(t *testing.T) {
		at := t0.Add(2 * time.Hour)
		next, _ := mustPlan(t, s, at, o, StepAddCA)
		if len(bundleOf(t, next)) != 1 {
			t.Error("an expired CA was kept in the bundle")
		}
		trusted(t, next, at)
	})
}

func TestSelfManagedOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*SelfManagedOptions)
		want   string
	}{
		{"no names", func(o *SelfManagedOptions) { o.DNSNames = nil }, "DNS name"},
		{"no secret", func(o *SelfManagedOptions) { o.Name = "" }, "namespace and name"},
		{"CA renew", func(o *SelfManagedOptions) { o.CARenewBefore = o.CAValidity }, "CA renew-before"},
		{"leaf renew", func(o *SelfManagedOptions) { o.LeafRenewBefore = o.LeafValidity }, "serving certificate renew-before"},
		{"leaf after CA", func(o *SelfManagedOptions) { o.LeafRenewBefore = o.CARenewBefore + time.Second }, "must not exceed"},
		{"grace", func(o *SelfManagedOptions) { o.Grace = o.CARenewBefore / 2 }, "two grace periods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			tc.mutate(o)
			if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	o := SelfManagedOptions{Namespace: "ns", Name: "n", DNSNames: []string{"a"}}
	o.setDefaults()
	if err := o.validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestParseCABundle(t *testing.T) {
	a, _ := SelfSigned([]string{"a"}, time.Hour)
	b, _ := SelfSigned([]string{"b"}, time.Hour)
	cas, err := ParseCABundle(append(append([]byte{}, a.CACert...), b.CACert...))
	if err != nil || len(cas) != 2 {
		t.Fatalf("%d CAs, %v", len(cas), err)
	}
	for _, bad := range [][]byte{nil, []byte("garbage"), a.ServingKey, a.ServingCert, append(append([]byte{}, a.CACert...), "tail"...)} {
		if _, err := ParseCABundle(bad); err == nil {
			t.Errorf("bundle %q accepted", bad)
		}
	}
	block, _ := pem.Decode(a.CACert)
	if !bytes.Equal(encodeCerts(cas[:1]), pem.EncodeToMemory(block)) {
		t.Error("encodeCerts does not round-trip")
	}
}
