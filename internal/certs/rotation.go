package certs

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
)

// Keys and annotations of a self-managed Secret. tls.crt and tls.key are the
// serving pair, ca.crt the bundle clients trust (one CA, two during a
// rotation), ca.key the key of the CA that signs new serving certificates.
const (
	caCertKey = "ca.crt"
	caKeyKey  = "ca.key"

	// AnnotationBundleChanged is when ca.crt last changed (RFC 3339): the
	// serving certificate moves to a new CA only a grace period later, once
	// the new bundle has reached the webhook configurations.
	AnnotationBundleChanged = "gatehouse.dev/ca-bundle-changed-at"
	// AnnotationServingIssued is when tls.crt was last issued: an old CA
	// leaves the bundle only a grace period later, once every replica serves
	// the new certificate.
	AnnotationServingIssued = "gatehouse.dev/serving-cert-issued-at"
	// AnnotationRotateCA, set to any value, makes the leader start a CA
	// rotation at once (`kubectl annotate secret ... gatehouse.dev/rotate-ca=now`).
	// The leader removes it in the same write.
	AnnotationRotateCA = "gatehouse.dev/rotate-ca"
)

// Step is one write the rotator makes to the Secret.
type Step string

const (
	// StepNone: nothing is due.
	StepNone Step = ""
	// StepAddCA (phase 1) adds a new CA to the bundle and makes it the
	// signing CA; the serving certificate stays, unless there is none usable
	// (first start), which is then issued from the new CA at once.
	StepAddCA Step = "add-ca"
	// StepReissue (phase 2) issues the serving certificate from the new CA,
	// a grace period after the bundle holding it was written.
	StepReissue Step = "reissue-serving"
	// StepDropCA (phase 3) removes the old CAs from the bundle, a grace
	// period after the serving certificate moved to the new CA.
	StepDropCA Step = "drop-old-ca"
	// StepRenewServing issues a serving certificate from the same CA: it
	// nears expiry, its DNS names changed, or it is unusable.
	StepRenewServing Step = "renew-serving"
	// StepStamp records a missing timestamp annotation, so a Secret written
	// by something else waits a full grace period before the next phase.
	StepStamp Step = "stamp"
)

// material is a Secret's data, parsed. Missing or broken parts are nil.
type material struct {
	bundle     []*x509.Certificate
	signing    *x509.Certificate
	signingKey *rsa.PrivateKey
	leaf       *x509.Certificate
}

func readMaterial(data map[string][]byte) material {
	var m material
	m.bundle, _ = ParseCABundle(data[caCertKey])
	if block, _ := pem.Decode(data[caKeyKey]); block != nil {
		if key, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
			for _, ca := range m.bundle {
				if pub, ok := ca.PublicKey.(*rsa.PublicKey); ok && pub.Equal(&key.PublicKey) {
					m.signing, m.signingKey = ca, key
				}
			}
		}
	}
	if pair, err := ParseKeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], "", ""); err == nil {
		m.leaf, _ = x509.ParseCertificate(pair.Certificate[0])
	}
	return m
}

// issuerOf is the bundle CA that signed the leaf and verifies it for name at
// at (key pair, validity, name, usage), or nil.
func (m material) issuerOf(data map[string][]byte, name string, at time.Time) *x509.Certificate {
	if m.leaf == nil {
		return nil
	}
	for _, ca := range m.bundle {
		if m.leaf.CheckSignatureFrom(ca) != nil {
			continue
		}
		caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
		if ok, _ := rotator.ValidCert(caPEM, data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], name, &serverAuth, at); ok {
			return ca
		}
	}
	return nil
}

var serverAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}

