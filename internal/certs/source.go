package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"sync/atomic"

	"github.com/go-logr/logr"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
)

// Source serves the current certificate to a TLS listener.
type Source interface {
	// GetCertificate is a tls.Config.GetCertificate callback.
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Start watches for changes until ctx ends.
	Start(ctx context.Context) error
}

// holder keeps the current pair and swaps it atomically, so a reload never
// disturbs handshakes in progress.
type holder struct {
	source string
	log    logr.Logger
	pair   atomic.Pointer[tls.Certificate]
}

func (h *holder) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	pair := h.pair.Load()
	if pair == nil {
		return nil, errors.New("no serving certificate loaded")
	}
	return pair, nil
}

// store installs a freshly parsed pair, or keeps serving the previous one when
// the new material is broken: a half-written rotation must not take the
// webhook down.
func (h *holder) store(pair *tls.Certificate, err error) {
	if err != nil {
		metrics.CertificateReloads.WithLabelValues(h.source, "error").Inc()
		h.log.Error(err, "serving certificate not reloaded; keeping the previous one")
		return
	}
	if old := h.pair.Load(); old != nil && sameChain(old, pair) {
		return
	}
	h.pair.Store(pair)
	recordLoaded(h.source, pair, h.log)
}

func recordLoaded(source string, pair *tls.Certificate, log logr.Logger) {
	metrics.CertificateReloads.WithLabelValues(source, "success").Inc()
	expiry := notAfter(pair)
	metrics.CertificateExpiry.Set(float64(expiry.Unix()))
	log.Info("serving certificate loaded", "source", source, "notAfter", expiry)
}

func sameChain(a, b *tls.Certificate) bool {
	if len(a.Certificate) != len(b.Certificate) {
		return false
	}
	for i := range a.Certificate {
		if string(a.Certificate[i]) != string(b.Certificate[i]) {
			return false
		}
	}
	return true
}
