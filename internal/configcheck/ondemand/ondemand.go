package ondemand

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// onDemandTTL is how long a fetched object serves renderings.
const onDemandTTL = 30 * time.Second

// onDemandRounds bounds the renderings of one decision: a template that
// asks for an object only once it has another (a CA named in a
// certificate's Secret) needs one round per step.
const onDemandRounds = 4

// onDemandMaxBytes bounds what one config holds fetched (its JSON), the
// oldest fetched going first.
const onDemandMaxBytes = 8 << 20

// Fetches of one decision: at most onDemandFetchBudget in all, of which
// at most onDemandRefresh renew what is held; a confirmation, which holds
// nothing beforehand, may fetch what all its rounds ask.
const (
	onDemandFetchBudget   = render.MaxMissed
	onDemandRefresh       = onDemandFetchBudget / 4
	onDemandConfirmBudget = onDemandRounds * render.MaxMissed
)

// Fetch returns the object of a watched resource, as the store
// holds it, or nil when it is absent to the config (missing, or not the
// author's to read).
type Fetch func(ctx context.Context, w *spec.Watched, namespace, name string) (map[string]any, error)

// Set is one config's on-demand stores.
type Set struct {
	watched map[string]*spec.Watched
	fetch   Fetch
	// cached: objects fetched serve later renderings (onDemandTTL);
	// without, every rendering fetches what it asks (a confirmation).
	cached bool
	now    func() time.Time

	mu      sync.Mutex
	stores  map[string]*render.MemoryStore
	entries map[Key]onDemandEntry
	bytes   int
}

type Key struct {
	watched string
	types.NamespacedName
}

type onDemandEntry struct {
	fetched time.Time
	bytes   int
	// absent: found missing, or not the author's to read; nothing of it
	// is in the store.
	absent bool
}

// NewSet holds c's on-demand watched resources (nil when it has
// none), fetched with fetch.
func NewSet(c *spec.Compiled, fetch Fetch, cached bool) (*Set, error) {
	set := &Set{watched: map[string]*spec.Watched{}, fetch: fetch, cached: cached, now: time.Now,
		stores: map[string]*render.MemoryStore{}, entries: map[Key]onDemandEntry{}}
	for name, w := range c.Watched {
		if !w.OnDemand {
			continue
		}
		store, err := render.NewMemoryStore(w.Indexer)
		if err != nil {
			return nil, err
		}
		set.watched[name], set.stores[name] = w, store
	}
	if len(set.watched) == 0 {
		return nil, nil
	}
	return set, nil
}

// uncached is a set of the same resources with nothing fetched yet, that
// keeps nothing: a confirmation's.
func (s *Set) Uncached() *Set {
	if s == nil {
		return nil
	}
	out := &Set{watched: s.watched, fetch: s.fetch, now: s.now,
		stores: map[string]*render.MemoryStore{}, entries: map[Key]onDemandEntry{}}
	for name, w := range s.watched {
		out.stores[name], _ = render.NewMemoryStore(w.Indexer) // the indexer compiled once already
	}
	return out
}

// addStores puts the set's stores into stores.
func (s *Set) AddStores(stores map[string]render.IndexedStore) {
	if s == nil {
		return
	}
	for name, store := range s.stores {
		stores[name] = store
	}
}

// refresh forgets the absences older than onDemandTTL and fetches again,
// oldest first, up to onDemandRefresh of the objects held longer; it
// reports whether a store changed. An uncached set holds nothing.
func (s *Set) refresh(ctx context.Context, budget *int, decided map[Key]bool) (bool, error) {
	s.mu.Lock()
	now := s.now()
	var stale []Key
	for key, e := range s.entries {
		switch {
		case now.Sub(e.fetched) < onDemandTTL:
		case e.absent:
			delete(s.entries, key)
		default:
			stale = append(stale, key)
		}
	}
	slices.SortFunc(stale, func(a, b Key) int { return s.entries[a].fetched.Compare(s.entries[b].fetched) })
	s.mu.Unlock()
	changed := false
	for i, key := range stale {
		if i == onDemandRefresh || *budget == 0 {
			break
		}
		c, err := s.fetchOne(ctx, key, budget, decided)
		if err != nil {
			return changed, err
		}
		changed = changed || c
	}
	return changed, nil
}

func (s *Set) dropLocked(key Key) {
	if !s.entries[key].absent {
		s.stores[key.watched].Delete(key.Namespace, key.Name)
	}
	s.bytes -= s.entries[key].bytes
	delete(s.entries, key)
}

