package configcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// haptic's store: on-demand (a haptic config's Secrets, in its ssl
// library) names objects Gatehouse does not watch: haptic's controller
// fetches one when a template asks for it by namespace and name, rather
// than caching every Secret of the cluster. Gatehouse does the same, in
// its own order of things: a rendering runs in a confined worker without
// the API, so it records the keys it asked of an on-demand store that the
// store did not hold (render.Missed); the module then fetches each, for
// the config's author only, and renders again (onDemandRounds at most).
//
// Who may have what read: an object is fetched for a config only when its
// author may get it (a SubjectAccessReview, through the shared access
// cache); anything else, like an object that does not exist, is absent to
// the templates (haptic's own templates then fail() with "not found"). A
// config without a verified author has nothing fetched. Gatehouse needs
// get on the kind (the chart's modules.configcheck.onDemandResources);
// without it every object is absent, and the log says why once.
//
// Freshness and load: the live reads are documented ones
// (docs/configcheck.md). What was fetched, found or absent, serves
// renderings for onDemandTTL; then a decision fetches again the objects
// held longest (onDemandRefresh of them at most, before rendering), and
// an absence is forgotten, so that a rendering asking again fetches it.
// A decision fetches at most onDemandFetchBudget objects in all: the keys
// come from the templates and from what tenants write (an Ingress names
// its TLS Secret), and no write may make Gatehouse read the API server
// without bound. A denial's confirmation renders from an uncached set:
// everything it needs fetched anew (onDemandConfirmBudget), so a Secret
// created a moment before the Ingress naming it is found there, and a
// stale object never stands behind a denial.

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

// onDemandFetch returns the object of a watched resource, as the store
// holds it, or nil when it is absent to the config (missing, or not the
// author's to read).
type onDemandFetch func(ctx context.Context, w *spec.Watched, namespace, name string) (map[string]any, error)

// onDemandSet is one config's on-demand stores.
type onDemandSet struct {
	watched map[string]*spec.Watched
	fetch   onDemandFetch
	// cached: objects fetched serve later renderings (onDemandTTL);
	// without, every rendering fetches what it asks (a confirmation).
	cached bool
	now    func() time.Time

	mu      sync.Mutex
	stores  map[string]*render.MemoryStore
	entries map[onDemandKey]onDemandEntry
	bytes   int
}

