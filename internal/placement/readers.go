package placement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	appsv1 "k8s.io/api/apps/v1"
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

// The decisions read classes and releases through one client.Reader: the
// host's readers of the followed kinds on the hot path (NotFound, empty
// while a kind is not served), Host.APIReader to confirm a denial. One
// implementation each, as pvsafe's Lookup, so that the two readings cannot
// drift apart.

// newClassKind follows AffinityClasses. Their CRD ships with Gatehouse, but
// is followed as an optional kind all the same: a missing CRD reads as no
// classes, not as a cache that never syncs.
func newClassKind(host module.Host) (module.Kind, error) {
	return host.FollowKind(&cozyv1alpha1.AffinityClass{}, module.Scope{}, nil)
}

// newReleaseKind follows the metadata of the HelmReleases Cozystack creates
// for applications (labelled apps.cozystack.io/application.kind). The Flux
// CRD may be absent: the module then serves Pods only, and follows
// HelmReleases once the CRD appears.
func newReleaseKind(host module.Host) (module.Kind, error) {
	return host.FollowKind(releaseMetadata(), module.Scope{Labels: labelExists(applicationKindLabel)}, nil)
}

var errClassAPI = errors.New("the AffinityClass API (cozystack.io/v1alpha1) is not served: install its CRD")

// readerClasses reads AffinityClasses through r.
type readerClasses struct{ r client.Reader }

// get returns the class named name; found is false when it does not exist.
func (l readerClasses) get(ctx context.Context, name string) (*class, bool, error) {
	ac := &cozyv1alpha1.AffinityClass{}
	err := l.r.Get(ctx, client.ObjectKey{Name: name}, ac, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case meta.IsNoMatchError(err):
		return nil, false, errClassAPI
	case err != nil:
		return nil, false, fmt.Errorf("read AffinityClass %s: %w", name, err)
	}
	return classOf(ac), true, nil
}

// readerReleases reads the metadata of applications' HelmReleases through
// r.
type readerReleases struct{ r client.Reader }

var releaseGVK = helmv2.GroupVersion.WithKind("HelmRelease")

func releaseMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(releaseGVK)
	return m
}

// get returns a release's metadata; found is false when it does not exist,
// is not an application's, or the Flux API is not served.
func (l readerReleases) get(ctx context.Context, key releaseKey) (*metav1.PartialObjectMetadata, bool, error) {
	m := releaseMetadata()
	err := l.r.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, m, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("read HelmRelease %s: %w", key, err)
	}
	if _, ok := m.Labels[applicationKindLabel]; !ok {
		return nil, false, nil
	}
	return m, true, nil
}

// usingClass lists the applications' releases labelled with class.
func (l readerReleases) usingClass(ctx context.Context, class string) ([]releaseKey, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(releaseGVK.GroupVersion().WithKind("HelmReleaseList"))
	err := l.r.List(ctx, list, client.MatchingLabels{classLabel: class}, client.HasLabels{applicationKindLabel}, client.UnsafeDisableDeepCopy)
	switch {
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list HelmReleases: %w", err)
	}
	out := make([]releaseKey, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, releaseKey{Namespace: m.Namespace, Name: m.Name})
	}
	return out, nil
}

// readerTenants reads a namespace's Secret cozystack-values through r and
// parses it on each read: for confirming a denial, where tenantIndex's
// parse-once-per-change has nothing to save.
type readerTenants struct{ r client.Reader }

func (l readerTenants) get(ctx context.Context, namespace string) (*tenant, error) {
	s := &corev1.Secret{}
	err := l.r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: tenantSecretName}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, tenantSecretName, err)
	}
	return parseTenant(namespace, s.Data[tenantValuesKey]), nil
}

// ownerCache reads owners' metadata. The common workload kinds are cached
// from the start; any other kind (an operator's CR) is followed through the
// host the first time a Pod names it, up to a bound (so a CRD removed later
// stops its informer). Never a live GET.
//
// Anyone who may create a Pod names any kind in its ownerReferences (a
// dry-run Pod suffices), so only a kind the API server serves and Gatehouse
// may list and watch keeps one of the bounded slots: the others can own
// nothing Gatehouse could read, and would hold a slot for good. The host
// says which: a kind it finds forbidden is released at once.
type ownerCache struct {
	cache  cache.Cache
	host   module.Host
	mapper meta.RESTMapper
	opts   Options

	mu sync.Mutex
	// kinds are the owner kinds read: nil for a workload kind (read from
	// cache), the host's reader for a followed one.
	kinds map[schema.GroupVersionKind]module.Kind
	// clusterScoped caches the RESTMapper's answer per kind: asking it on
	// every hop cost two thirds of a decision.
	clusterScoped map[schema.GroupVersionKind]bool
	// refused are the served kinds Gatehouse may not list or watch, and
	// when to follow them again (RBAC may be granted later).
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
// before it is followed (and the API server asked) again.
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
		kinds:         map[schema.GroupVersionKind]module.Kind{},
		clusterScoped: map[schema.GroupVersionKind]bool{},
		refused:       map[schema.GroupVersionKind]time.Time{},
		timedOut:      map[schema.GroupVersionKind]struct{}{},
		logged:        map[schema.GroupVersionKind]string{}}
	for _, gvk := range workloadKinds {
		o.kinds[gvk] = nil
	}
	return o, nil
}

