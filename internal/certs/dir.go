package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
)

// Dir serves tls.crt and tls.key from a directory through controller-runtime's
// certwatcher (fsnotify plus a poll, because some volume types emit no
// events), and publishes ca.crt when the directory has one.
//
// Metrics: gatehouse_certificate_reloads_total{source="directory",
// result="success"} and the expiry gauge follow each certificate installed.
// certwatcher keeps the previous pair on a broken rewrite but reports it only
// through its own certwatcher_read_certificate_errors_total (and a log line),
// so result="error" is not counted for this source after startup.
type Dir struct {
	caHolder
	log                       logr.Logger
	certPath, keyPath, caPath string
	watcher                   *certwatcher.CertWatcher
	// interval is how often the files are read even without an event.
	interval time.Duration
}

// NewDir loads the pair from dir. It fails when either file is missing, empty
// or unparsable, naming the file.
func NewDir(dir string, log logr.Logger) (*Dir, error) {
	d := &Dir{
		log:      log,
		certPath: filepath.Join(dir, "tls.crt"),
		keyPath:  filepath.Join(dir, "tls.key"),
		caPath:   filepath.Join(dir, "ca.crt"),
		interval: 10 * time.Second,
	}
	// certwatcher's own errors do not say which file is wrong; check first.
	certPEM, err := os.ReadFile(d.certPath)
	if err != nil {
		metrics.CertificateReloads.WithLabelValues("directory", "error").Inc()
		return nil, fmt.Errorf("read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(d.keyPath)
	if err != nil {
		metrics.CertificateReloads.WithLabelValues("directory", "error").Inc()
		return nil, fmt.Errorf("read private key: %w", err)
	}
	if _, err := ParseKeyPair(certPEM, keyPEM, d.certPath, d.keyPath); err != nil {
		metrics.CertificateReloads.WithLabelValues("directory", "error").Inc()
		return nil, err
	}
	d.watcher, err = certwatcher.New(d.certPath, d.keyPath)
	if err != nil {
		return nil, fmt.Errorf("read certificate %s and key %s: %w", d.certPath, d.keyPath, err)
	}
	// RegisterCallback calls back at once with the pair just read, then
	// (from certwatcher's goroutines) after each change.
	d.watcher.RegisterCallback(func(pair tls.Certificate) {
		recordLoaded("directory", &pair, log)
		d.readCA()
	})
	return d, nil
}

func (d *Dir) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	pair, err := d.watcher.GetCertificate(hello)
	if err == nil && pair == nil {
		err = errors.New("no serving certificate loaded")
	}
	return pair, err
}

// readCA publishes ca.crt; a directory without one (a plain serving pair)
// leaves the bundle unknown.
func (d *Dir) readCA() {
	bundle, err := os.ReadFile(d.caPath)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			d.log.Error(err, "read CA bundle")
		}
		return
	}
	d.setCABundle(bundle, d.caPath, d.log)
}

// Start watches the files until ctx ends. ca.crt is re-read on the poll
// interval as well, because certwatcher only reports the serving pair.
func (d *Dir) Start(ctx context.Context) error {
	d.watcher.WithWatchInterval(d.interval)
	go func() {
		ticker := time.NewTicker(d.interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				d.readCA()
			}
		}
	}()
	return d.watcher.Start(ctx)
}
