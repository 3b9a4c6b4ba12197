package kinds

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/trigger"
)

// Options configures a Tracker; zero values take the defaults in
// setDefaults.
type Options struct {
	// Scheme resolves followed objects' kinds. Required.
	Scheme *runtime.Scheme
	// Mapper resolves a kind's resource for the access check. Required
	// when MayListWatch is set.
	Mapper meta.RESTMapper
	// NewCache builds the cache of one followed kind in one scope, from
	// the scope's options (module.Scope.CacheOptions), completed as the
	// host completes every cache. Required.
	NewCache func(cache.Options) (cache.Cache, error)
	// MayListWatch says whether Gatehouse may list and watch a resource
	// cluster-wide (see SelfAccess). nil: every kind is permitted.
	MayListWatch func(ctx context.Context, gvr schema.GroupVersionResource) (bool, error)
	// Retry is how long after a failed start (an informer that could not
	// start, an access check that failed) or a refusal the kind is tried
	// again. Default 30 s.
	Retry time.Duration
	// AccessTimeout bounds one access check. Default 10 s.
	AccessTimeout time.Duration
}

func (o *Options) setDefaults() {
	if o.Retry == 0 {
		o.Retry = 30 * time.Second
	}
	if o.AccessTimeout == 0 {
		o.AccessTimeout = 10 * time.Second
	}
}

// evaluation is the tracker's only work item: look at every followed kind
// against the CRDs. Every event collapses into it, as a controller's
// events for one object collapse into one reconciliation.
type evaluation struct{}

// Tracker starts and stops the informers of optional kinds as their CRDs
// come and go. It is a manager.Runnable that runs on every replica: a
// controller-runtime controller whose sources are the CRD informer and the
// tracker's own followers.
type Tracker struct {
	crds cache.Cache
	opts Options
	mu   sync.Mutex
	// ctx is Start's, carrying its logger: the lifetime of informer
	// starts and the logger of what no reconcile logs (a follower's
	// Close).
	ctx context.Context
	// triggers queues evaluations once the controller runs.
	triggers *trigger.Source[evaluation]
	entries  map[entryKey]*entry
	// seq numbers the caches' gatehouse_cache_synced series.
	seq int
	// initial are the kinds followed before Start; Ready waits for them.
	initial []*entry
	ready   atomic.Bool
}

// entryKey is what followers share one cache by: the kind, the shape its
// objects are read in (a cache keeps one informer per shape), and the
// scope.
type entryKey struct {
	gvk   schema.GroupVersionKind
	shape string
	scope string
}

// entry is one kind in one scope, shared by its followers, and its cache.
type entry struct {
	key     entryKey
	obj     client.Object
	builtin bool

	// cache holds the kind's informer; the tracker runs it from the
	// tracker's start (or the entry's, when later) until the last follower
	// released it (stopCache).
	cache     cache.Cache
	stopCache context.CancelFunc
	// series is the cache's gatehouse_cache_synced label: 0 while the
	// kind's state is not known, 1 once it is.
	series string
	// removed is set when the last follower released the entry.
	removed bool

	followers map[int]func()
	nextID    int

	// running is true from the moment the kind is being started (its
	// access asked, its informer asked for) until it is removed or the
	// start failed; stopStart cancels a start still under way.
	running   bool
	stopStart context.CancelFunc
	// retryAt holds a refused or failed kind back until then.
	retryAt time.Time
	// decided is set once the state was first known (readiness).
	decided atomic.Bool

	stateMu  sync.Mutex
	state    module.KindState
	informer cache.Informer
	// changed is closed, and replaced, on every change of state: Wait's
	// broadcast.
	changed chan struct{}
}

