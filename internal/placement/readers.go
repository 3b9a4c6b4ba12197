package placement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	cozyv1alpha1 "github.com/gatehouse-dev/gatehouse/api/cozystack.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// tenantIndex keeps every namespace's parsed cozystack-values: a Secret is
// parsed once per change, never per request.
type tenantIndex struct {
	synced func() bool
	mu     sync.RWMutex
	byNS   map[string]*tenant
}

func newTenantIndex(ctx context.Context, host module.Host) (*tenantIndex, error) {
	c, err := host.NewCache("tenants", tenantSecrets())
	if err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return nil, err
	}
	t := &tenantIndex{byNS: map[string]*tenant{}}
	store := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		parsed := parseTenant(s.Namespace, s.Data[tenantValuesKey])
		t.mu.Lock()
		t.byNS[s.Namespace] = parsed
		t.mu.Unlock()
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    store,
		UpdateFunc: func(_, obj any) { store(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if s, ok := obj.(*corev1.Secret); ok {
				t.mu.Lock()
				delete(t.byNS, s.Namespace)
				t.mu.Unlock()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	t.synced = reg.HasSynced
	return t, nil
}

// get returns the namespace's tenant settings, nil for no tenant.
func (t *tenantIndex) get(_ context.Context, namespace string) (*tenant, error) {
	if !t.synced() {
		return nil, errors.New("tenant settings (Secrets cozystack-values) not loaded yet")
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byNS[namespace], nil
}

// classReader reads AffinityClasses. Their CRD ships with Gatehouse, but is
// followed as an optional kind all the same: a missing CRD is an error to
// report, not a reason for a cache that never syncs.
type classReader struct {
	cache cache.Cache
	kind  module.Kind
}

func newClassReader(host module.Host) (*classReader, error) {
	c, err := host.NewCache("affinityclasses", cache.Options{})
	if err != nil {
		return nil, err
	}
	k, err := host.FollowKind(c, &cozyv1alpha1.AffinityClass{}, nil)
	if err != nil {
		return nil, err
	}
	return &classReader{cache: c, kind: k}, nil
}

var errClassAPI = errors.New("the AffinityClass API (cozystack.io/v1alpha1) is not served: install its CRD")

// get returns the class named name; found is false when it does not exist.
func (r *classReader) get(ctx context.Context, name string) (*class, bool, error) {
	if !r.kind.Readable() {
		return nil, false, errClassAPI
	}
	ac := &cozyv1alpha1.AffinityClass{}
	if err := r.cache.Get(ctx, client.ObjectKey{Name: name}, ac, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("read AffinityClass %s: %w", name, err)
	}
	return classOf(ac), true, nil
}

// releaseReader holds the metadata of the HelmReleases Cozystack creates
// for applications (labelled apps.cozystack.io/application.kind). The Flux
// CRD may be absent: the module then serves Pods only, and follows
// HelmReleases once the CRD appears.
type releaseReader struct {
	cache cache.Cache
	kind  module.Kind
}

var releaseGVK = helmv2.GroupVersion.WithKind("HelmRelease")

func releaseMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(releaseGVK)
	return m
}

func newReleaseReader(host module.Host) (*releaseReader, error) {
	// A cache resolves ByObject kinds when built, and the Flux CRD may be
	// absent then: this cache's only kind is scoped by its default.
	c, err := host.NewCache("helmreleases", cache.Options{DefaultLabelSelector: labelExists(applicationKindLabel)})
	if err != nil {
		return nil, err
	}
	k, err := host.FollowKind(c, releaseMetadata(), nil)
	if err != nil {
		return nil, err
	}
	return &releaseReader{cache: c, kind: k}, nil
}

// get returns a release's metadata; found is false when it does not exist,
// is not an application's, or the Flux API is not served.
func (r *releaseReader) get(ctx context.Context, key releaseKey) (*metav1.PartialObjectMetadata, bool, error) {
	if !r.kind.Readable() {
		return nil, false, nil
	}
	m := releaseMetadata()
	if err := r.cache.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, m, client.UnsafeDisableDeepCopy); err != nil {
		var notCached *cache.ErrResourceNotCached
		if apierrors.IsNotFound(err) || errors.As(err, &notCached) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("read HelmRelease %s: %w", key, err)
	}
	return m, true, nil
}

// usingClass lists the releases labelled with class.
func (r *releaseReader) usingClass(ctx context.Context, class string) ([]releaseKey, error) {
	if !r.kind.Readable() {
		return nil, nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(helmv2.GroupVersion.WithKind("HelmReleaseList"))
	if err := r.cache.List(ctx, list, client.MatchingLabels{classLabel: class}, client.UnsafeDisableDeepCopy); err != nil {
		var notCached *cache.ErrResourceNotCached
		if errors.As(err, &notCached) {
			return nil, nil
		}
		return nil, fmt.Errorf("list HelmReleases: %w", err)
	}
	out := make([]releaseKey, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, releaseKey{Namespace: m.Namespace, Name: m.Name})
	}
	return out, nil
}

// ownerCache reads owners' metadata. The common workload kinds are cached
// from the start; any other kind (an operator's CR) gets a metadata informer
// the first time a Pod names it, up to a bound, through the host's
// optional-kind helper (so a CRD removed later stops it). Never a live GET.
//
// Anyone who may create a Pod names any kind in its ownerReferences (a
// dry-run Pod suffices), so only a kind the API server serves and Gatehouse
// may list and watch takes one of the bounded slots: the others can own
// nothing Gatehouse could read, and would hold a slot for good.
type ownerCache struct {
	cache  cache.Cache
	host   module.Host
	mapper meta.RESTMapper
	opts   Options
	// mayListWatch asks the API server whether Gatehouse may list and
	// watch a resource cluster-wide.
	mayListWatch func(ctx context.Context, gvr schema.GroupVersionResource) (bool, error)

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]module.Kind
	// clusterScoped caches the RESTMapper's answer per kind: asking it on
	// every hop cost two thirds of a decision.
	clusterScoped map[schema.GroupVersionKind]bool
	// refused are the served kinds Gatehouse may not list or watch, and
	// when to ask again (RBAC may be granted later).
	refused map[schema.GroupVersionKind]time.Time
	// timedOut are the followed kinds whose informer did not sync within
	// OwnerWait; no decision waits for them again until it does.
	timedOut map[schema.GroupVersionKind]struct{}
	// logged is the last reason logged per kind that could not be read.
	logged map[schema.GroupVersionKind]string
}

