package render

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// A store of haptic's store: on-demand holds only the objects fetched so
// far: haptic's controller fetches such an object (a Secret) when a
// template asks for it by its whole key, rather than caching every one of
// the kind. A rendering cannot fetch (it runs in a confined worker, without
// the API): it records the whole keys asked of an on-demand store that the
// store did not hold, and its caller fetches those and renders again.

// MaxMissed bounds the keys one rendering records: a template asking for
// more objects than this in one rendering is asking for a listing, which
// an on-demand store is not.
const MaxMissed = 64

// Missed collects the whole keys a rendering's templates asked of its
// on-demand stores that the stores did not hold. It is safe for
// concurrent use.
type Missed struct {
	mu   sync.Mutex
	keys map[string]map[string][]string // watched -> joined keys -> keys
	n    int
	// Overflow says more than MaxMissed keys were asked.
	overflow bool
}

// Add records that watched did not hold keys.
func (m *Missed) Add(watched string, keys []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	joined := strings.Join(keys, "\x00")
	if _, seen := m.keys[watched][joined]; seen {
		return
	}
	if m.n >= MaxMissed {
		m.overflow = true
		return
	}
	if m.keys == nil {
		m.keys = map[string]map[string][]string{}
	}
	if m.keys[watched] == nil {
		m.keys[watched] = map[string][]string{}
	}
	m.keys[watched][joined] = slices.Clone(keys)
	m.n++
}

// Keys returns the keys recorded, by watched name, each store's in a
// stable order.
func (m *Missed) Keys() map[string][][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][][]string, len(m.keys))
	for watched, byJoined := range m.keys {
		joined := make([]string, 0, len(byJoined))
		for j := range byJoined {
			joined = append(joined, j)
		}
		slices.Sort(joined)
		for _, j := range joined {
			out[watched] = append(out[watched], byJoined[j])
		}
	}
	return out
}

// Overflowed says whether more keys were asked than were recorded.
func (m *Missed) Overflowed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.overflow
}

// RecordMisses returns data with each store named in data.OnDemand
// recording into data.Missed the whole keys it was asked and did not hold.
// Without Missed, data is returned as it is. Every engine's Render calls
// it first, so that a rendering records alike in a worker and in process.
func RecordMisses(data Data) Data {
	if data.Missed == nil || len(data.OnDemand) == 0 {
		return data
	}
	resources := make(map[string]Store, len(data.Resources))
	for name, s := range data.Resources {
		resources[name] = s
		if data.OnDemand[name] && s != nil {
			resources[name] = &recordingStore{Store: s, watched: name, missed: data.Missed}
		}
	}
	data.Resources = resources
	return data
}

// recordingStore is an on-demand store as a template sees it.
type recordingStore struct {
	Store
	watched string
	missed  *Missed
}

// GetSingle records a miss of a whole key: only a whole key names one
// object to fetch.
func (s *recordingStore) GetSingle(keys ...any) (map[string]any, error) {
	obj, err := s.Store.GetSingle(keys...)
	if err == nil && obj == nil {
		s.record(keys)
	}
	return obj, err
}

// Fetch records a miss of a whole key as GetSingle does (haptic's
// GetSingle is a Fetch of one).
func (s *recordingStore) Fetch(keys ...any) ([]map[string]any, error) {
	objs, err := s.Store.Fetch(keys...)
	if err == nil && len(objs) == 0 {
		s.record(keys)
	}
	return objs, err
}

func (s *recordingStore) record(keys []any) {
	indexed, ok := s.Store.(IndexedStore)
	if !ok || len(keys) != len(indexed.Indexer().Expressions()) {
		return
	}
	text := make([]string, len(keys))
	for i, k := range keys {
		text[i] = fmt.Sprint(k)
	}
	s.missed.Add(s.watched, text)
}

// Indexer is the store's, so that an overlay keys objects alike.
func (s *recordingStore) Indexer() *Indexer {
	if indexed, ok := s.Store.(IndexedStore); ok {
		return indexed.Indexer()
	}
	return nil
}
