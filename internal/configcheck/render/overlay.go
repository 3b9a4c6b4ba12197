package render

import (
	"fmt"
	"slices"
)

// Operation is an admission operation, spelled as in an AdmissionReview.
type Operation string

const (
	OperationCreate Operation = "CREATE"
	OperationUpdate Operation = "UPDATE"
	OperationDelete Operation = "DELETE"
)

// overlayStore shows base as it would be after one admitted change. It
// copies nothing up front: each lookup filters base's result, so building an
// overlay per admission request costs one indexing of the proposed object.
type overlayStore struct {
	base IndexedStore
	// id is the changed object's identity: base's object with it is hidden.
	id identity
	// proposed is the object shown instead (CREATE, UPDATE), nil for DELETE.
	proposed map[string]any
	// proposedKeys are proposed's index keys, computed by base's Indexer.
	proposedKeys []string
}

var _ IndexedStore = (*overlayStore)(nil)

// Overlay returns base as it would be after op on obj: CREATE adds obj,
// UPDATE replaces the object with obj's namespace and name (never
// duplicates it), DELETE removes it (obj is then the old object; only its
// namespace and name are used). A CREATE of an object base already holds
// replaces it too, as the store would once the informer caught up; an
// UPDATE of an object base does not hold (say, one its selectors excluded
// until now) adds it. obj is normalized like stored objects and keyed by
// base's Indexer, so Fetch by any index sees the change. base is not
// modified.
func Overlay(base IndexedStore, op Operation, obj map[string]any) (IndexedStore, error) {
	normalized := NormalizeObject(obj)
	id := identityOf(normalized)
	switch op {
	case OperationCreate, OperationUpdate:
		keys, err := base.Indexer().IndexKeys(normalized)
		if err != nil {
			return nil, fmt.Errorf("overlay %s of %s: %w", op, id, err)
		}
		return &overlayStore{base: base, id: id, proposed: normalized, proposedKeys: keys}, nil
	case OperationDelete:
		return &overlayStore{base: base, id: id}, nil
	default:
		return nil, fmt.Errorf("overlay of %s: unknown operation %q (want CREATE, UPDATE or DELETE)", id, op)
	}
}

func (o *overlayStore) Indexer() *Indexer { return o.base.Indexer() }

func (o *overlayStore) List() []map[string]any {
	return o.apply(o.base.List(), o.proposed != nil)
}

func (o *overlayStore) Fetch(keys ...any) ([]map[string]any, error) {
	lookup, err := o.Indexer().lookupKeys("Fetch", keys)
	if err != nil {
		return nil, err
	}
	fromBase, err := o.base.Fetch(keys...)
	if err != nil {
		return nil, err
	}
	return o.apply(fromBase, o.proposed != nil && slices.Equal(o.proposedKeys[:len(lookup)], lookup)), nil
}

func (o *overlayStore) GetSingle(keys ...any) (map[string]any, error) {
	return getSingle(o, keys)
}

// apply hides base's version of the changed object in objs and, when the
// proposed object matches the lookup, shows it at its sorted position.
func (o *overlayStore) apply(objs []map[string]any, proposedMatches bool) []map[string]any {
	objs = withoutIdentity(objs, o.id)
	if proposedMatches {
		return insertSorted(objs, o.proposed)
	}
	return clip(objs)
}
