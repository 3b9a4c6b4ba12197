package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Bundle is a CA and a serving certificate it signed, PEM encoded.
type Bundle struct {
	CACert, ServingCert, ServingKey []byte
}

// SelfSigned creates a CA and a serving certificate for hosts (DNS names or IP
// addresses), valid for validity. It is for local runs and tests; clusters get
// their certificates from cert-manager or a Secret.
func SelfSigned(hosts []string, validity time.Duration) (*Bundle, error) {
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			serving.IPAddresses = append(serving.IPAddresses, ip)
		} else {
			serving.DNSNames = append(serving.DNSNames, h)
		}
	}
	ca, cert, key, err := selfSignedPair("gatehouse-ca", serving, validity)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	return &Bundle{CACert: ca, ServingCert: cert, ServingKey: key}, nil
}

// selfSignedPair creates a CA named caName and the certificate leaf
// describes (subject, names, usages), signed by it, both valid for
// validity from now, and returns them and the leaf's key PEM-encoded.
func selfSignedPair(caName string, leaf *x509.Certificate, validity time.Duration) (caPEM, certPEM, keyPEM []byte, err error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: caName},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf.SerialNumber = serial()
	leaf.NotBefore, leaf.NotAfter = now.Add(-time.Minute), now.Add(validity)
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// WriteDir writes ca.crt, tls.crt and tls.key into dir. The serving pair is
// written to temporary files and renamed, so a watcher never reads half of it.
func (b *Bundle) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"ca.crt": b.CACert, "tls.key": b.ServingKey, "tls.crt": b.ServingCert} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}

// ClientBundle is a CA and a client certificate it signed, PEM encoded.
type ClientBundle struct {
	CACert, ClientCert, ClientKey []byte
}

// SelfSignedClient creates a CA and a client certificate (ExtKeyUsage
// clientAuth) named commonName, valid for validity: for test and local
// control planes whose kube-apiserver authenticates to Gatehouse
// (--client-ca-file).
func SelfSignedClient(commonName string, validity time.Duration) (*ClientBundle, error) {
	ca, cert, key, err := selfSignedPair("gatehouse-client-ca", &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, validity)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	return &ClientBundle{CACert: ca, ClientCert: cert, ClientKey: key}, nil
}
