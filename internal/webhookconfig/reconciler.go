package webhookconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	// foreign are the CRDs whose conversion another owner keeps, logged
	// once each.
	foreign map[string]bool
	// queue is the controller's while it runs (on the leader); on another
	// replica a trigger has nothing to do.
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]

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
	r := &Reconciler{opts: opts, dynamic: map[string][]module.Webhook{}, foreign: map[string]bool{}, converted: map[string]bool{}}
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
func (r *Reconciler) Trigger() {
	r.mu.Lock()
	queue := r.queue
	r.mu.Unlock()
	if queue != nil {
		queue.AddAfter(r.request(), coalesce)
	}
}

// SetDynamic replaces the run-time webhooks of a module.
func (r *Reconciler) SetDynamic(moduleName string, hooks []module.Webhook) {
	r.mu.Lock()
	r.dynamic[moduleName] = slices.Clone(hooks)
	r.mu.Unlock()
	r.Trigger()
}

// Applied counts successful reconciliations, for tests and logs.
func (r *Reconciler) Applied() int64 { return r.applied.Load() }

// Desired renders the declared state now.
func (r *Reconciler) Desired() *Rendered {
	r.mu.Lock()
	hooks := slices.Clone(r.opts.Static)
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
		source.Func(func(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.mu.Lock()
			r.queue = queue
			r.mu.Unlock()
			queue.Add(r.request())
			return nil
		}),
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

func (r *Reconciler) reconcile(ctx context.Context) error {
	desired := r.Desired()
	var errs []error
	if err := r.applyConfiguration(ctx, desired.Validating, &admissionregistrationv1.ValidatingWebhookConfiguration{}, len(desired.Validating.Webhooks)); err != nil {
		errs = append(errs, err)
	}
	if err := r.applyConfiguration(ctx, desired.Mutating, &admissionregistrationv1.MutatingWebhookConfiguration{}, len(desired.Mutating.Webhooks)); err != nil {
		errs = append(errs, err)
	}
	crds := make([]string, 0, len(desired.Conversions))
	for name := range desired.Conversions {
		crds = append(crds, name)
	}
	sort.Strings(crds)
	for _, name := range crds {
		if err := r.applyConversion(ctx, name, desired.Conversions[name], logf.FromContext(ctx)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		r.applied.Add(1)
	}
	return errors.Join(errs...)
}

// applyConfiguration applies Gatehouse's entries of one configuration. With
// no entries, it only withdraws Gatehouse's entries from an existing object.
func (r *Reconciler) applyConfiguration(ctx context.Context, desired, existing client.Object, entries int) error {
	err := r.opts.Cache.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) && entries == 0 {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	gvk := admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration")
	if _, ok := desired.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
		gvk.Kind = "MutatingWebhookConfiguration"
	}
	u, err := toApply(desired, gvk.GroupVersion().String(), gvk.Kind)
	if err != nil {
		return err
	}
	if entries == 0 {
		// An empty list (not an absent one) releases what Gatehouse owned.
		u.Object["webhooks"] = []any{}
	}
	if err := r.opts.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, desired.GetName(), err)
	}
	return nil
}

// applyConversion sets a CRD's conversion stanza, and the annotation that
// says this install wrote it. A CRD that is not installed is left alone: the
// next CRD event brings the reconciler back. So is a CRD whose conversion
// webhook another owner keeps (Owns).
func (r *Reconciler) applyConversion(ctx context.Context, name string, conv *apiextensionsv1.CustomResourceConversion, log logr.Logger) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.opts.Cache.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !OwnsConversion(crd, r.opts.Instance, conv) {
		r.mu.Lock()
		first := !r.foreign[name]
		r.foreign[name] = true
		r.mu.Unlock()
		if first {
			log.Info("a CRD's conversion webhook belongs to another owner: left as it is; to hand its conversion to this install, set its spec.conversion.strategy to None (docs/install.md, \"Configuration\")",
				"crd", name, "owner", crd.Annotations[ConversionOwnerAnnotation], "webhook", describeConversion(crd.Spec.Conversion))
		}
		return nil
	}
	r.mu.Lock()
	delete(r.foreign, name)
	r.mu.Unlock()
	raw, err := json.Marshal(conv)
	if err != nil {
		return err
	}
	var conversion map[string]any
	if err := json.Unmarshal(raw, &conversion); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiextensionsv1.SchemeGroupVersion.String(),
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]any{
			"name":        name,
			"annotations": map[string]any{ConversionOwnerAnnotation: r.opts.Instance},
		},
		"spec": map[string]any{"conversion": conversion},
	}}
	if err := r.opts.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply the conversion stanza of CRD %s: %w", name, err)
	}
	return nil
}

