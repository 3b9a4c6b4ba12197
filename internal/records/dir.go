package records

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// NewDir keeps the keys in files of dir (key-*), for `make run` and a
// single process: it creates dir (0700) and a key (0600) when there is
// none, adds one when the newest is older than RotateEvery, and drops
// those past Keep, when it starts. A directory Gatehouse may not write (a
// mounted Secret) is only read: its keys are rotated by whoever writes it.
func NewDir(ctx context.Context, dir string, opts Options) (*Store, error) {
	s := newStore(opts, func(context.Context) ([]Key, error) { return readDir(dir) })
	keys, err := readDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	next, changed, _, err := Plan(keys, time.Now(), s.opts)
	if err != nil {
		return nil, err
	}
	if changed {
		if err := writeDir(dir, keys, next); err != nil {
			if len(keys) == 0 {
				return nil, fmt.Errorf("records key directory %s: %w", dir, err)
			}
			logOrDiscard(ctx).Error(err, "records keys not rotated; keeping the present ones", "dir", dir)
		}
	}
	if err := s.load(ctx); err != nil {
		return nil, fmt.Errorf("records key directory %s: %w", dir, err)
	}
	return s, nil
}

func readDir(dir string) ([]Key, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), keyPrefix) {
			continue
		}
		// A key may be a symlink (a mounted Secret's files are).
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		data[e.Name()] = b
	}
	return ParseKeys(data), nil
}

func writeDir(dir string, old, next []Key) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, k := range next {
		kept[k.ID] = true
		path := filepath.Join(dir, k.ID)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, k.Secret, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	for _, k := range old {
		if !kept[k.ID] {
			if err := os.Remove(filepath.Join(dir, k.ID)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}
