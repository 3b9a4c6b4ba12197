package renderproc

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// plan builds the request rendering data with r on w: what w holds already
// is named, the rest is sent. commit records what w will hold once it has
// the request; it is called only when the request is sent (a worker that
// then fails is discarded with its records).
func (w *worker) plan(p *Pool, r *renderer, data render.Data) (*request, func(), error) {
	use := w.uses + 1
	b := &planner{
		use:  use,
		held: maps.Clone(w.stores),
		seen: make(map[*render.MemoryStore]*storeRef),
		used: make(map[uint64]bool),
	}
	if b.held == nil {
		b.held = make(map[uint64]heldStore)
	}
	req := &request{
		MemoryLimit:   p.opts.MemoryLimit,
		MaxOutput:     p.opts.MaxOutputBytes,
		TemplatesHash: r.hash,
		Resources:     make(map[string]*wireStore, len(data.Resources)),
		ExtraContext:  data.ExtraContext,
		CurrentConfig: data.CurrentConfig,
		HTTPResources: data.HTTPResources,
	}
	for _, name := range slices.Sorted(maps.Keys(data.Resources)) {
		ws, err := b.store(data.Resources[name])
		if err != nil {
			return nil, nil, fmt.Errorf("store %q: %w", name, err)
		}
		req.Resources[name] = ws
		if data.Missed != nil && data.OnDemand[name] {
			req.OnDemand = append(req.OnDemand, name)
		}
	}
	req.Snapshots = b.snapshots
	req.DropStores = b.evict(p.storeCacheBytes)

	templates := maps.Clone(w.templates)
	if templates == nil {
		templates = make(map[string]uint64)
	}
	if _, ok := templates[r.hash]; !ok {
		req.Templates = r.templates
	}
	templates[r.hash] = use
	req.DropTemplates = evictTemplates(templates, maxHeldTemplates)

	commit := func() {
		w.uses, w.stores, w.templates = use, b.held, templates
		p.stats.snapshots.Add(int64(len(b.snapshots)))
	}
	return req, commit, nil
}

// planner describes the stores of one request.
type planner struct {
	use uint64
	// held is what the worker will hold: what it held, plus the snapshots
	// this request sends.
	held map[uint64]heldStore
	// seen names each MemoryStore once per request, at one version.
	seen map[*render.MemoryStore]*storeRef
	// used are the stores this request names, which evict keeps.
	used      map[uint64]bool
	snapshots []json.RawMessage
}

func (b *planner) store(s render.Store) (*wireStore, error) {
	if s == nil {
		return nil, nil
	}
	if memory, ok := s.(*render.MemoryStore); ok {
		return b.memoryStore(memory)
	}
	if change, ok := render.OverlayChangeOf(s); ok {
		base, err := b.store(change.Base)
		if err != nil {
			return nil, err
		}
		return &wireStore{Overlay: &wireOverlay{Base: base, Namespace: change.Namespace, Name: change.Name, Object: change.Object}}, nil
	}
	if indexed, ok := s.(render.IndexedStore); ok {
		// Sent whole each time: nothing says whether it changed.
		return &wireStore{Whole: &wireSnapshot{IndexBy: indexed.Indexer().Expressions(), Objects: indexed.List()}}, nil
	}
	return nil, fmt.Errorf("a %T cannot be sent to a rendering process: it does not say how it is indexed (render.IndexedStore)", s)
}

func (b *planner) memoryStore(s *render.MemoryStore) (*wireStore, error) {
	if ref, ok := b.seen[s]; ok {
		return &wireStore{Ref: ref}, nil
	}
	snapshot := s.Snapshot()
	ref := &storeRef{ID: snapshot.ID, Version: snapshot.Version}
	held, ok := b.held[snapshot.ID]
	if !ok || held.version != snapshot.Version {
		raw, err := marshal(wireSnapshot{ID: snapshot.ID, Version: snapshot.Version, IndexBy: snapshot.IndexBy, Objects: snapshot.Objects})
		if err != nil {
			return nil, err
		}
		b.snapshots = append(b.snapshots, raw)
		held = heldStore{version: snapshot.Version, size: int64(len(raw))}
	}
	held.lastUse = b.use
	b.held[snapshot.ID] = held
	b.used[snapshot.ID] = true
	b.seen[s] = ref
	return &wireStore{Ref: ref}, nil
}

// evict drops the least recently used snapshots this request does not name
// until the rest fit in budget (those it names stay whatever their size),
// and returns their IDs.
func (b *planner) evict(budget int64) []uint64 {
	var total int64
	for _, held := range b.held {
		total += held.size
	}
	if total <= budget {
		return nil
	}
	var candidates []uint64
	for id := range b.held {
		if !b.used[id] {
			candidates = append(candidates, id)
		}
	}
	slices.SortFunc(candidates, func(x, y uint64) int { return cmp.Compare(b.held[x].lastUse, b.held[y].lastUse) })
	var dropped []uint64
	for _, id := range candidates {
		if total <= budget {
			break
		}
		total -= b.held[id].size
		delete(b.held, id)
		dropped = append(dropped, id)
	}
	return dropped
}

// evictTemplates keeps the limit most recently used template sets.
func evictTemplates(templates map[string]uint64, limit int) []string {
	if len(templates) <= limit {
		return nil
	}
	hashes := slices.SortedFunc(maps.Keys(templates), func(x, y string) int { return cmp.Compare(templates[x], templates[y]) })
	dropped := hashes[:len(hashes)-limit]
	for _, hash := range dropped {
		delete(templates, hash)
	}
	return dropped
}
