package records

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// unknownReloadEvery bounds the reloads a record naming an unknown key
// causes: one read per second, whatever a client writes.
const unknownReloadEvery = time.Second

// Store is this install's keyring, kept current: it signs and verifies
// records (module.Records) and, run with the manager, reads the keys again
// every Options.ReloadEvery on every replica.
type Store struct {
	opts Options
	read func(ctx context.Context) ([]Key, error)
	ring atomic.Pointer[Keyring]
	now  func() time.Time

	mu         sync.Mutex
	lastReload time.Time
}

var _ manager.LeaderElectionRunnable = (*Store)(nil)

func newStore(opts Options, read func(context.Context) ([]Key, error)) *Store {
	opts.setDefaults()
	return &Store{opts: opts, read: read, now: time.Now}
}

// load reads the keys and installs them; a read that fails or finds none
// keeps the previous ring.
func (s *Store) load(ctx context.Context) error {
	keys, err := s.read(ctx)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return errors.New("no records key found")
	}
	s.ring.Store(NewKeyring(keys, s.now(), s.opts.Grace))
	return nil
}

// Sign signs claims under purpose ("" when no key is loaded).
func (s *Store) Sign(purpose string, claims []byte) string {
	return s.ring.Load().Sign(purpose, claims)
}

// Verify says whether sig is this install's signature of claims under
// purpose, and whether its key is the one that signs now. A signature
// naming a key not loaded makes the store read the keys again first (at
// most once per second): another replica may have loaded a newer one.
func (s *Store) Verify(purpose string, claims []byte, sig string) (ok, current bool) {
	ok, current, known := s.ring.Load().Verify(purpose, claims, sig)
	if known || sig == "" {
		return ok, current
	}
	s.mu.Lock()
	if s.now().Sub(s.lastReload) >= unknownReloadEvery {
		s.lastReload = s.now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.load(ctx)
		cancel()
	}
	s.mu.Unlock()
	ok, current, _ = s.ring.Load().Verify(purpose, claims, sig)
	return ok, current
}

// Start reads the keys every ReloadEvery until ctx ends.
func (s *Store) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("records")
	t := time.NewTicker(s.opts.ReloadEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := s.load(ctx); err != nil && ctx.Err() == nil {
				log.Error(err, "records keys not reloaded; keeping the loaded ones")
			}
		}
	}
}

// NeedLeaderElection: every replica verifies, so every replica reloads.
func (s *Store) NeedLeaderElection() bool { return false }

func logOrDiscard(ctx context.Context) logr.Logger { return logf.FromContext(ctx).WithName("records") }