type onDemandKey struct {
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

// newOnDemandSet holds c's on-demand watched resources (nil when it has
// none), fetched with fetch.
func newOnDemandSet(c *spec.Compiled, fetch onDemandFetch, cached bool) (*onDemandSet, error) {
	set := &onDemandSet{watched: map[string]*spec.Watched{}, fetch: fetch, cached: cached, now: time.Now,
		stores: map[string]*render.MemoryStore{}, entries: map[onDemandKey]onDemandEntry{}}
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
func (s *onDemandSet) uncached() *onDemandSet {
	if s == nil {
		return nil
	}
	out := &onDemandSet{watched: s.watched, fetch: s.fetch, now: s.now,
		stores: map[string]*render.MemoryStore{}, entries: map[onDemandKey]onDemandEntry{}}
	for name, w := range s.watched {
		out.stores[name], _ = render.NewMemoryStore(w.Indexer) // the indexer compiled once already
	}
	return out
}

// addStores puts the set's stores into stores.
func (s *onDemandSet) addStores(stores map[string]render.IndexedStore) {
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
func (s *onDemandSet) refresh(ctx context.Context, budget *int, decided map[onDemandKey]bool) (bool, error) {
	s.mu.Lock()
	now := s.now()
	var stale []onDemandKey
	for key, e := range s.entries {
		switch {
		case now.Sub(e.fetched) < onDemandTTL:
		case e.absent:
			delete(s.entries, key)
		default:
			stale = append(stale, key)
		}
	}
	slices.SortFunc(stale, func(a, b onDemandKey) int { return s.entries[a].fetched.Compare(s.entries[b].fetched) })
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

func (s *onDemandSet) dropLocked(key onDemandKey) {
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
func (s *onDemandSet) fetchMissed(ctx context.Context, missed map[string][][]string, budget *int, decided map[onDemandKey]bool) (bool, error) {
	changed := false
	for _, watched := range slices.Sorted(maps.Keys(missed)) {
		if s.watched[watched] == nil {
			continue
		}
		for _, keys := range missed[watched] {
			if len(keys) != 2 {
				continue // compile requires indexBy [metadata.namespace, metadata.name]
			}
			key := onDemandKey{watched: watched, NamespacedName: types.NamespacedName{Namespace: keys[0], Name: keys[1]}}
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
func (s *onDemandSet) knownAbsent(key onDemandKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	return ok && e.absent
}

// fetchOne fetches key, taking one of budget, and holds what it found; it
// reports whether its store changed.
func (s *onDemandSet) fetchOne(ctx context.Context, key onDemandKey, budget *int, decided map[onDemandKey]bool) (bool, error) {
	*budget--
	decided[key] = true
	obj, err := s.fetch(ctx, s.watched[key.watched], key.Namespace, key.Name)
	if err != nil {
		return false, &onDemandError{watched: key.watched, key: key.NamespacedName, err: err}
	}
	if obj == nil {
		return s.markAbsent(key), nil
	}
	return s.put(key, obj), nil
}

// markAbsent records key as absent (dropping what was held of it) and
// reports whether its store changed.
func (s *onDemandSet) markAbsent(key onDemandKey) bool {
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
func (s *onDemandSet) put(key onDemandKey, obj map[string]any) bool {
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
		oldest := onDemandKey{}
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

// onDemandError is a fetch that could not say whether an object exists
// (the API server unreachable): the decision is undecided, never a denial
// for a missing object.
type onDemandError struct {
	watched string
	key     types.NamespacedName
	err     error
}

func (e *onDemandError) Error() string {
	return fmt.Sprintf("configcheck: %s %s (store: on-demand) could not be fetched: %v", e.watched, e.key, e.err)
}

func (e *onDemandError) Unwrap() error { return e.err }

type onDemandContextKey struct{}

// withOnDemand has renderings under ctx fetch into set.
func withOnDemand(ctx context.Context, set *onDemandSet) context.Context {
	if set == nil {
		return ctx
	}
	return context.WithValue(ctx, onDemandContextKey{}, set)
}

func onDemandFrom(ctx context.Context) *onDemandSet {
	set, _ := ctx.Value(onDemandContextKey{}).(*onDemandSet)
	return set
}

// renderFetching renders data with c, fetching what its on-demand stores missed
// into ctx's set and rendering again, onDemandRounds at most. data's
// on-demand stores must be the set's (addStores).
func renderFetching(ctx context.Context, c *spec.Compiled, data render.Data) (render.Output, error) {
	set := onDemandFrom(ctx)
	if set == nil {
		return c.Renderer.Render(ctx, data)
	}
	budget := onDemandFetchBudget
	if !set.cached {
		budget = onDemandConfirmBudget
	}
	decided := map[onDemandKey]bool{}
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

// onDemandFetcher fetches for a config whose author is author (hasAuthor
// false: nobody's, so nothing is fetched): after a SubjectAccessReview of
// the author's get, a live read by Gatehouse.
func (m *Module) onDemandFetcher(author authenticationv1.UserInfo, hasAuthor bool) onDemandFetch {
	return func(ctx context.Context, w *spec.Watched, namespace, name string) (map[string]any, error) {
		if !hasAuthor || namespace == "" || name == "" {
			return nil, nil
		}
		gvk, _, err := m.resolve(w.GVR)
		if err != nil {
			return nil, nil // a kind not served holds nothing
		}
		may, err := m.access.Reviewer(author)(ctx, authz.Question{Verb: "get", Group: w.GVR.Group, Resource: w.GVR.Resource, Namespace: namespace, Name: name})
		if err != nil {
			return nil, err
		}
		if !may {
			return nil, nil
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		err = m.host.APIReader().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case apierrors.IsForbidden(err):
			m.onDemandForbidden.Do(func() {
				logf.FromContext(ctx).Error(err, "configcheck: Gatehouse may not get the objects of an on-demand watched resource, so templates find none; grant get on it (the chart's modules.configcheck.onDemandResources)",
					"resource", w.GVR.String())
			})
			return nil, nil
		case err != nil:
			return nil, err
		}
		if raw, err := json.Marshal(obj.Object); err != nil || exceeds(w.Bounds, measureRaw(raw)) {
			return nil, nil // as a watched store refuses it
		}
		return w.Stored(obj.Object), nil
	}
}