// New returns a Tracker reading CRDs from crds, a cache that holds
// CustomResourceDefinitions (ideally with their schemas stripped; see
// StripSchemas). It registers the CRD informer at once, so that it starts
// and syncs with crds. The Tracker logs through the logger in Start's
// context.
func New(ctx context.Context, crds cache.Cache, opts Options) (*Tracker, error) {
	opts.setDefaults()
	if opts.NewCache == nil {
		return nil, errors.New("kinds: Options.NewCache is required")
	}
	if _, err := crds.GetInformer(ctx, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition informer: %w", err)
	}
	// The first evaluation must not wait for a CRD event that may never
	// come (no CRD at all).
	first := func() []evaluation { return []evaluation{{}} }
	return &Tracker{crds: crds, opts: opts, entries: map[entryKey]*entry{}, triggers: trigger.New(first)}, nil
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

// enqueue asks for an evaluation. Called with t.mu held; before Start the
// first evaluation covers it.
func (t *Tracker) enqueue(after time.Duration) { t.triggers.AddAfter(evaluation{}, after) }

// Follow follows obj's kind within scope, in a cache the tracker builds
// for it and shares with every follower of the same kind, shape and scope.
// onChange, if not nil, is called after the kind became readable or
// stopped being readable.
func (t *Tracker) Follow(obj client.Object, scope module.Scope, onChange func()) (*Handle, error) {
	gvk, err := apiutil.GVKForObject(obj, t.opts.Scheme)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	key := entryKey{gvk: gvk, shape: shapeOf(obj), scope: scope.Key()}
	e, ok := t.entries[key]
	if !ok {
		c, err := t.opts.NewCache(scope.CacheOptions())
		if err != nil {
			return nil, fmt.Errorf("cache of %s: %w", module.GVKString(gvk), err)
		}
		t.seq++
		e = &entry{key: key, obj: obj, builtin: clientgoscheme.Scheme.Recognizes(gvk), followers: map[int]func(){}, changed: make(chan struct{}),
			cache: c, series: fmt.Sprintf("kinds/%d-%s", t.seq, module.GVKString(gvk))}
		metrics.CacheSynced.WithLabelValues(e.series).Set(0)
		t.entries[key] = e
		if t.ctx == nil {
			t.initial = append(t.initial, e)
		} else {
			t.startCache(e)
		}
	}
	id := e.nextID
	e.nextID++
	e.followers[id] = onChange
	t.enqueue(0)
	return &Handle{t: t, e: e, id: id}, nil
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

// Start runs the tracker's controller until ctx ends: every CRD event and
// every new follower enqueues one evaluation of the followed kinds; a
// failed or refused start is enqueued again after Options.Retry. The
// controller starts its workers once the CRD informer has synced, so that
// nothing is decided from a partial list of CRDs. The tracker logs through
// the logger in ctx (controller-runtime's log.FromContext).
func (t *Tracker) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("Tracker")
	c, err := controller.NewTypedUnmanaged("optional-kinds", controller.TypedOptions[evaluation]{
		Reconciler: reconcile.TypedFunc[evaluation](t.reconcile),
		Logger:     log,
		// One tracker per Gatehouse, and several Gatehouses in one test
		// process: the name is not a registry key here.
		SkipNameValidation: ptr.To(true),
		NeedLeaderElection: ptr.To(false),
	})
	if err != nil {
		return err
	}
	everyCRD := handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *apiextensionsv1.CustomResourceDefinition) []evaluation {
		return []evaluation{{}}
	})
	if err := c.Watch(source.TypedKind[*apiextensionsv1.CustomResourceDefinition, evaluation](t.crds, &apiextensionsv1.CustomResourceDefinition{}, everyCRD)); err != nil {
		return err
	}
	if err := c.Watch(t.triggers); err != nil {
		return err
	}
	t.mu.Lock()
	t.ctx = logf.IntoContext(ctx, log)
	for _, e := range t.entries {
		t.startCache(e)
	}
	t.mu.Unlock()
	err = c.Start(ctx)
	t.mu.Lock()
	for _, e := range t.entries {
		if e.stopStart != nil {
			e.stopStart()
		}
	}
	t.mu.Unlock()
	return err
}

func (t *Tracker) reconcile(ctx context.Context, _ evaluation) (reconcile.Result, error) {
	served, err := t.servedKinds()
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("listing CustomResourceDefinitions: %w", err)
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var retry time.Duration
	for _, e := range t.entries {
		want := e.builtin || served[e.key.gvk]
		switch {
		case want && !e.running && now.Before(e.retryAt):
			if wait := e.retryAt.Sub(now); retry == 0 || wait < retry {
				retry = wait
			}
		case want && !e.running:
			t.startInformer(ctx, e)
		case !want && e.running:
			t.stopInformer(ctx, e, "its CustomResourceDefinition no longer serves it")
		case !want:
			e.retryAt = time.Time{}
			t.setState(e, module.KindNotServed, nil)
		}
	}
	return reconcile.Result{RequeueAfter: retry}, nil
}

// startCache runs e's cache until the last follower released it or the
// tracker stops. Called with t.mu held, once t.ctx is set.
func (t *Tracker) startCache(e *entry) {
	ctx, cancel := context.WithCancel(t.ctx)
	e.stopCache = cancel
	go func() {
		if err := e.cache.Start(ctx); err != nil {
			logf.FromContext(ctx).Error(err, "the cache of an optional kind stopped", "kind", e.key.gvk.String())
		}
	}()
}

