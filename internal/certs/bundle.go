package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// CABundler is a certificate source that also knows the CA bundle clients must trust.
type CABundler interface {
	// CABundle returns the PEM bundle (possibly several CAs during a rotation overlap), or nil if unknown yet.
	CABundle() []byte
	// OnCABundleChange registers f, called (from any goroutine) after the bundle changed. Called before Start.
	OnCABundleChange(f func())
}

// caHolder implements CABundler for the sources. Only bundles that parse
// are published: a broken ca.crt written into every webhook configuration
// would cut the API server off from all replicas at once, so the previous
// bundle is kept instead.
type caHolder struct {
	mu        sync.Mutex
	bundle    []byte
	callbacks []func()
}

func (c *caHolder) CABundle() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bundle
}

func (c *caHolder) OnCABundleChange(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.callbacks = append(c.callbacks, f)
}

// setCABundle installs bundle (from what names its origin) when it differs
// from the current one, and calls the callbacks outside the lock so that
// they may read CABundle.
func (c *caHolder) setCABundle(bundle []byte, what string, log logr.Logger) {
	if len(bytes.TrimSpace(bundle)) == 0 {
		return
	}
	certs, err := ParseCABundle(bundle)
	if err != nil {
		log.Error(err, "CA bundle not reloaded; keeping the previous one", "from", what)
		return
	}
	c.mu.Lock()
	if bytes.Equal(c.bundle, bundle) {
		c.mu.Unlock()
		return
	}
	c.bundle = bytes.Clone(bundle)
	callbacks := append([]func(){}, c.callbacks...)
	c.mu.Unlock()

	earliest := certs[0].NotAfter
	for _, ca := range certs[1:] {
		if ca.NotAfter.Before(earliest) {
			earliest = ca.NotAfter
		}
	}
	caExpiry.Set(float64(earliest.Unix()))
	log.Info("CA bundle loaded", "from", what, "cas", len(certs), "earliestNotAfter", earliest)
	for _, f := range callbacks {
		f()
	}
}

// ParseCABundle returns the CA certificates of a PEM bundle. It fails on
// anything that is not a CERTIFICATE block of a CA, or on an empty bundle.
func ParseCABundle(bundle []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := bundle
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("CA bundle holds a %s block", block.Type)
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA bundle is unparsable: %w", err)
		}
		if !ca.IsCA {
			return nil, fmt.Errorf("CA bundle holds %q, which is not a CA", ca.Subject.CommonName)
		}
		out = append(out, ca)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("CA bundle: trailing data that is not PEM")
	}
	if len(out) == 0 {
		return nil, errors.New("CA bundle: no PEM certificate found")
	}
	return out, nil
}

// encodeCerts is the PEM bundle of certs, in order.
func encodeCerts(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

// expiresWithin reports whether c is no longer valid d from now.
func expiresWithin(c *x509.Certificate, now time.Time, d time.Duration) bool {
	return !now.Add(d).Before(c.NotAfter)
}
