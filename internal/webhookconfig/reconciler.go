package webhookconfig

import (
	"context"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/trigger"
)

// FieldOwner is Gatehouse's server-side apply field manager. Entries of the
// webhook configurations owned by another manager are never touched.
const FieldOwner = "gatehouse"

// CacheByObject scopes a cache to what the reconciler of instance reads:
// its two webhook configurations by name (another install's are never
// read), and CustomResourceDefinitions (the caller strips their schemas).
func CacheByObject(instance string) map[client.Object]cache.ByObject {
	validating, mutating := ConfigurationNames(instance)
	return map[client.Object]cache.ByObject{
		&admissionregistrationv1.ValidatingWebhookConfiguration{}: {Field: fields.OneTermEqualSelector("metadata.name", validating)},
		&admissionregistrationv1.MutatingWebhookConfiguration{}:   {Field: fields.OneTermEqualSelector("metadata.name", mutating)},
		&apiextensionsv1.CustomResourceDefinition{}:               {},
	}
}

// Reconciler keeps Gatehouse's webhook configurations and CRD conversion
// stanzas in the declared state: the static webhooks of the enabled modules
// and the webhooks modules register at run time. It applies them with
// server-side apply whenever they drift (an entry edited or deleted by hand,
// a configuration deleted), whenever the declared set or the CA bundle
// changes, and every Resync. Start runs its controller on the leader only;
// Written is the readiness check every replica runs against its own cache.
type Reconciler struct {
	opts ReconcilerOptions
	// converted are the CRDs whose conversion a static webhook declares:
	// the only CRDs whose events matter.
	converted map[string]bool

	mu      sync.Mutex
	dynamic map[string][]module.Webhook
	// withdrawn are the paths of static webhooks of modules that failed
	// while running (Withdraw): no longer written.
	withdrawn map[string]bool
	// foreign are the CRDs whose conversion another owner keeps, logged
	// once each.
	foreign map[string]bool
	// triggers queues a reconciliation while the controller runs (on the
	// leader); on another replica a trigger has nothing to do.
	triggers *trigger.Source[reconcile.Request]

	applied atomic.Int64
}

// ReconcilerOptions configures a Reconciler; zero values are defaulted in
// NewReconciler.
type ReconcilerOptions struct {
	// Target says how the API server reaches Gatehouse; it is asked at
	// every reconciliation, after the server listens. Its CABundle is
	// ignored when CABundle is set.
	Target func() Target
	// CABundle returns the current CA bundle.
	CABundle func() []byte
	// Static are the webhooks of the enabled modules.
	Static []module.Webhook
	// Client writes; it must not read through a cache.
	Client client.Client
	// Cache holds what CacheByObject scopes.
	Cache cache.Cache
	// Resync re-applies even without a change. Default one minute.
	Resync time.Duration
	// Instance names the configurations and labels what is written
	// (Target.Instance). Default DefaultInstance.
	Instance string
}

// NewReconciler returns the reconciler of opts.Cache's configurations; its
// controller watches them from Start on.
func NewReconciler(opts ReconcilerOptions) *Reconciler {
	if opts.Resync == 0 {
		opts.Resync = time.Minute
	}
	if opts.Instance == "" {
		opts.Instance = DefaultInstance
	}
	if opts.CABundle == nil {
		opts.CABundle = func() []byte { return opts.Target().CABundle }
	}
	r := &Reconciler{opts: opts, dynamic: map[string][]module.Webhook{}, foreign: map[string]bool{}, converted: map[string]bool{}, withdrawn: map[string]bool{}}
	r.triggers = trigger.New(func() []reconcile.Request { return []reconcile.Request{r.request()} })
	for _, h := range opts.Static {
		for _, crd := range h.CRDs {
			r.converted[crd] = true
		}
	}
	return r
}

// coalesce gathers the burst of events one apply causes into one
// reconciliation.
const coalesce = 50 * time.Millisecond

// request is the controller's only request: the instance's configurations
// and conversion stanzas are reconciled together.
func (r *Reconciler) request() reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: r.opts.Instance}}
}

// Trigger asks for a reconciliation soon. Safe from any goroutine.
func (r *Reconciler) Trigger() { r.triggers.AddAfter(r.request(), coalesce) }

// SetDynamic replaces the run-time webhooks of a module.
func (r *Reconciler) SetDynamic(moduleName string, hooks []module.Webhook) {
	r.mu.Lock()
	r.dynamic[moduleName] = slices.Clone(hooks)
	r.mu.Unlock()
	r.Trigger()
}