// errOwnerKindsExhausted is a lineage that needs a kind beyond the bound:
// the Pod cannot be decided.
var errOwnerKindsExhausted = errors.New("owner kinds exhausted")

// refusedRetry is how long a kind Gatehouse may not list stays refused
// before the API server is asked again.
const refusedRetry = time.Minute

func metadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// workloadKinds are the owners of nearly every Pod.
var workloadKinds = []schema.GroupVersionKind{
	appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
	appsv1.SchemeGroupVersion.WithKind("Deployment"),
	appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
	appsv1.SchemeGroupVersion.WithKind("DaemonSet"),
	batchv1.SchemeGroupVersion.WithKind("Job"),
	batchv1.SchemeGroupVersion.WithKind("CronJob"),
}

func newOwnerCache(host module.Host, opts Options) (*ownerCache, error) {
	byObject := map[client.Object]cache.ByObject{}
	for _, gvk := range workloadKinds {
		byObject[metadataOf(gvk)] = cache.ByObject{}
	}
	c, err := host.NewCache("owners", cache.Options{ByObject: byObject})
	if err != nil {
		return nil, err
	}
	o := &ownerCache{cache: c, host: host, mapper: host.RESTMapper(), opts: opts,
		mayListWatch:  selfAccess(host.Client()),
		kinds:         map[schema.GroupVersionKind]module.Kind{},
		clusterScoped: map[schema.GroupVersionKind]bool{},
		refused:       map[schema.GroupVersionKind]time.Time{},
		timedOut:      map[schema.GroupVersionKind]struct{}{},
		logged:        map[schema.GroupVersionKind]string{}}
	for _, gvk := range workloadKinds {
		o.kinds[gvk] = always{}
	}
	return o, nil
}