// planRotation decides the rotator's next write to secret (nil: the Secret
// does not exist yet) at now. It returns the step and the Secret to write,
// or StepNone and when to look again. It is a pure function of its
// arguments, apart from the keys it generates.
func planRotation(secret *corev1.Secret, now time.Time, o *SelfManagedOptions) (Step, *corev1.Secret, time.Time, error) {
	out := &corev1.Secret{Type: corev1.SecretTypeTLS}
	out.Namespace, out.Name = o.Namespace, o.Name
	if secret != nil {
		out = secret.DeepCopy()
	}
	if out.Data == nil {
		out.Data = map[string][]byte{}
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	ann := out.Annotations
	m := readMaterial(out.Data)
	stamp := now.UTC().Format(time.RFC3339Nano)
	// A certificate that verifies now can be served; one that verifies at
	// now+LeafRenewBefore need not be renewed yet.
	issuerNow := m.issuerOf(out.Data, o.DNSNames[0], now)

	// Phase 1: a new CA, while the old one (if any) stays trusted.
	_, requested := ann[AnnotationRotateCA]
	if m.signing == nil || expiresWithin(m.signing, now, o.CARenewBefore) || requested {
		ca, err := o.newCA(now)
		if err != nil {
			return StepNone, nil, time.Time{}, err
		}
		bundle := []*x509.Certificate{ca.Cert}
		for _, old := range m.bundle {
			if now.Before(old.NotAfter) {
				bundle = append(bundle, old)
			}
		}
		out.Data[caCertKey] = encodeCerts(bundle)
		out.Data[caKeyKey] = ca.KeyPEM
		ann[AnnotationBundleChanged] = stamp
		delete(ann, AnnotationRotateCA)
		if issuerNow == nil {
			if err := o.issue(out, ca, now); err != nil {
				return StepNone, nil, time.Time{}, err
			}
			ann[AnnotationServingIssued] = stamp
		}
		return StepAddCA, out, time.Time{}, nil
	}

	signingArtifacts := &rotator.KeyPairArtifacts{Cert: m.signing, Key: m.signingKey, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.signing.Raw}), KeyPEM: out.Data[caKeyKey]}
	renew := func(step Step) (Step, *corev1.Secret, time.Time, error) {
		if err := o.issue(out, signingArtifacts, now); err != nil {
			return StepNone, nil, time.Time{}, err
		}
		ann[AnnotationServingIssued] = stamp
		return step, out, time.Time{}, nil
	}
	// Nothing usable is served: waiting helps no one.
	if issuerNow == nil {
		return renew(StepRenewServing)
	}

	// Phase 2: serve from the new CA once the bundle holding it has been
	// published for a grace period.
	if issuerNow != m.signing {
		changed, ok := readStamp(ann, AnnotationBundleChanged)
		if !ok {
			ann[AnnotationBundleChanged] = stamp
			return StepStamp, out, time.Time{}, nil
		}
		if due := changed.Add(o.Grace); now.Before(due) {
			return StepNone, nil, due, nil
		}
		return renew(StepReissue)
	}

	if m.issuerOf(out.Data, o.DNSNames[0], now.Add(o.LeafRenewBefore)) == nil || !slices.Equal(sortedCopy(m.leaf.DNSNames), sortedCopy(o.DNSNames)) {
		return renew(StepRenewServing)
	}

	// Phase 3: drop the old CAs once every replica has had a grace period
	// to serve the certificate from the new one.
	if len(m.bundle) > 1 {
		issued, ok := readStamp(ann, AnnotationServingIssued)
		if !ok {
			ann[AnnotationServingIssued] = stamp
			return StepStamp, out, time.Time{}, nil
		}
		if due := issued.Add(o.Grace); now.Before(due) {
			return StepNone, nil, due, nil
		}
		out.Data[caCertKey] = encodeCerts([]*x509.Certificate{m.signing})
		ann[AnnotationBundleChanged] = stamp
		return StepDropCA, out, time.Time{}, nil
	}

	wake := m.signing.NotAfter.Add(-o.CARenewBefore)
	if leafDue := m.leaf.NotAfter.Add(-o.LeafRenewBefore); leafDue.Before(wake) {
		wake = leafDue
	}
	return StepNone, nil, wake, nil
}

func readStamp(ann map[string]string, key string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, ann[key])
	return t, err == nil
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// newCA generates a CA with cert-controller. Each CA gets its own name:
// cert-controller numbers every CA and serving certificate alike, so only a
// distinct issuer name keeps issuer and serial unique while two CAs overlap.
func (o *SelfManagedOptions) newCA(now time.Time) (*rotator.KeyPairArtifacts, error) {
	gen := &rotator.CertRotator{CAName: fmt.Sprintf("gatehouse-ca-%d", now.UnixNano()), CAOrganization: "gatehouse"}
	ca, err := gen.CreateCACert(now.Add(-backdate), now.Add(o.CAValidity))
	if err != nil {
		return nil, fmt.Errorf("generate CA: %w", err)
	}
	return ca, nil
}

// backdate absorbs clock skew between the writer and the API server.
const backdate = time.Hour

// issue writes a serving certificate signed by ca into s. It never outlives
// its CA, so an expiring CA always drags its serving certificate into a
// renewal instead of leaving a certificate nobody can verify.
func (o *SelfManagedOptions) issue(s *corev1.Secret, ca *rotator.KeyPairArtifacts, now time.Time) error {
	end := now.Add(o.LeafValidity)
	if ca.Cert.NotAfter.Before(end) {
		end = ca.Cert.NotAfter
	}
	gen := &rotator.CertRotator{DNSName: o.DNSNames[0], ExtraDNSNames: o.DNSNames[1:], ExtKeyUsages: &serverAuth}
	cert, key, err := gen.CreateCertPEM(ca, now.Add(-backdate), end)
	if err != nil {
		return fmt.Errorf("issue serving certificate: %w", err)
	}
	s.Data[corev1.TLSCertKey] = cert
	s.Data[corev1.TLSPrivateKeyKey] = key
	return nil
}
