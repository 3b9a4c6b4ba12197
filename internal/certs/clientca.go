package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
)

// ClientCA is the CA bundle that webhook callers' client certificates are
// verified against (--client-ca-file), read from a file (a mounted Secret's
// or ConfigMap's key) and re-read on a poll, because a mounted volume is
// updated by swapping a symlink that not every watcher reports. A broken
// rewrite keeps the previous CAs: refusing the API server over a
// half-written file would take every webhook down.
type ClientCA struct {
	path     string
	log      logr.Logger
	interval time.Duration

	mu   sync.Mutex
	last []byte
	pool atomic.Pointer[x509.CertPool]
}

// NewClientCA reads the bundle at path; it fails when the file is missing
// or holds no CA certificate.
func NewClientCA(path string, log logr.Logger) (*ClientCA, error) {
	c := &ClientCA{path: path, log: log, interval: 10 * time.Second}
	if err := c.reload(); err != nil {
		metrics.CertificateReloads.WithLabelValues("client-ca", "error").Inc()
		return nil, err
	}
	return c, nil
}

// Pool is the current CAs. It returns the same pool until the file changes.
func (c *ClientCA) Pool() *x509.CertPool { return c.pool.Load() }

// Start re-reads the file every interval until ctx ends.
func (c *ClientCA) Start(ctx context.Context) error {
	ticker := time.NewTicker(c.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if err := c.reload(); err != nil {
				metrics.CertificateReloads.WithLabelValues("client-ca", "error").Inc()
				c.log.Error(err, "client CA bundle not reloaded; keeping the previous one")
			}
		}
	}
}

func (c *ClientCA) reload() error {
	bundle, err := os.ReadFile(c.path)
	if err != nil {
		return fmt.Errorf("client CA bundle: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pool.Load() != nil && bytes.Equal(bundle, c.last) {
		return nil
	}
	cas, err := ParseCABundle(bundle)
	if err != nil {
		return fmt.Errorf("client CA bundle %s: %w", c.path, err)
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	c.last = bundle
	c.pool.Store(pool)
	metrics.CertificateReloads.WithLabelValues("client-ca", "success").Inc()
	c.log.Info("client CA bundle loaded", "path", c.path, "cas", len(cas))
	return nil
}