// selfAccess asks with SelfSubjectAccessReviews, which every authenticated
// identity may create.
func selfAccess(c client.Client) func(context.Context, schema.GroupVersionResource) (bool, error) {
	return func(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
		for _, verb := range []string{"list", "watch"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
			}}
			if err := c.Create(ctx, review); err != nil {
				return false, fmt.Errorf("SelfSubjectAccessReview (%s %s): %w", verb, gvr.GroupResource(), err)
			}
			if !review.Status.Allowed {
				return false, nil
			}
		}
		return true, nil
	}
}

type always struct{}

func (always) Readable() bool { return true }
func (always) Release()       {}

// Owner implements owners.
func (o *ownerCache) Owner(ctx context.Context, namespace string, ref metav1.OwnerReference) (metav1.Object, bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, false, fmt.Errorf("apiVersion %q: %w", ref.APIVersion, err)
	}
	gvk := gv.WithKind(ref.Kind)
	if err := o.follow(ctx, gvk); err != nil {
		return nil, false, err
	}
	o.mu.Lock()
	clusterScoped := o.clusterScoped[gvk]
	o.mu.Unlock()
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	if clusterScoped {
		key.Namespace = ""
	}
	m := metadataOf(gvk)
	if err := o.cache.Get(ctx, key, m, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return m, true, nil
}

// Why an owner kind cannot be read from a cache. Each is answered at once:
// none of them ends by waiting (issue 17: a kind whose CRD was gone made
// every Pod naming it wait for the readiness bound).
var (
	errKindNotServed    = errors.New("not served by the API server")
	errKindNotPermitted = errors.New("not listable by Gatehouse")
	errKindNotSynced    = errors.New("not cached yet")
)

// unfollowedReason is the metric label of each.
var unfollowedReason = map[error]string{
	errKindNotServed:    "not-served",
	errKindNotPermitted: "not-permitted",
	errKindNotSynced:    "not-synced",
}

// maxLoggedKinds bounds the kinds remembered as logged: anyone who may
// create a Pod names kinds at will, and each would be one entry.
const maxLoggedKinds = 1024

