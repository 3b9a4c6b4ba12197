package render

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Store is what a template sees as .resources.<watched name>. Results are
// ordered by namespace, then name, so a rendering never depends on map or
// informer order.
type Store interface {
	// List returns every object.
	List() []map[string]any
	// Fetch returns the objects whose index keys start with keys, in the
	// order of indexBy: with indexBy [namespace, name], Fetch ns returns a
	// namespace's objects. More keys than indexBy expressions is an error.
	Fetch(keys ...any) ([]map[string]any, error)
	// GetSingle returns the one object Fetch would return, or nil when there
	// is none; several matching objects are an error naming the keys.
	GetSingle(keys ...any) (map[string]any, error)
}

// IndexedStore is a Store that exposes how it is indexed, so that an
// overlay keys a proposed object the same way.
type IndexedStore interface {
	Store
	Indexer() *Indexer
}

// MemoryStore holds the objects of one watched resource in memory, indexed
// by its Indexer. It is safe for concurrent use: writers (later, an
// informer's event handler) replace index buckets copy-on-write, so a slice
// handed to a template is never changed under it.
type MemoryStore struct {
	indexer *Indexer
	// id names the store to a rendering process holding a copy of it (see
	// Snapshot); it never changes.
	id uint64

	mu sync.RWMutex
	// version counts the changes (Replace, Upsert, a Delete that removed
	// something), so a copy elsewhere knows whether it is still current.
	version uint64
	// keysByIdentity remembers each stored object's index keys, so an update
	// or delete finds the buckets it was in.
	keysByIdentity map[identity][]string
	// buckets[k] maps the first k index keys (encoded by joinKeys) to the
	// objects having them, sorted by identity. buckets[0][""] holds every
	// object.
	buckets []map[string][]map[string]any
}

var _ IndexedStore = (*MemoryStore)(nil)

// NewMemoryStore returns a store indexed by indexer, holding objs.
func NewMemoryStore(indexer *Indexer, objs ...map[string]any) (*MemoryStore, error) {
	store := &MemoryStore{indexer: indexer, id: storeIDs.Add(1)}
	if err := store.Replace(objs); err != nil {
		return nil, err
	}
	return store, nil
}

// Indexer returns the store's indexer.
func (s *MemoryStore) Indexer() *Indexer { return s.indexer }