// Owner implements owners.
func (o *ownerCache) Owner(ctx context.Context, namespace string, ref metav1.OwnerReference) (metav1.Object, bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, false, fmt.Errorf("apiVersion %q: %w", ref.APIVersion, err)
	}
	gvk := gv.WithKind(ref.Kind)
	r, err := o.follow(ctx, gvk)
	if err != nil {
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
	if err := r.Get(ctx, key, m, client.UnsafeDisableDeepCopy); err != nil {
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

// follow returns the reader of gvk's owners, or says at once why gvk cannot
// be read. The only wait is the host's, bounded by OwnerWait, for a served
// kind whose state is not known yet (seen for the first time, or its CRD
// back: the access asked, the informer syncing), and a kind whose wait
// timed out is not waited for again until its state changed: a kind that
// will not become ready costs one wait, not one per Pod.
func (o *ownerCache) follow(ctx context.Context, gvk schema.GroupVersionKind) (client.Reader, error) {
	o.mu.Lock()
	k, ok := o.kinds[gvk]
	_, mapped := o.clusterScoped[gvk]
	o.mu.Unlock()
	if ok && mapped && k == nil {
		return o.cache, nil
	}
	if ok && mapped && k.State() == module.KindServed {
		return k, nil
	}
	// The host answers from its CRD cache: a kind whose CRD is absent or
	// was removed since it was followed is known at once.
	if !o.host.Served(gvk) {
		return nil, o.unfollowed(ctx, gvk, errKindNotServed, "")
	}
	if !ok || !mapped {
		var err error
		if k, err = o.startFollowing(ctx, gvk); err != nil {
			return nil, err
		}
		if k == nil {
			return o.cache, nil
		}
	}
	state := k.State()
	if state == module.KindPending {
		o.mu.Lock()
		_, gaveUp := o.timedOut[gvk]
		o.mu.Unlock()
		if gaveUp {
			return nil, o.unfollowed(ctx, gvk, errKindNotSynced, "")
		}
		waitCtx, cancel := context.WithTimeout(ctx, o.opts.OwnerWait)
		state = k.Wait(waitCtx)
		cancel()
		switch state {
		case module.KindServed:
			ownerWaits.WithLabelValues("synced").Inc()
		case module.KindPending:
			ownerWaits.WithLabelValues("timed-out").Inc()
			o.mu.Lock()
			o.timedOut[gvk] = struct{}{}
			o.mu.Unlock()
		}
	}
	switch state {
	case module.KindServed:
		return k, nil
	case module.KindNotServed:
		return nil, o.unfollowed(ctx, gvk, errKindNotServed, "")
	case module.KindForbidden:
		return nil, o.refuse(ctx, gvk, k)
	}
	return nil, o.unfollowed(ctx, gvk, errKindNotSynced, "")
}

// refuse releases a kind the host found Gatehouse may not list and watch:
// it keeps no slot, and is not followed again before refusedRetry.
func (o *ownerCache) refuse(ctx context.Context, gvk schema.GroupVersionKind, k module.Kind) error {
	o.mu.Lock()
	if o.kinds[gvk] == k {
		delete(o.kinds, gvk)
		ownerKinds.Set(float64(len(o.kinds)))
	}
	o.refused[gvk] = time.Now().Add(refusedRetry)
	o.mu.Unlock()
	k.Release()
	return o.unfollowed(ctx, gvk, errKindNotPermitted, o.notListable(gvk))
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

// startFollowing takes a slot for gvk, served, unless it was refused a
// moment ago or the slots are full. A nil Kind is a workload kind.
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
		// Served again (or no longer): a later timeout is news.
		o.mu.Lock()
		delete(o.timedOut, gvk)
		o.mu.Unlock()
	}
	k, err = o.host.FollowKind(metadataOf(gvk), module.Scope{}, onChange)
	if err != nil {
		return nil, err
	}
	o.kinds[gvk] = k
	ownerKinds.Set(float64(len(o.kinds)))
	return k, nil
}

// notListable is the hint of a kind refused: its resource, when the
// RESTMapper knows it.
func (o *ownerCache) notListable(gvk schema.GroupVersionKind) string {
	mapping, err := o.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return ""
	}
	return notListable(mapping.Resource)
}

func notListable(gvr schema.GroupVersionResource) string {
	return fmt.Sprintf(": Gatehouse may not list and watch %s; grant it through the chart's modules.placement.ownerResources", gvr.GroupResource())
}

// classOf is a class as the decisions read it.
func classOf(ac *cozyv1alpha1.AffinityClass) *class {
	return &class{Name: ac.Name, NodeSelector: ac.Spec.NodeSelector, Required: ac.Spec.Required(), Terminating: ac.DeletionTimestamp != nil}
}

var nodeGVK = corev1.SchemeGroupVersion.WithKind("Node")

// newNodeCache caches the Nodes' metadata, stripped to their names and
// labels: what judging a Pod bound to a Node reads, at a few hundred bytes a
// Node.
func newNodeCache(host module.Host) (nodes, error) {
	c, err := host.NewCache("nodes", cache.Options{ByObject: map[client.Object]cache.ByObject{
		metadataOf(nodeGVK): {Transform: keepNodeLabels},
	}})
	if err != nil {
		return nil, err
	}
	return readerNodes{c}, nil
}

// keepNodeLabels is the Node cache's transform: a Node's name and labels.
func keepNodeLabels(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	slim := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: m.Labels,
	}}
	return slim, nil
}

// readerNodes reads Nodes' labels through r: the Node cache, or the API
// server to confirm a denial.
type readerNodes struct{ r client.Reader }

func (l readerNodes) get(ctx context.Context, name string) (map[string]string, bool, error) {
	m := metadataOf(nodeGVK)
	err := l.r.Get(ctx, client.ObjectKey{Name: name}, m, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("read Node %s: %w", name, err)
	}
	return m.Labels, true, nil
}
