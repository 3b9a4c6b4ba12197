package certs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
)

// CAFile is a CA bundle kept in a file by someone other than Gatehouse
// (--manage-webhooks-ca-file: a CA rotated out of cluster), followed as the
// serving certificate is: re-read on every change of its directory
// (fsnotify, which sees a mounted volume's symlink swap as an event in the
// directory) and on a poll, because not every volume type reports events.
// It implements CABundler, so the webhook configurations' caBundle follows
// it. A broken rewrite keeps the previous bundle (caHolder): a caBundle
// that verifies nothing would cut the API server off from every replica.
type CAFile struct {
	caHolder
	path string
	log  logr.Logger
	// interval is how often the file is read even without an event.
	interval time.Duration
}

// NewCAFile reads the bundle at path; it fails when the file is missing or
// holds no CA certificate, naming it.
func NewCAFile(path string, log logr.Logger) (*CAFile, error) {
	f := &CAFile{path: path, log: log, interval: 10 * time.Second}
	bundle, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	if _, err := ParseCABundle(bundle); err != nil {
		return nil, fmt.Errorf("CA bundle %s: %w", path, err)
	}
	f.setCABundle(bundle, path, log)
	return f, nil
}

// reload reads the file and publishes it when it changed and parses.
func (f *CAFile) reload() {
	bundle, err := os.ReadFile(f.path)
	if err != nil {
		f.log.Error(err, "CA bundle not reloaded; keeping the previous one")
		return
	}
	f.setCABundle(bundle, f.path, f.log)
}

// Start follows the file until ctx ends. Without fsnotify (no inotify
// instances left, say) the poll alone follows it.
func (f *CAFile) Start(ctx context.Context) error {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w, err := fsnotify.NewWatcher(); err != nil {
		f.log.Error(err, "CA bundle followed by polling only", "interval", f.interval)
	} else {
		defer func() { _ = w.Close() }() // nothing to do about a failed close
		// The directory, not the file: an atomic replace (rename, or a
		// ConfigMap volume's ..data symlink swap) gives the path a new inode
		// that a watch on the old one would never report.
		if err := w.Add(filepath.Dir(f.path)); err != nil {
			f.log.Error(err, "CA bundle followed by polling only", "interval", f.interval)
		} else {
			events, errs = w.Events, w.Errors
		}
	}
	// A change between NewCAFile and the watch is not missed.
	f.reload()
	ticker := time.NewTicker(f.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-events:
			f.reload()
		case err := <-errs:
			f.log.Error(err, "watching the CA bundle's directory")
		case <-ticker.C:
			f.reload()
		}
	}
}

// NeedLeaderElection is false: every replica keeps the bundle current, so
// that a new leader writes the current one from its first reconciliation.
func (f *CAFile) NeedLeaderElection() bool { return false }
