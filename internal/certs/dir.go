package certs

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
)

// Dir serves tls.crt and tls.key from a directory and reloads them when the
// files change. It watches the directory rather than the files because
// Kubernetes updates mounted Secrets by swapping a symlink, and polls as well
// because some volume types emit no events.
type Dir struct {
	holder
	certPath, keyPath string
	poll              time.Duration
}

// NewDir loads the pair from dir. It fails when either file is missing, empty
// or unparsable, naming the file.
func NewDir(dir string, log logr.Logger) (*Dir, error) {
	d := &Dir{
		holder:   holder{source: "directory", log: log},
		certPath: filepath.Join(dir, "tls.crt"),
		keyPath:  filepath.Join(dir, "tls.key"),
		poll:     10 * time.Second,
	}
	pair, err := d.read()
	if err != nil {
		return nil, err
	}
	d.store(pair, nil)
	return d, nil
}

func (d *Dir) read() (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(d.certPath)
	if err != nil {
		return nil, fmt.Errorf("read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(d.keyPath)
	if err != nil {
		return nil, fmt.Errorf("read private key: %w", err)
	}
	return ParseKeyPair(certPEM, keyPEM, d.certPath, d.keyPath)
}

// Start watches the directory until ctx ends.
func (d *Dir) Start(ctx context.Context) error {
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch certificate directory: %w", err)
	}
	defer watcher.Close()
	if err := watcher.Add(filepath.Dir(d.certPath)); err != nil {
		return fmt.Errorf("watch certificate directory: %w", err)
	}
	ticker := time.NewTicker(d.poll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case _, ok := <-watcher.Events:
			if !ok {
				return nil
			}
		case err, ok := <-watcher.Errors:
			if !ok {
				return nil
			}
			d.log.Error(err, "certificate directory watch error")
			continue
		}
		d.store(d.read())
	}
}
