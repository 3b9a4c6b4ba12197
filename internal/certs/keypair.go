package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"
)

// ParseKeyPair checks a PEM certificate and key and returns the TLS pair.
// Errors name the part that is wrong (certName or keyName), so an operator
// knows which file or Secret key to fix.
func ParseKeyPair(certPEM, keyPEM []byte, certName, keyName string) (*tls.Certificate, error) {
	if len(bytes.TrimSpace(certPEM)) == 0 {
		return nil, fmt.Errorf("certificate %s is empty", certName)
	}
	if len(bytes.TrimSpace(keyPEM)) == 0 {
		return nil, fmt.Errorf("private key %s is empty", keyName)
	}
	if block, _ := pem.Decode(certPEM); block == nil {
		return nil, fmt.Errorf("certificate %s: no PEM data found", certName)
	} else if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return nil, fmt.Errorf("certificate %s is unparsable: %w", certName, err)
	}
	if block, _ := pem.Decode(keyPEM); block == nil {
		return nil, fmt.Errorf("private key %s: no PEM data found", keyName)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate %s and key %s do not form a pair: %w", certName, keyName, err)
	}
	return &pair, nil
}

// notAfter returns the expiry of the pair's leaf certificate.
func notAfter(pair *tls.Certificate) time.Time {
	if pair.Leaf != nil {
		return pair.Leaf.NotAfter
	}
	if len(pair.Certificate) > 0 {
		if leaf, err := x509.ParseCertificate(pair.Certificate[0]); err == nil {
			return leaf.NotAfter
		}
	}
	return time.Time{}
}