// follow makes sure gvk is readable from the cache, or says at once why
// not. The only wait is for the informer of a served, listable kind that is
// starting (seen for the first time, or its CRD back), and a kind whose wait
// timed out is not waited for again until it became readable: a kind that
// will not become ready costs one wait, not one per Pod.
func (o *ownerCache) follow(ctx context.Context, gvk schema.GroupVersionKind) error {
	o.mu.Lock()
	k, ok := o.kinds[gvk]
	_, mapped := o.clusterScoped[gvk]
	o.mu.Unlock()
	if ok && mapped && k.Readable() {
		return nil
	}
	// The host answers from its CRD cache: a kind whose CRD is absent or
	// was removed since it was followed is known at once.
	if !o.host.Served(gvk) {
		return o.unfollowed(ctx, gvk, errKindNotServed, "")
	}
	if !ok || !mapped {
		var err error
		if k, err = o.startFollowing(ctx, gvk); err != nil {
			return err
		}
		if k.Readable() {
			return nil
		}
	}
	o.mu.Lock()
	_, gaveUp := o.timedOut[gvk]
	o.mu.Unlock()
	if gaveUp {
		return o.unfollowed(ctx, gvk, errKindNotSynced, "")
	}
	deadline := time.Now().Add(o.opts.OwnerWait)
	for !k.Readable() {
		if time.Now().After(deadline) {
			ownerWaits.WithLabelValues("timed-out").Inc()
			o.mu.Lock()
			o.timedOut[gvk] = struct{}{}
			o.mu.Unlock()
			return o.unfollowed(ctx, gvk, errKindNotSynced, "")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ownerWaits.WithLabelValues("synced").Inc()
	return nil
}

// unfollowed counts a link not followed because its kind cannot be read,
// logs the first time a kind is found in that state, and returns the
// error the lineage records.
func (o *ownerCache) unfollowed(ctx context.Context, gvk schema.GroupVersionKind, why error, hint string) error {
	reason := unfollowedReason[why]
	ownerLinksUnfollowed.WithLabelValues(reason).Inc()
	o.mu.Lock()
	logged, seen := o.logged[gvk]
	first := logged != reason && (seen || len(o.logged) < maxLoggedKinds)
	if first {
		o.logged[gvk] = reason
	}
	o.mu.Unlock()
	err := fmt.Errorf("kind %s is %w%s", gvk, why, hint)
	if first {
		logf.FromContext(ctx).Info("owner kind cannot be read from a cache: links through it are not followed (logged once per kind and reason; counted in gatehouse_placement_owner_links_unfollowed_total)",
			"kind", gvk.String(), "reason", reason, "detail", err.Error())
	}
	return err
}

// startFollowing checks that gvk, served, may take a slot and takes it.
func (o *ownerCache) startFollowing(ctx context.Context, gvk schema.GroupVersionKind) (module.Kind, error) {
	mapping, err := o.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.clusterScoped[gvk] = mapping.Scope.Name() == meta.RESTScopeNameRoot
	k, followed := o.kinds[gvk]
	retry, wasRefused := o.refused[gvk]
	o.mu.Unlock()
	if followed {
		return k, nil
	}
	if wasRefused && time.Now().Before(retry) {
		return nil, o.unfollowed(ctx, gvk, errKindNotPermitted, notListable(mapping.Resource))
	}
	askCtx, cancel := context.WithTimeout(ctx, o.opts.OwnerWait)
	defer cancel()
	allowed, err := o.mayListWatch(askCtx, mapping.Resource)
	if err != nil {
		return nil, err
	}
	if !allowed {
		o.mu.Lock()
		o.refused[gvk] = time.Now().Add(refusedRetry)
		o.mu.Unlock()
		return nil, o.unfollowed(ctx, gvk, errKindNotPermitted, notListable(mapping.Resource))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.refused, gvk)
	if k, ok := o.kinds[gvk]; ok {
		return k, nil
	}
	if len(o.kinds) >= o.opts.MaxOwnerKinds {
		ownerKindsRefused.Inc()
		return nil, fmt.Errorf("%w: kind %s not followed, %d owner kinds are followed already", errOwnerKindsExhausted, gvk, o.opts.MaxOwnerKinds)
	}
	onChange := func() {
		// Readable again (or no longer): a later timeout is news.
		o.mu.Lock()
		delete(o.timedOut, gvk)
		o.mu.Unlock()
	}
	if k, err = o.host.FollowKind(o.cache, metadataOf(gvk), onChange); err != nil {
		return nil, err
	}
	o.kinds[gvk] = k
	ownerKinds.Set(float64(len(o.kinds)))
	return k, nil
}

func notListable(gvr schema.GroupVersionResource) string {
	return fmt.Sprintf(": Gatehouse may not list and watch %s; grant it through the chart's modules.placement.ownerResources", gvr.GroupResource())
}

// classOf is a class as the decisions read it.
func classOf(ac *cozyv1alpha1.AffinityClass) *class {
	return &class{Name: ac.Name, NodeSelector: ac.Spec.NodeSelector, Required: ac.Spec.Required(), Terminating: ac.DeletionTimestamp != nil}
}
