package kinds

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Tracker starts and stops the informers of optional kinds as their CRDs
// come and go. It is a manager.Runnable that runs on every replica.
type Tracker struct {
	crds   cache.Cache
	scheme *runtime.Scheme
	// log is taken from Start's context (see logger); it is set under mu
	// with ctx, before any informer starts.
	log logr.Logger

	crdHandler toolscache.ResourceEventHandlerRegistration
	changed    chan struct{}

	mu      sync.Mutex
	ctx     context.Context // set by Start
	entries map[entryKey]*entry
	// initial are the kinds followed before Start; Ready waits for them.
	initial []*entry
	ready   atomic.Bool
}

type entryKey struct {
	cache cache.Cache
	gvk   schema.GroupVersionKind
}

// entry is one kind in one cache, shared by its followers.
type entry struct {
	key     entryKey
	obj     client.Object
	builtin bool

	followers map[int]func()
	nextID    int

	// running is true from the moment the informer is asked for until it
	// is removed; stopStart cancels a start still waiting for its sync.
	running   bool
	stopStart context.CancelFunc
	readable  atomic.Bool
	decided   atomic.Bool
}

// New returns a Tracker reading CRDs from crds, a cache that holds
// CustomResourceDefinitions (ideally with their schemas stripped; see
// StripSchemas). It registers the CRD informer at once, so that it starts
// and syncs with crds. The Tracker logs through the logger in Start's
// context.
func New(ctx context.Context, crds cache.Cache, scheme *runtime.Scheme) (*Tracker, error) {
	t := &Tracker{crds: crds, scheme: scheme, log: logr.Discard(), changed: make(chan struct{}, 1), entries: map[entryKey]*entry{}}
	inf, err := crds.GetInformer(ctx, &apiextensionsv1.CustomResourceDefinition{})
	if err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition informer: %w", err)
	}
	t.crdHandler, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { t.poke() },
		UpdateFunc: func(any, any) { t.poke() },
		DeleteFunc: func(any) { t.poke() },
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// StripSchemas is a cache transform for CRDs that keeps what deciding
// "served" and the conversion stanza need, and drops the (large) schemas.
func StripSchemas(obj any) (any, error) {
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		crd.ManagedFields = nil
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Schema = nil
			crd.Spec.Versions[i].AdditionalPrinterColumns = nil
			crd.Spec.Versions[i].SelectableFields = nil
		}
	}
	return obj, nil
}

func (t *Tracker) poke() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// Follow follows obj's kind in c. onChange, if not nil, is called after the
// kind became readable or stopped being readable.
func (t *Tracker) Follow(c cache.Cache, obj client.Object, onChange func()) (*Handle, error) {
	gvk, err := apiutil.GVKForObject(obj, t.scheme)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	key := entryKey{cache: c, gvk: gvk}
	e, ok := t.entries[key]
	if !ok {
		e = &entry{key: key, obj: obj, builtin: clientgoscheme.Scheme.Recognizes(gvk), followers: map[int]func(){}}
		t.entries[key] = e
		if t.ctx == nil {
			t.initial = append(t.initial, e)
		}
	}
	id := e.nextID
	e.nextID++
	e.followers[id] = onChange
	t.poke()
	return &Handle{t: t, e: e, id: id}, nil
}

// Handle is one follower's hold on a kind.
type Handle struct {
	t    *Tracker
	e    *entry
	id   int
	once sync.Once
}

// Readable says whether the kind's informer runs and has synced.
func (h *Handle) Readable() bool { return h.e.readable.Load() }

// Decided says whether the kind's state is known: its CRD has been looked
// at and, when it is served, its informer has synced.
func (h *Handle) Decided() bool { return h.e.decided.Load() }

// GVK is the followed kind.
func (h *Handle) GVK() schema.GroupVersionKind { return h.e.key.gvk }

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
		if h.e.running {
			t.stopInformer(h.e, "no follower left")
		}
	})
}