// OwnsConversion says whether instance may write crd's conversion stanza
// (desired is the stanza it would write): when the CRD converts nothing
// yet, when instance wrote it (ConversionOwnerAnnotation), or when it is
// unmarked and already points at instance's own Service or server (an
// install from before the annotation). A webhook another install or
// another owner (Deckhouse's own, on a Deckhouse cluster) keeps is never
// taken over: two converters would fight over every object's
// conversion.
func OwnsConversion(crd *apiextensionsv1.CustomResourceDefinition, instance string, desired *apiextensionsv1.CustomResourceConversion) bool {
	live := crd.Spec.Conversion
	if live == nil || live.Strategy != apiextensionsv1.WebhookConverter || live.Webhook == nil || live.Webhook.ClientConfig == nil {
		return true
	}
	if owner, ok := crd.Annotations[ConversionOwnerAnnotation]; ok {
		return owner == instance
	}
	if desired == nil || desired.Webhook == nil || desired.Webhook.ClientConfig == nil {
		return false
	}
	have, want := live.Webhook.ClientConfig, desired.Webhook.ClientConfig
	switch {
	case have.Service != nil && want.Service != nil:
		return have.Service.Namespace == want.Service.Namespace && have.Service.Name == want.Service.Name
	case have.URL != nil && want.URL != nil:
		return *have.URL == *want.URL
	}
	return false
}

// describeConversion names where a conversion webhook points, for logs.
func describeConversion(c *apiextensionsv1.CustomResourceConversion) string {
	if c == nil || c.Webhook == nil || c.Webhook.ClientConfig == nil {
		return ""
	}
	if s := c.Webhook.ClientConfig.Service; s != nil {
		return "service " + s.Namespace + "/" + s.Name
	}
	if u := c.Webhook.ClientConfig.URL; u != nil {
		return *u
	}
	return ""
}

func toApply(obj client.Object, apiVersion, kind string) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u, nil
}

// Written is the readiness check: this replica's cache shows every static
// webhook in its configuration and every converted CRD pointing at a
// webhook. The leader writes them; the other replicas see them.
// writtenCheckTimeout bounds Written's reads of the cache; a synced cache
// answers in microseconds.
const writtenCheckTimeout = 250 * time.Millisecond

func (r *Reconciler) Written() error {
	// A readiness check must answer, not wait: a cache that cannot sync
	// (its list forbidden, the API server away) would otherwise hold
	// /readyz, and every probe after it, until it does.
	ctx, cancel := context.WithTimeout(context.Background(), writtenCheckTimeout)
	defer cancel()
	// Only the names matter here: the target may not be known yet.
	desired := Render(r.opts.Static, Target{URL: "https://unknown"})
	validating, mutating := ConfigurationNames(r.opts.Instance)
	var missing []string
	if len(desired.Validating.Webhooks) > 0 {
		live := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		names := map[string]bool{}
		if err := r.opts.Cache.Get(ctx, client.ObjectKey{Name: validating}, live); err == nil {
			for _, w := range live.Webhooks {
				names[w.Name] = true
			}
		}
		for _, w := range desired.Validating.Webhooks {
			if !names[w.Name] {
				missing = append(missing, validating+"/"+w.Name)
			}
		}
	}
	if len(desired.Mutating.Webhooks) > 0 {
		live := &admissionregistrationv1.MutatingWebhookConfiguration{}
		names := map[string]bool{}
		if err := r.opts.Cache.Get(ctx, client.ObjectKey{Name: mutating}, live); err == nil {
			for _, w := range live.Webhooks {
				names[w.Name] = true
			}
		}
		for _, w := range desired.Mutating.Webhooks {
			if !names[w.Name] {
				missing = append(missing, mutating+"/"+w.Name)
			}
		}
	}
	for name := range desired.Conversions {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := r.opts.Cache.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue // nothing to convert until it is installed
			}
			missing = append(missing, "crd/"+name)
			continue
		}
		if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
			missing = append(missing, "crd/"+name+" conversion")
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("not written yet: %v", missing)
	}
	return nil
}