// shapeOf is the shape obj's kind is read in: a cache keeps typed,
// unstructured and metadata informers of one kind apart.
func shapeOf(obj client.Object) string {
	switch obj.(type) {
	case *unstructured.Unstructured:
		return "unstructured"
	case *metav1.PartialObjectMetadata:
		return "metadata"
	}
	return "typed"
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

// startInformer asks whether Gatehouse may list and watch the kind, then
// asks the cache for the informer and waits for its sync, in the
// background, logging through the logger of the reconcile that started it
// (ctx). The start lives as long as the tracker (t.ctx) unless stopped.
// Called with t.mu held.
func (t *Tracker) startInformer(ctx context.Context, e *entry) {
	gvk := e.key.gvk
	log := logf.FromContext(ctx).WithValues("kind", gvk.String())
	ctx, cancel := context.WithCancel(logf.IntoContext(t.ctx, log))
	e.running, e.stopStart = true, cancel
	t.setState(e, module.KindPending, nil)
	go func() {
		// failed ends a start that did not get through, unless it was
		// cancelled; the kind is tried again after Options.Retry.
		failed := func(state module.KindState) {
			t.mu.Lock()
			defer t.mu.Unlock()
			if !e.running || ctx.Err() != nil {
				return
			}
			e.running, e.stopStart = false, nil
			e.retryAt = time.Now().Add(t.opts.Retry)
			t.setState(e, state, nil)
			t.enqueue(t.opts.Retry)
		}
		allowed, err := t.mayListWatch(ctx, gvk)
		if err != nil {
			if ctx.Err() == nil {
				log.Error(err, "asking whether Gatehouse may list and watch an optional kind; will retry")
				failed(module.KindPending)
			}
			return
		}
		if !allowed {
			log.Info("optional kind served, but Gatehouse may not list and watch it: read as empty", "retry", t.opts.Retry.String())
			failed(module.KindForbidden)
			return
		}
		// On a started cache GetInformer starts the informer and blocks
		// until it has synced; on one not started yet it only registers it.
		informer, err := e.cache.GetInformer(ctx, e.obj)
		if err != nil {
			if ctx.Err() == nil {
				log.Error(err, "starting the informer of an optional kind; will retry")
				failed(module.KindPending)
			}
			return
		}
		if !e.cache.WaitForCacheSync(ctx) {
			return
		}
		t.mu.Lock()
		ok := e.running && ctx.Err() == nil
		if ok {
			e.retryAt = time.Time{}
			t.setState(e, module.KindServed, informer)
		}
		t.mu.Unlock()
		if !ok {
			return
		}
		log.Info("optional kind served; following it")
		t.notify(e)
	}()
}

func (t *Tracker) mayListWatch(ctx context.Context, gvk schema.GroupVersionKind) (bool, error) {
	if t.opts.MayListWatch == nil {
		return true, nil
	}
	mapping, err := t.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.AccessTimeout)
	defer cancel()
	return t.opts.MayListWatch(ctx, mapping.Resource)
}

// stopInformer removes the informer, logging through ctx's logger. Called
// with t.mu held.
func (t *Tracker) stopInformer(ctx context.Context, e *entry, why string) {
	log := logf.FromContext(ctx).WithValues("kind", e.key.gvk.String())
	if e.stopStart != nil {
		e.stopStart()
	}
	e.running, e.stopStart = false, nil
	wasReadable := e.stateNow() == module.KindServed
	t.setState(e, module.KindNotServed, nil)
	if err := e.cache.RemoveInformer(context.Background(), e.obj); err != nil {
		log.Error(err, "removing the informer of an optional kind")
	}
	log.Info("optional kind no longer followed", "reason", why)
	if wasReadable {
		go t.notify(e)
	}
}

// setState records e's state and wakes its waiters. Called with t.mu
// held.
func (t *Tracker) setState(e *entry, s module.KindState, informer cache.Informer) {
	e.stateMu.Lock()
	defer e.stateMu.Unlock()
	if s != module.KindPending {
		e.decided.Store(true)
	}
	if !e.removed {
		synced := 0.0
		if s != module.KindPending {
			synced = 1
		}
		metrics.CacheSynced.WithLabelValues(e.series).Set(synced)
	}
	if e.state == s && e.informer == informer {
		return
	}
	e.state, e.informer = s, informer
	close(e.changed)
	e.changed = make(chan struct{})
}

func (e *entry) stateNow() module.KindState {
	e.stateMu.Lock()
	defer e.stateMu.Unlock()
	return e.state
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
