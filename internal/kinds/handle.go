package kinds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// Handle is one follower's hold on a kind, and its reader.
type Handle struct {
	t    *Tracker
	e    *entry
	id   int
	once sync.Once
}

var _ module.Kind = (*Handle)(nil)

// GVK is the followed kind.
func (h *Handle) GVK() schema.GroupVersionKind { return h.e.key.gvk }

// State is the kind's state now.
func (h *Handle) State() module.KindState { return h.e.stateNow() }

// Readable says whether the kind's informer runs and has synced.
func (h *Handle) Readable() bool { return h.State() == module.KindServed }

// Informer is the kind's informer while it is served and synced.
func (h *Handle) Informer() cache.Informer {
	h.e.stateMu.Lock()
	defer h.e.stateMu.Unlock()
	if h.e.state != module.KindServed {
		return nil
	}
	return h.e.informer
}

// Wait returns the kind's state once it is known, or KindPending when ctx
// ends first. A kind recorded as not served whose CRD the CRD cache now
// serves is not known yet: the evaluation that CRD event enqueued is
// under way, and the caller waits for it rather than reading a state the
// tracker has not caught up with.
func (h *Handle) Wait(ctx context.Context) module.KindState {
	for {
		h.e.stateMu.Lock()
		state, changed := h.e.state, h.e.changed
		h.e.stateMu.Unlock()
		switch {
		case state == module.KindNotServed && (h.e.builtin || h.t.Served(h.e.key.gvk)):
		case state != module.KindPending:
			return state
		}
		select {
		case <-ctx.Done():
			return module.KindPending
		case <-changed:
		}
	}
}

// Release drops this follower; the last one stops the informer.
func (h *Handle) Release() {
	h.once.Do(func() {
		t := h.t
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(h.e.followers, h.id)
		if len(h.e.followers) > 0 {
			return
		}
		delete(t.entries, h.e.key)
		// Ready no longer waits for a kind nobody follows (a module whose
		// Setup failed released what it followed).
		t.initial = slices.DeleteFunc(t.initial, func(e *entry) bool { return e == h.e })
		if h.e.running {
			t.stopInformer(t.ctx, h.e, "no follower left")
		}
		h.e.removed = true
		metrics.CacheSynced.DeleteLabelValues(h.e.series)
		if h.e.stopCache != nil {
			h.e.stopCache()
		}
	})
}

// Get reads the kind from its cache: NotFound while it cannot be read.
func (h *Handle) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := h.mustRead(obj, false); err != nil {
		return err
	}
	if h.State() != module.KindServed {
		return module.NoObjects(h.e.key.gvk).Get(ctx, key, obj)
	}
	err := h.e.cache.Get(ctx, key, obj, opts...)
	if unreadable(err) {
		// Its CRD removed, or the last follower gone, since the check.
		return module.NoObjects(h.e.key.gvk).Get(ctx, key, obj)
	}
	return err
}

// List reads the kind from its cache: an empty list while it cannot be
// read.
func (h *Handle) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := h.mustRead(list, true); err != nil {
		return err
	}
	if h.State() != module.KindServed {
		return module.NoObjects(h.e.key.gvk).List(ctx, list)
	}
	err := h.e.cache.List(ctx, list, opts...)
	if unreadable(err) {
		return module.NoObjects(h.e.key.gvk).List(ctx, list)
	}
	return err
}

// unreadable is a read of a kind whose informer was removed between the
// state check and the read.
func unreadable(err error) bool {
	var notCached *cache.ErrResourceNotCached
	return errors.As(err, &notCached) || meta.IsNoMatchError(err)
}

// mustRead refuses to read another kind through this one's reader: it
// would start (or fail to find) another informer.
func (h *Handle) mustRead(obj runtime.Object, isList bool) error {
	gvk, err := apiutil.GVKForObject(obj, h.t.opts.Scheme)
	if err != nil {
		return err
	}
	if isList {
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	if gvk != h.e.key.gvk {
		return fmt.Errorf("the reader of %s cannot read %s", h.e.key.gvk, gvk)
	}
	return nil
}
