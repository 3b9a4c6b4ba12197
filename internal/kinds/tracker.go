package kinds

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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

// Follow follows obj's kind in c. onChange, if not nil, is called after the
// kind became readable or stopped being readable.
func (t *Tracker) Follow(c cache.Cache, obj client.Object, onChange func()) (*Handle, error) {
	gvk, err := apiutil.GVKForObject(obj, t.opts.Scheme)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	key := entryKey{cache: c, gvk: gvk}
	e, ok := t.entries[key]
	if !ok {
		e = &entry{key: key, obj: obj, builtin: clientgoscheme.Scheme.Recognizes(gvk), followers: map[int]func(){}, changed: make(chan struct{})}
		t.entries[key] = e
		if t.ctx == nil {
			t.initial = append(t.initial, e)
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
		informer, err := e.key.cache.GetInformer(ctx, e.obj)
		if err != nil {
			if ctx.Err() == nil {
				log.Error(err, "starting the informer of an optional kind; will retry")
				failed(module.KindPending)
			}
			return
		}
		if !e.key.cache.WaitForCacheSync(ctx) {
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
	if err := e.key.cache.RemoveInformer(context.Background(), e.obj); err != nil {
		log.Error(err, "removing the informer of an optional kind")
	}
	log.Info("optional kind no longer followed", "reason", why)
	if wasReadable {
		go t.notify(e)
	}
}

// setState records e's state and wakes its waiters.
func (t *Tracker) setState(e *entry, s module.KindState, informer cache.Informer) {
	e.stateMu.Lock()
	defer e.stateMu.Unlock()
	if s != module.KindPending {
		e.decided.Store(true)
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
