package render

import (
	"fmt"
	"sync/atomic"
)

// This file lets a store be copied into another process (a rendering
// worker) and be kept there across renderings: a MemoryStore has an
// identity and a version, so the copy is resent only when the store
// changed, and an overlay is described by its base and its one change, so
// an admission request sends one object, not the store.

// storeIDs numbers MemoryStores, from 1, for the life of the process.
var storeIDs atomic.Uint64

// StoreSnapshot is a MemoryStore's content at one version.
type StoreSnapshot struct {
	// ID identifies the store for the life of the process; Version counts
	// its changes. Two snapshots with the same ID and Version hold the
	// same objects.
	ID, Version uint64
	// IndexBy are the store's indexBy expressions, to rebuild its Indexer.
	IndexBy []string
	// Objects are the stored objects, normalized, ordered by namespace and
	// name. They are the store's own: read-only.
	Objects []map[string]any
}

// Snapshot returns the store's content and the version it is at, read
// under one lock so that they agree.
func (s *MemoryStore) Snapshot() StoreSnapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return StoreSnapshot{
		ID:      s.id,
		Version: s.version,
		IndexBy: s.indexer.Expressions(),
		Objects: clip(s.buckets[0][""]),
	}
}

// OverlayChange is what an overlay shows over its base: the object of
// Namespace and Name replaced by Object, or removed when Object is nil.
// CREATE and UPDATE overlays are alike (both replace or add), so the change
// does not say which it was.
type OverlayChange struct {
	Base            IndexedStore
	Namespace, Name string
	// Object is the proposed object, normalized and read-only; nil for a
	// DELETE.
	Object map[string]any
}

// OverlayChangeOf describes store when Overlay made it.
func OverlayChangeOf(store Store) (OverlayChange, bool) {
	o, ok := store.(*overlayStore)
	if !ok {
		return OverlayChange{}, false
	}
	return OverlayChange{Base: o.base, Namespace: o.id.namespace, Name: o.id.name, Object: o.proposed}, true
}

// Apply makes the overlay c describes over base (a copy of c.Base).
func (c OverlayChange) Apply(base IndexedStore) (IndexedStore, error) {
	if c.Object == nil {
		return Overlay(base, OperationDelete, map[string]any{
			"metadata": map[string]any{"namespace": c.Namespace, "name": c.Name},
		})
	}
	if got := identityOf(c.Object); got != (identity{namespace: c.Namespace, name: c.Name}) {
		return nil, fmt.Errorf("overlay change of %s carries the object %s", identity{namespace: c.Namespace, name: c.Name}, got)
	}
	return Overlay(base, OperationUpdate, c.Object)
}