// Replace makes objs the store's whole content (an informer's initial list or
// resync). It sorts each bucket once instead of inserting one by one.
func (s *MemoryStore) Replace(objs []map[string]any) error {
	keysByIdentity := make(map[identity][]string, len(objs))
	stored := make(map[identity]map[string]any, len(objs))
	for _, obj := range objs {
		normalized := NormalizeObject(obj)
		id := identityOf(normalized)
		keys, err := s.indexer.IndexKeys(normalized)
		if err != nil {
			return fmt.Errorf("index %s: %w", id, err)
		}
		// A later object of the same identity replaces an earlier one, as
		// successive informer events would.
		stored[id] = normalized
		keysByIdentity[id] = keys
	}

	buckets := s.newBuckets()
	for id, obj := range stored {
		keys := keysByIdentity[id]
		for depth := range buckets {
			bucketKey := joinKeys(keys[:depth])
			buckets[depth][bucketKey] = append(buckets[depth][bucketKey], obj)
		}
	}
	for _, level := range buckets {
		for _, bucket := range level {
			sort.Slice(bucket, func(i, j int) bool {
				return identityOf(bucket[i]).less(identityOf(bucket[j]))
			})
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.keysByIdentity = keysByIdentity
	s.buckets = buckets
	s.version++
	return nil
}

// Upsert adds obj or replaces the stored object with its namespace and name.
func (s *MemoryStore) Upsert(obj map[string]any) error {
	normalized := NormalizeObject(obj)
	id := identityOf(normalized)
	keys, err := s.indexer.IndexKeys(normalized)
	if err != nil {
		return fmt.Errorf("index %s: %w", id, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if oldKeys, ok := s.keysByIdentity[id]; ok {
		s.removeFromBuckets(id, oldKeys)
	}
	s.keysByIdentity[id] = keys
	for depth := range s.buckets {
		bucketKey := joinKeys(keys[:depth])
		s.buckets[depth][bucketKey] = insertSorted(s.buckets[depth][bucketKey], normalized)
	}
	s.version++
	return nil
}

// Delete removes the object with that namespace and name and reports
// whether it was stored.
func (s *MemoryStore) Delete(namespace, name string) bool {
	id := identity{namespace: namespace, name: name}
	s.mu.Lock()
	defer s.mu.Unlock()
	keys, ok := s.keysByIdentity[id]
	if !ok {
		return false
	}
	s.removeFromBuckets(id, keys)
	delete(s.keysByIdentity, id)
	s.version++
	return true
}

// List returns every object, ordered by namespace and name.
func (s *MemoryStore) List() []map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return clip(s.buckets[0][""])
}

// Fetch returns the objects whose first index keys are keys.
func (s *MemoryStore) Fetch(keys ...any) ([]map[string]any, error) {
	lookup, err := s.indexer.lookupKeys("Fetch", keys)
	if err != nil {
		return nil, err
	}
	return s.fetch(lookup), nil
}

// GetSingle returns the object the keys identify, or nil.
func (s *MemoryStore) GetSingle(keys ...any) (map[string]any, error) {
	return getSingle(s, keys)
}

func (s *MemoryStore) fetch(keys []string) []map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return clip(s.buckets[len(keys)][joinKeys(keys)])
}

func (s *MemoryStore) newBuckets() []map[string][]map[string]any {
	buckets := make([]map[string][]map[string]any, len(s.indexer.paths)+1)
	for depth := range buckets {
		buckets[depth] = make(map[string][]map[string]any)
	}
	return buckets
}

// removeFromBuckets takes the object id out of every bucket its keys put it
// in. The caller holds the write lock.
func (s *MemoryStore) removeFromBuckets(id identity, keys []string) {
	for depth := range s.buckets {
		bucketKey := joinKeys(keys[:depth])
		remaining := withoutIdentity(s.buckets[depth][bucketKey], id)
		if len(remaining) == 0 {
			delete(s.buckets[depth], bucketKey)
			continue
		}
		s.buckets[depth][bucketKey] = remaining
	}
}

// getSingle is GetSingle for any Store: at most one object may match.
func getSingle(store Store, keys []any) (map[string]any, error) {
	matches, err := store.Fetch(keys...)
	if err != nil {
		return nil, fmt.Errorf("GetSingle: %w", err)
	}
	switch len(matches) {
	case 0:
		return nil, nil
	case 1:
		return matches[0], nil
	default:
		return nil, fmt.Errorf("GetSingle %s: %d objects match, expected at most one (%s)",
			formatKeys(keys), len(matches), identitiesOf(matches))
	}
}

func formatKeys(keys []any) string {
	quoted := make([]string, len(keys))
	for i, key := range keys {
		quoted[i] = fmt.Sprintf("%q", fmt.Sprint(key))
	}
	return strings.Join(quoted, " ")
}

func identitiesOf(objs []map[string]any) string {
	const shown = 3
	names := make([]string, 0, shown+1)
	for i, obj := range objs {
		if i == shown {
			names = append(names, "...")
			break
		}
		names = append(names, identityOf(obj).String())
	}
	return strings.Join(names, ", ")
}

// joinKeys encodes keys unambiguously (each key prefixed by its length), so
// that no key content can make two different key lists collide.
func joinKeys(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	var b strings.Builder
	for _, key := range keys {
		b.WriteString(strconv.Itoa(len(key)))
		b.WriteByte(':')
		b.WriteString(key)
	}
	return b.String()
}

// clip caps a shared slice's capacity, so a caller's append copies instead of
// writing into the store's backing array.
func clip(objs []map[string]any) []map[string]any {
	return objs[:len(objs):len(objs)]
}

// identity is an object's namespace and name: what UPDATE and DELETE match
// on and what results are ordered by.
type identity struct {
	namespace, name string
}

func (id identity) less(other identity) bool {
	if id.namespace != other.namespace {
		return id.namespace < other.namespace
	}
	return id.name < other.name
}

func (id identity) String() string {
	if id.namespace == "" {
		return id.name
	}
	return id.namespace + "/" + id.name
}

func identityOf(obj map[string]any) identity {
	metadata, _ := obj["metadata"].(map[string]any)
	namespace, _ := metadata["namespace"].(string)
	name, _ := metadata["name"].(string)
	return identity{namespace: namespace, name: name}
}

// searchIdentity returns the position of id in objs (sorted by identity), or
// where it would be inserted.
func searchIdentity(objs []map[string]any, id identity) (int, bool) {
	i := sort.Search(len(objs), func(i int) bool { return !identityOf(objs[i]).less(id) })
	return i, i < len(objs) && identityOf(objs[i]) == id
}

// insertSorted returns a new slice with obj at its sorted position,
// replacing an object of the same identity.
func insertSorted(objs []map[string]any, obj map[string]any) []map[string]any {
	i, found := searchIdentity(objs, identityOf(obj))
	if found {
		out := append([]map[string]any(nil), objs...)
		out[i] = obj
		return out
	}
	out := make([]map[string]any, len(objs)+1)
	copy(out, objs[:i])
	out[i] = obj
	copy(out[i+1:], objs[i:])
	return out
}

// withoutIdentity returns objs without the object id: objs itself when id
// is absent, otherwise a copy, never changing objs' backing array.
func withoutIdentity(objs []map[string]any, id identity) []map[string]any {
	i, found := searchIdentity(objs, id)
	if !found {
		return objs
	}
	out := make([]map[string]any, 0, len(objs)-1)
	out = append(out, objs[:i]...)
	return append(out, objs[i+1:]...)
}

// Get returns the stored object with that namespace and name.
func (s *MemoryStore) Get(namespace, name string) (map[string]any, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	all := s.buckets[0][""]
	i, found := searchIdentity(all, identity{namespace: namespace, name: name})
	if !found {
		return nil, false
	}
	return all[i], true
}
