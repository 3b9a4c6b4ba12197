package configcheck

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// watchKey identifies one shared informer: a kind and the label selector the
// API server applies to it. The host shares one cache between the configs
// watching the same kind with the same label selector, as Gatekeeper's watch
// manager shares watches, and stops it with the last one.
type watchKey struct {
	gvk    schema.GroupVersionKind
	labels string
}

// watchSet follows, through the host, the kind of every watched resource
// a config needs, and indexes the feeds by watchKey so that reading the
// current state can use an informer that has synced (listWatched).
type watchSet struct {
	ctx  context.Context
	host module.Host

	mu    sync.Mutex
	feeds map[watchKey]map[*feed]bool
}

func newWatchSet(ctx context.Context, host module.Host) *watchSet {
	return &watchSet{ctx: ctx, host: host, feeds: map[watchKey]map[*feed]bool{}}
}

// feed fills one config's store of one watched resource from the kind's
// shared informer, keeping the objects the watched resource's selectors
// select.
type feed struct {
	set           *watchSet
	key           watchKey
	spec          *spec.Watched
	store         *render.MemoryStore
	clusterScoped bool
	nsLabels      func(namespace string) labels.Set
	// permit says whether the config's author may have objects of a
	// namespace read (authz.Access).
	permit   func(namespace string) bool
	onChange func()

	mu sync.Mutex
	// kind is the feed's hold on the watched kind, set once FollowKind
	// returned.
	kind module.Kind
	// informer is the one reg is registered with.
	informer cache.Informer
	reg      toolscache.ResourceEventHandlerRegistration
}

// acquire returns a feed of spec's objects (kind gvk) into a new store.
func (s *watchSet) acquire(spec *spec.Watched, gvk schema.GroupVersionKind, clusterScoped bool,
	nsLabels func(string) labels.Set, permit func(string) bool, onChange func()) (*feed, error) {
	store, err := render.NewMemoryStore(spec.Indexer)
	if err != nil {
		return nil, err
	}
	f := &feed{set: s, key: watchKey{gvk: gvk, labels: spec.Labels.String()}, spec: spec, store: store,
		clusterScoped: clusterScoped, nsLabels: nsLabels, permit: permit, onChange: onChange}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	kind, err := s.host.FollowKind(u, module.Scope{Labels: spec.Labels}, f.kindChanged)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.kind = kind
	f.mu.Unlock()
	// The kind may have been readable already (another config follows
	// it): no change is reported then.
	if informer := kind.Informer(); informer != nil {
		f.attach(informer)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.feeds[f.key] == nil {
		s.feeds[f.key] = map[*feed]bool{}
	}
	s.feeds[f.key][f] = true
	return f, nil
}

// synced returns the kind of the shared informer of gvk under selector
// when it has synced, for reading its cache; nil when there is none.
func (s *watchSet) synced(gvk schema.GroupVersionKind, selector labels.Selector) module.Kind {
	s.mu.Lock()
	defer s.mu.Unlock()
	for f := range s.feeds[watchKey{gvk: gvk, labels: selector.String()}] {
		if f.kind.Informer() != nil {
			return f.kind
		}
	}
	return nil
}

// kindChanged attaches the feed when the informer became readable and
// empties it when the kind went away.
func (f *feed) kindChanged() {
	f.mu.Lock()
	kind := f.kind
	f.mu.Unlock()
	if kind == nil {
		// Still in acquire, which looks at the kind once it holds it.
		return
	}
	if informer := kind.Informer(); informer != nil {
		f.attach(informer)
		return
	}
	f.detach()
	_ = f.store.Replace(nil)
	f.onChange()
}

// release drops f; the host stops the informer with its last follower.
func (s *watchSet) release(f *feed) {
	f.detach()
	s.mu.Lock()
	delete(s.feeds[f.key], f)
	if len(s.feeds[f.key]) == 0 {
		delete(s.feeds, f.key)
	}
	s.mu.Unlock()
	f.kind.Release()
}

// attach registers the feed's handler with informer. An informer that
// replaced the one the feed was attached to (the kind gone and back)
// starts the store again from its initial list.
func (f *feed) attach(informer cache.Informer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reg != nil && f.informer == informer {
		return
	}
	if f.reg != nil {
		_ = f.informer.RemoveEventHandler(f.reg)
		f.reg, f.informer = nil, nil
		_ = f.store.Replace(nil)
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.upsert(obj) },
		UpdateFunc: func(_, obj any) { f.upsert(obj) },
		DeleteFunc: f.remove,
	})
	if err != nil {
		logf.FromContext(f.set.ctx).Error(err, "event handler of a watched resource", "watched", f.spec.Name)
		return
	}
	f.reg, f.informer = reg, informer
}

func (f *feed) detach() {
	f.mu.Lock()
	reg, informer := f.reg, f.informer
	f.reg, f.informer = nil, nil
	f.mu.Unlock()
	if reg != nil {
		_ = informer.RemoveEventHandler(reg)
	}
}

// synced says whether the store holds what the API server has: the
// handler has seen the informer's initial list.
func (f *feed) synced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reg != nil && f.reg.HasSynced()
}

func (f *feed) upsert(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if f.selects(u) {
		if err := f.store.Upsert(f.spec.Stored(u.Object)); err != nil {
			logf.FromContext(f.set.ctx).Error(err, "store of a watched resource", "watched", f.spec.Name,
				"namespace", u.GetNamespace(), "name", u.GetName())
		}
	} else {
		f.store.Delete(u.GetNamespace(), u.GetName())
	}
	f.onChange()
}

func (f *feed) remove(obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	f.store.Delete(u.GetNamespace(), u.GetName())
	f.onChange()
}

// selects says whether u belongs in the store: the watched resource selects
// it, and the author may have its namespace read.
func (f *feed) selects(u *unstructured.Unstructured) bool {
	ns := u.GetNamespace()
	if f.clusterScoped {
		ns = ""
	}
	return f.permit(ns) && f.spec.SelectsIn(u.Object, u.GetNamespace(), f.clusterScoped, f.nsLabels)
}

// resync judges every object of the informer again, after the namespaces
// the author may have read changed.
func (f *feed) resync(ctx context.Context) {
	if f.kind.Informer() == nil {
		return
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(f.key.gvk.GroupVersion().WithKind(f.key.gvk.Kind + "List"))
	if err := f.kind.List(ctx, list); err != nil {
		logf.FromContext(ctx).Error(err, "re-judging a watched resource's objects", "watched", f.spec.Name)
		return
	}
	// upsert removes what is no longer selected.
	for i := range list.Items {
		f.upsert(&list.Items[i])
	}
}

// namespaceChanged re-judges the objects of a namespace whose labels
// changed, when the watched resource selects namespaces by label.
func (f *feed) namespaceChanged(ctx context.Context, namespace string) {
	if f.spec.Namespaces == nil || f.clusterScoped || !f.synced() {
		return
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(f.key.gvk.GroupVersion().WithKind(f.key.gvk.Kind + "List"))
	if err := f.kind.List(ctx, list, client.InNamespace(namespace)); err != nil {
		logf.FromContext(ctx).Error(err, "re-judging a namespace's watched objects", "namespace", namespace)
		return
	}
	for i := range list.Items {
		f.upsert(&list.Items[i])
	}
}
