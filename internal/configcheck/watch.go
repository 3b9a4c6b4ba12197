package configcheck

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// watchKey identifies one shared informer: a kind and the label selector the
// API server applies to it. Configs watching the same kind with the same
// label selector share it, as Gatekeeper's watch manager shares watches.
type watchKey struct {
	gvk    schema.GroupVersionKind
	labels string
}

// watchSet starts an informer for each watchKey some config needs, counts
// its users, and stops it with the last one.
type watchSet struct {
	ctx  context.Context
	host module.Host

	mu      sync.Mutex
	watches map[watchKey]*sharedWatch
	seq     int
}

func newWatchSet(ctx context.Context, host module.Host) *watchSet {
	return &watchSet{ctx: ctx, host: host, watches: map[watchKey]*sharedWatch{}}
}

// sharedWatch is one informer, in a cache of its own scoped by the label
// selector, followed through the host so that a CRD installed later (or
// removed) starts (or stops) it.
type sharedWatch struct {
	set  *watchSet
	key  watchKey
	stop func()
	kind module.Kind
	refs int

	mu       sync.Mutex
	informer cache.Informer // nil while the kind is not readable
	feeds    map[*feed]bool
}

// feed fills one config's store of one watched resource from a shared
// informer, keeping the objects the watched resource's selectors select.
type feed struct {
	watch         *sharedWatch
	spec          *watchedSpec
	store         *render.MemoryStore
	clusterScoped bool
	nsLabels      func(namespace string) labels.Set
	// permit says whether the config's author may have objects of a
	// namespace read (access.go).
	permit   func(namespace string) bool
	onChange func()

	mu  sync.Mutex
	reg toolscache.ResourceEventHandlerRegistration
}

// acquire returns a feed of spec's objects (kind gvk) into a new store.
func (s *watchSet) acquire(spec *watchedSpec, gvk schema.GroupVersionKind, clusterScoped bool,
	nsLabels func(string) labels.Set, permit func(string) bool, onChange func()) (*feed, error) {
	store, err := render.NewMemoryStore(spec.indexer)
	if err != nil {
		return nil, err
	}
	f := &feed{spec: spec, store: store, clusterScoped: clusterScoped, nsLabels: nsLabels, permit: permit, onChange: onChange}
	key := watchKey{gvk: gvk, labels: spec.labels.String()}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.watches[key]
	if !ok {
		if w, err = s.start(key, spec); err != nil {
			return nil, err
		}
		s.watches[key] = w
	}
	w.refs++
	f.watch = w
	w.mu.Lock()
	w.feeds[f] = true
	informer := w.informer
	w.mu.Unlock()
	if informer != nil {
		f.attach(informer)
	}
	return f, nil
}

// synced returns the kind of the shared informer of gvk under selector
// when it has synced, for reading its cache; nil when there is none.
func (s *watchSet) synced(gvk schema.GroupVersionKind, selector labels.Selector) module.Kind {
	s.mu.Lock()
	w := s.watches[watchKey{gvk: gvk, labels: selector.String()}]
	s.mu.Unlock()
	if w == nil || w.kind == nil || w.kind.Informer() == nil {
		return nil
	}
	return w.kind
}

func (s *watchSet) start(key watchKey, spec *watchedSpec) (*sharedWatch, error) {
	s.seq++
	c, stop, err := s.host.StartCache(fmt.Sprintf("watch-%d-%s", s.seq, module.GVKString(key.gvk)), cache.Options{
		DefaultLabelSelector: spec.labels,
	})
	if err != nil {
		return nil, err
	}
	w := &sharedWatch{set: s, key: key, stop: stop, feeds: map[*feed]bool{}}
	kind, err := s.host.FollowKind(c, w.object(), w.kindChanged)
	if err != nil {
		stop()
		return nil, err
	}
	w.kind = kind
	return w, nil
}

func (w *sharedWatch) object() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(w.key.gvk)
	return u
}

// kindChanged attaches the feeds when the informer became readable and
// empties them when the kind went away.
func (w *sharedWatch) kindChanged() {
	var informer cache.Informer
	if w.kind != nil {
		informer = w.kind.Informer()
	}
	w.mu.Lock()
	w.informer = informer
	feeds := make([]*feed, 0, len(w.feeds))
	for f := range w.feeds {
		feeds = append(feeds, f)
	}
	w.mu.Unlock()
	for _, f := range feeds {
		if informer != nil {
			f.attach(informer)
		} else {
			f.detach()
			_ = f.store.Replace(nil)
			f.onChange()
		}
	}
}

// release drops f; the informer stops with its last feed.
func (s *watchSet) release(f *feed) {
	f.detach()
	w := f.watch
	w.mu.Lock()
	delete(w.feeds, f)
	w.mu.Unlock()
	s.mu.Lock()
	w.refs--
	last := w.refs == 0
	if last {
		delete(s.watches, w.key)
	}
	s.mu.Unlock()
	if last {
		if w.kind != nil {
			w.kind.Release()
		}
		w.stop()
	}
}

func (f *feed) attach(informer cache.Informer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reg != nil {
		return
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.upsert(obj) },
		UpdateFunc: func(_, obj any) { f.upsert(obj) },
		DeleteFunc: f.remove,
	})
	if err != nil {
		logf.FromContext(f.watch.set.ctx).Error(err, "event handler of a watched resource", "watched", f.spec.name)
		return
	}
	f.reg = reg
}

func (f *feed) detach() {
	f.mu.Lock()
	reg := f.reg
	f.reg = nil
	f.mu.Unlock()
	if reg == nil {
		return
	}
	f.watch.mu.Lock()
	informer := f.watch.informer
	f.watch.mu.Unlock()
	if informer != nil {
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
		if err := f.store.Upsert(f.spec.stored(u.Object)); err != nil {
			logf.FromContext(f.watch.set.ctx).Error(err, "store of a watched resource", "watched", f.spec.name,
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
	return f.permit(ns) && f.spec.selectsIn(u.Object, u.GetNamespace(), f.clusterScoped, f.nsLabels)
}

// resync judges every object of the informer again, after the namespaces
// the author may have read changed.
func (f *feed) resync(ctx context.Context) {
	if f.watch.kind == nil || f.watch.kind.Informer() == nil {
		return
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(f.watch.key.gvk.GroupVersion().WithKind(f.watch.key.gvk.Kind + "List"))
	if err := f.watch.kind.List(ctx, list); err != nil {
		logf.FromContext(ctx).Error(err, "re-judging a watched resource's objects", "watched", f.spec.name)
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
	if f.spec.nsSel == nil || f.clusterScoped || !f.synced() {
		return
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(f.watch.key.gvk.GroupVersion().WithKind(f.watch.key.gvk.Kind + "List"))
	if err := f.watch.kind.List(ctx, list, client.InNamespace(namespace)); err != nil {
		logf.FromContext(ctx).Error(err, "re-judging a namespace's watched objects", "namespace", namespace)
		return
	}
	for i := range list.Items {
		f.upsert(&list.Items[i])
	}
}