// Ready passes once every kind followed before Start is decided. Kinds
// followed later (configurations applied at run time) never make a serving
// replica unready.
func (t *Tracker) Ready() bool {
	if t.ready.Load() {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx == nil {
		return false
	}
	for _, e := range t.initial {
		if !e.decided.Load() {
			return false
		}
	}
	t.ready.Store(true)
	return true
}

// NeedLeaderElection is false: every replica reads its caches.
func (t *Tracker) NeedLeaderElection() bool { return false }

// logger is the tracker's logger, from the context its runnable is started
// with (controller-runtime's log.FromContext).
func (t *Tracker) logger(ctx context.Context) logr.Logger {
	return logf.FromContext(ctx).WithName("Tracker")
}

// Start evaluates the followed kinds whenever a CRD changes, until ctx ends.
func (t *Tracker) Start(ctx context.Context) error {
	t.mu.Lock()
	t.ctx = ctx
	t.log = t.logger(ctx)
	t.mu.Unlock()
	// Nothing can be decided before the CRDs have been listed once; the
	// first evaluation must not wait for a CRD event that may never come.
	if !toolscache.WaitForCacheSync(ctx.Done(), t.crdHandler.HasSynced) {
		return nil
	}
	// A start that failed (an informer that could not sync) is retried.
	retry := time.NewTicker(30 * time.Second)
	defer retry.Stop()
	t.poke()
	for {
		select {
		case <-ctx.Done():
			t.mu.Lock()
			for _, e := range t.entries {
				if e.stopStart != nil {
					e.stopStart()
				}
			}
			t.mu.Unlock()
			return nil
		case <-t.changed:
		case <-retry.C:
		}
		t.evaluate()
	}
}

func (t *Tracker) evaluate() {
	served, err := t.servedKinds()
	if err != nil {
		t.log.Error(err, "listing CustomResourceDefinitions")
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries {
		want := e.builtin || served[e.key.gvk]
		switch {
		case want && !e.running:
			t.startInformer(e)
		case !want && e.running:
			t.stopInformer(e, "its CustomResourceDefinition no longer serves it")
		case !want:
			e.decided.Store(true)
		}
	}
}

// servedKinds lists the kinds the CRDs serve now: an established CRD not
// being deleted, and a version with served: true.
func (t *Tracker) servedKinds() (map[schema.GroupVersionKind]bool, error) {
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := t.crds.List(context.Background(), &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := map[schema.GroupVersionKind]bool{}
	for i := range list.Items {
		crd := &list.Items[i]
		if crd.DeletionTimestamp != nil || !established(crd) {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				out[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = true
			}
		}
	}
	return out, nil
}

// Served says whether the API server serves gvk as Follow judges it: a
// built-in kind, or a version an established CRD serves. It reads the CRD
// cache only, so asking about a kind nobody defined costs no API call.
func (t *Tracker) Served(gvk schema.GroupVersionKind) bool {
	if clientgoscheme.Scheme.Recognizes(gvk) {
		return true
	}
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := t.crds.List(context.Background(), &list, client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	for i := range list.Items {
		crd := &list.Items[i]
		if crd.Spec.Group != gvk.Group || crd.Spec.Names.Kind != gvk.Kind || crd.DeletionTimestamp != nil || !established(crd) {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == gvk.Version && v.Served {
				return true
			}
		}
	}
	return false
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// startInformer asks the cache for the informer and waits for its sync in
// the background. Called with t.mu held.
func (t *Tracker) startInformer(e *entry) {
	ctx, cancel := context.WithCancel(t.ctx)
	e.running, e.stopStart = true, cancel
	gvk := e.key.gvk
	go func() {
		// On a started cache GetInformer starts the informer and blocks
		// until it has synced; on one not started yet it only registers it.
		if _, err := e.key.cache.GetInformer(ctx, e.obj); err != nil {
			if ctx.Err() == nil {
				t.log.Error(err, "starting the informer of an optional kind; will retry", "kind", gvk.String())
				t.mu.Lock()
				if e.running && e.stopStart != nil {
					e.running = false
					e.stopStart = nil
				}
				t.mu.Unlock()
			}
			return
		}
		if !e.key.cache.WaitForCacheSync(ctx) {
			return
		}
		t.mu.Lock()
		ok := e.running && ctx.Err() == nil
		t.mu.Unlock()
		if !ok {
			return
		}
		e.readable.Store(true)
		e.decided.Store(true)
		t.log.Info("optional kind served; following it", "kind", gvk.String())
		t.notify(e)
	}()
}

// stopInformer removes the informer. Called with t.mu held.
func (t *Tracker) stopInformer(e *entry, why string) {
	if e.stopStart != nil {
		e.stopStart()
	}
	e.running, e.stopStart = false, nil
	wasReadable := e.readable.Swap(false)
	e.decided.Store(true)
	if err := e.key.cache.RemoveInformer(context.Background(), e.obj); err != nil {
		t.log.Error(err, "removing the informer of an optional kind", "kind", e.key.gvk.String())
	}
	t.log.Info("optional kind no longer followed", "kind", e.key.gvk.String(), "reason", why)
	if wasReadable {
		go t.notify(e)
	}
}

func (t *Tracker) notify(e *entry) {
	t.mu.Lock()
	fns := make([]func(), 0, len(e.followers))
	for _, f := range e.followers {
		if f != nil {
			fns = append(fns, f)
		}
	}
	t.mu.Unlock()
	for _, f := range fns {
		f()
	}
}