// fetchMissed fetches what a rendering missed, within budget, and
// reports whether any store changed. decided holds the keys fetched in
// this decision: a rendering asking again for one found absent is not a
// reason to render again.
func (s *Set) fetchMissed(ctx context.Context, missed map[string][][]string, budget *int, decided map[Key]bool) (bool, error) {
	changed := false
	for _, watched := range slices.Sorted(maps.Keys(missed)) {
		if s.watched[watched] == nil {
			continue
		}
		for _, keys := range missed[watched] {
			if len(keys) != 2 {
				continue // compile requires indexBy [metadata.namespace, metadata.name]
			}
			key := Key{watched: watched, NamespacedName: types.NamespacedName{Namespace: keys[0], Name: keys[1]}}
			if decided[key] || s.knownAbsent(key) {
				continue
			}
			if *budget == 0 {
				return changed, nil
			}
			c, err := s.fetchOne(ctx, key, budget, decided)
			if err != nil {
				return changed, err
			}
			changed = changed || c
		}
	}
	return changed, nil
}

// knownAbsent says whether key was found absent within onDemandTTL.
func (s *Set) knownAbsent(key Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	return ok && e.absent
}

// fetchOne fetches key, taking one of budget, and holds what it found; it
// reports whether its store changed.
func (s *Set) fetchOne(ctx context.Context, key Key, budget *int, decided map[Key]bool) (bool, error) {
	*budget--
	decided[key] = true
	obj, err := s.fetch(ctx, s.watched[key.watched], key.Namespace, key.Name)
	if err != nil {
		return false, &Error{watched: key.watched, key: key.NamespacedName, err: err}
	}
	if obj == nil {
		return s.markAbsent(key), nil
	}
	return s.put(key, obj), nil
}

// markAbsent records key as absent (dropping what was held of it) and
// reports whether its store changed.
func (s *Set) markAbsent(key Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := false
	if e, ok := s.entries[key]; ok {
		held = !e.absent
		s.dropLocked(key)
	}
	if s.cached {
		s.entries[key] = onDemandEntry{fetched: s.now(), absent: true}
	}
	return held
}

// put stores obj under key, keeping the set within onDemandMaxBytes (the
// oldest fetched go first); it reports whether obj is held.
func (s *Set) put(key Key, obj map[string]any) bool {
	data, err := json.Marshal(obj)
	if err != nil || len(data) > onDemandMaxBytes {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, held := s.entries[key]; held {
		s.dropLocked(key)
	}
	for s.bytes+len(data) > onDemandMaxBytes && s.bytes > 0 {
		oldest := Key{}
		var at time.Time
		for k, e := range s.entries {
			if !e.absent && (at.IsZero() || e.fetched.Before(at)) {
				oldest, at = k, e.fetched
			}
		}
		s.dropLocked(oldest)
	}
	if err := s.stores[key.watched].Upsert(obj); err != nil {
		return false
	}
	s.entries[key] = onDemandEntry{fetched: s.now(), bytes: len(data)}
	s.bytes += len(data)
	return true
}

// Error is a fetch that could not say whether an object exists
// (the API server unreachable): the decision is undecided, never a denial
// for a missing object.
type Error struct {
	watched string
	key     types.NamespacedName
	err     error
}

func (e *Error) Error() string {
	return fmt.Sprintf("configcheck: %s %s (store: on-demand) could not be fetched: %v", e.watched, e.key, e.err)
}

func (e *Error) Unwrap() error { return e.err }

type onDemandContextKey struct{}

// WithSet has renderings under ctx fetch into set.
func WithSet(ctx context.Context, set *Set) context.Context {
	if set == nil {
		return ctx
	}
	return context.WithValue(ctx, onDemandContextKey{}, set)
}

func onDemandFrom(ctx context.Context) *Set {
	set, _ := ctx.Value(onDemandContextKey{}).(*Set)
	return set
}

// Render renders data with c, fetching what its on-demand stores missed
// into ctx's set and rendering again, onDemandRounds at most. data's
// on-demand stores must be the set's (addStores).
func Render(ctx context.Context, c *spec.Compiled, data render.Data) (render.Output, error) {
	set := onDemandFrom(ctx)
	if set == nil {
		return c.Renderer.Render(ctx, data)
	}
	budget := onDemandFetchBudget
	if !set.cached {
		budget = onDemandConfirmBudget
	}
	decided := map[Key]bool{}
	if _, err := set.refresh(ctx, &budget, decided); err != nil {
		return render.Output{}, err
	}
	data.OnDemand = make(map[string]bool, len(set.watched))
	for name := range set.watched {
		data.OnDemand[name] = true
	}
	for round := 1; ; round++ {
		data.Missed = &render.Missed{}
		out, err := c.Renderer.Render(ctx, data)
		if round == onDemandRounds || ctx.Err() != nil {
			return out, err
		}
		changed, ferr := set.fetchMissed(ctx, data.Missed.Keys(), &budget, decided)
		if ferr != nil {
			return render.Output{}, ferr
		}
		if !changed {
			return out, err
		}
	}
}