// Withdraw stops writing a module's webhooks: its static ones (by path)
// and its run-time ones. A CRD conversion stanza among them is left as it
// is: strategy None would relabel stored objects without converting them.
func (r *Reconciler) Withdraw(moduleName string, staticPaths []string) {
	r.mu.Lock()
	for _, p := range staticPaths {
		r.withdrawn[p] = true
	}
	delete(r.dynamic, moduleName)
	r.mu.Unlock()
	r.Trigger()
}

// staticLocked are the static webhooks to write: those of the modules
// that were not withdrawn. r.mu is held.
func (r *Reconciler) staticLocked() []module.Webhook {
	return slices.DeleteFunc(slices.Clone(r.opts.Static), func(h module.Webhook) bool {
		return r.withdrawn[h.Path] && h.Type != module.Conversion
	})
}

// Applied counts successful reconciliations, for tests and logs.
func (r *Reconciler) Applied() int64 { return r.applied.Load() }

// Desired renders the declared state now.
func (r *Reconciler) Desired() *Rendered {
	r.mu.Lock()
	hooks := r.staticLocked()
	names := make([]string, 0, len(r.dynamic))
	for name := range r.dynamic {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		hooks = append(hooks, r.dynamic[name]...)
	}
	r.mu.Unlock()
	t := r.opts.Target()
	t.CABundle = r.opts.CABundle()
	t.Instance = r.opts.Instance
	return Render(hooks, t)
}

// NeedLeaderElection is true: one writer.
func (r *Reconciler) NeedLeaderElection() bool { return true }

// Start runs the reconciler's controller until ctx ends: a workqueue of its
// one request, fed by the configurations' and the converted CRDs' events,
// by Trigger, and once at start; retried with backoff after an error, and
// every Resync after a success. Its logger is the one of ctx, naming the
// configurations it keeps.
func (r *Reconciler) Start(ctx context.Context) error {
	validating, mutating := ConfigurationNames(r.opts.Instance)
	log := logf.FromContext(ctx).WithName("Reconciler").WithValues(
		"validatingWebhookConfiguration", validating, "mutatingWebhookConfiguration", mutating)
	c, err := controller.NewUnmanaged("webhookconfig", controller.Options{
		Reconciler:     r,
		RateLimiter:    workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](200*time.Millisecond, 30*time.Second),
		Logger:         log,
		LogConstructor: func(*reconcile.Request) logr.Logger { return log },
		// The configurations' names carry the instance; a process may run
		// one Gatehouse after another (the e2e tests), and
		// controller-runtime's check of names never forgets one.
		SkipNameValidation: ptr.To(true),
		NeedLeaderElection: ptr.To(true),
	})
	if err != nil {
		return err
	}
	for _, src := range []source.Source{
		source.Kind(r.opts.Cache, &admissionregistrationv1.ValidatingWebhookConfiguration{},
			enqueueAfter[*admissionregistrationv1.ValidatingWebhookConfiguration](r.request())),
		source.Kind(r.opts.Cache, &admissionregistrationv1.MutatingWebhookConfiguration{},
			enqueueAfter[*admissionregistrationv1.MutatingWebhookConfiguration](r.request())),
		source.Kind(r.opts.Cache, &apiextensionsv1.CustomResourceDefinition{},
			enqueueAfter[*apiextensionsv1.CustomResourceDefinition](r.request()),
			predicate.NewTypedPredicateFuncs(func(o *apiextensionsv1.CustomResourceDefinition) bool { return r.converted[o.GetName()] })),
		r.triggers,
	} {
		if err := c.Watch(src); err != nil {
			return err
		}
	}
	return c.Start(ctx)
}

// enqueueAfter queues req, after coalesce, on every event of T.
func enqueueAfter[T client.Object](req reconcile.Request) handler.TypedEventHandler[T, reconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc:  func(_ context.Context, _ event.TypedCreateEvent[T], q queue) { q.AddAfter(req, coalesce) },
		UpdateFunc:  func(_ context.Context, _ event.TypedUpdateEvent[T], q queue) { q.AddAfter(req, coalesce) },
		DeleteFunc:  func(_ context.Context, _ event.TypedDeleteEvent[T], q queue) { q.AddAfter(req, coalesce) },
		GenericFunc: func(_ context.Context, _ event.TypedGenericEvent[T], q queue) { q.AddAfter(req, coalesce) },
	}
}

// Reconcile applies the declared state; after a success it looks again in
// Resync even without a change.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if err := r.reconcile(ctx); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: r.opts.Resync}, nil
}
