package kinds_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/gatehouse-dev/gatehouse/internal/kinds"
	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// builtCache is a cache the tracker built, which says when it stopped.
type builtCache struct {
	cache.Cache
	opts    cache.Options
	stopped chan struct{}
}

func (c *builtCache) Start(ctx context.Context) error {
	defer close(c.stopped)
	return c.Cache.Start(ctx)
}

func (c *builtCache) isStopped() bool {
	select {
	case <-c.stopped:
		return true
	default:
		return false
	}
}

// builtCaches records the caches a tracker builds (Options.NewCache).
type builtCaches struct {
	mu     sync.Mutex
	caches []*builtCache
}

func (b *builtCaches) maker(newCache func(cache.Options) cache.Cache) func(cache.Options) (cache.Cache, error) {
	return func(opts cache.Options) (cache.Cache, error) {
		c := &builtCache{Cache: newCache(opts), opts: opts, stopped: make(chan struct{})}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.caches = append(b.caches, c)
		return c, nil
	}
}

func (b *builtCaches) all() []*builtCache {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*builtCache(nil), b.caches...)
}

func (b *builtCaches) only(t *testing.T) *builtCache {
	t.Helper()
	all := b.all()
	if len(all) != 1 {
		t.Fatalf("%d caches built, want 1", len(all))
	}
	return all[0]
}

// syncedSeries are the gatehouse_cache_synced values of gvk's caches.
func syncedSeries(t *testing.T, gvk schema.GroupVersionKind) []float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	go func() { metrics.CacheSynced.Collect(ch); close(ch) }()
	var out []float64
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "cache" && strings.HasPrefix(l.GetValue(), "kinds/") && strings.HasSuffix(l.GetValue(), "-"+module.GVKString(gvk)) {
				out = append(out, d.GetGauge().GetValue())
			}
		}
	}
	return out
}

// TestFollowersShareTheCacheOfTheirKindAndScope: followers of one kind in
// one scope share one cache, built by the tracker and scoped by the API
// server; another scope or shape is another cache; a cache stops only once
// its last follower released it.
func TestFollowersShareTheCacheOfTheirKindAndScope(t *testing.T) {
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{CRDPaths: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	group := "s" + rand.String(5) + ".example.com"
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}
	widget := func(name, team string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace("default")
		u.SetName(name)
		if team != "" {
			u.SetLabels(map[string]string{"team": team})
		}
		return u
	}
	if err := cp.Client.Create(ctx, widgetCRD(group)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the CRD serves its kind", func() bool { return cp.Client.Create(ctx, widget("w-a", "a")) == nil })
	if err := cp.Client.Create(ctx, widget("w-b", "b")); err != nil {
		t.Fatal(err)
	}

	mapper, newCache := cachesOf(t, cp)
	crds := newCache(cache.Options{DefaultTransform: kinds.StripSchemas})
	var built builtCaches
	tracker, err := kinds.New(ctx, crds, kinds.Options{Scheme: cp.Scheme, Mapper: mapper, MayListWatch: kinds.SelfAccess(cp.Client),
		NewCache: built.maker(newCache)})
	if err != nil {
		t.Fatal(err)
	}
	teamA := module.Scope{Labels: labels.SelectorFromSet(labels.Set{"team": "a"})}
	teamB := module.Scope{Labels: labels.SelectorFromSet(labels.Set{"team": "b"})}
	// Two followers before the start (a module's Setup), as two modules
	// would follow the kind: built from equal, not identical, scopes.
	first, err := tracker.Follow(widget("", ""), teamA, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := tracker.Follow(widget("", ""), module.Scope{Labels: labels.SelectorFromSet(labels.Set{"team": "a"})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	shared := built.only(t)
	defer startTracker(ctx, t, cancel, crds, tracker)()

	waitCtx, cancelWait := context.WithTimeout(ctx, time.Minute)
	defer cancelWait()
	for _, k := range []*kinds.Handle{first, second} {
		if state := k.Wait(waitCtx); state != module.KindServed {
			t.Fatalf("a followed kind with its CRD served: state %s", state)
		}
	}
	if first.Informer() != second.Informer() {
		t.Fatal("two followers of one kind and scope read two informers")
	}
	// The scope is the API server's: the cache holds team a's widget only.
	if names := listNames(ctx, t, first, gvk); names != "w-a" {
		t.Fatalf("the followers of team a's widgets read %q, want w-a", names)
	}

	// Another scope, and another shape, is another cache.
	other, err := tracker.Follow(widget("", ""), teamB, nil)
	if err != nil {
		t.Fatal(err)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(gvk)
	metadataOnly, err := tracker.Follow(meta, teamA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(built.all()); n != 3 {
		t.Fatalf("%d caches built for two scopes and two shapes, want 3", n)
	}
	for _, k := range []*kinds.Handle{other, metadataOnly} {
		if state := k.Wait(waitCtx); state != module.KindServed {
			t.Fatalf("a kind followed at run time: state %s", state)
		}
	}
	if names := listNames(ctx, t, other, gvk); names != "w-b" {
		t.Fatalf("the follower of team b's widgets read %q, want w-b", names)
	}
	if got := syncedSeries(t, gvk); len(got) != 3 || got[0]+got[1]+got[2] != 3 {
		t.Fatalf("gatehouse_cache_synced of the kind's caches %v, want three series at 1", got)
	}

	// One follower leaving keeps the shared cache for the other.
	first.Release()
	if shared.isStopped() {
		t.Fatal("the shared cache stopped while a follower holds it")
	}
	if second.State() != module.KindServed || listNames(ctx, t, second, gvk) != "w-a" {
		t.Fatalf("the remaining follower: state %s", second.State())
	}
	second.Release()
	waitFor(t, "the shared cache stops with its last follower", shared.isStopped)
	if got := syncedSeries(t, gvk); len(got) != 2 {
		t.Fatalf("gatehouse_cache_synced after a cache stopped: %v, want the two others' series only", got)
	}
	for _, c := range built.all()[1:] {
		if c.isStopped() {
			t.Fatal("releasing one scope's followers stopped another scope's cache")
		}
	}
	other.Release()
	metadataOnly.Release()
	for _, c := range built.all() {
		waitFor(t, "every cache stops with its last follower", c.isStopped)
	}
}

// listNames lists k's objects, their names joined.
func listNames(ctx context.Context, t *testing.T, k *kinds.Handle, gvk schema.GroupVersionKind) string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := k.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range list.Items {
		names = append(names, u.GetName())
	}
	return strings.Join(names, ",")
}

// TestKindsFollowedBeforeStartGateReadiness: a kind followed before the
// tracker starts (during a module's Setup) holds readiness until its state
// is known; a kind followed later never makes a ready tracker unready.
func TestKindsFollowedBeforeStartGateReadiness(t *testing.T) {
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{CRDPaths: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The access check of each resource waits until the test lets it
	// through: the kind's state stays unknown until then.
	asked := make(chan string, 10)
	let := map[string]chan struct{}{"configmaps": make(chan struct{}), "secrets": make(chan struct{})}
	mayListWatch := func(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
		asked <- gvr.Resource
		select {
		case <-let[gvr.Resource]:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	mapper, newCache := cachesOf(t, cp)
	crds := newCache(cache.Options{DefaultTransform: kinds.StripSchemas})
	var built builtCaches
	tracker, err := kinds.New(ctx, crds, kinds.Options{Scheme: cp.Scheme, Mapper: mapper, MayListWatch: mayListWatch,
		NewCache: built.maker(newCache), AccessTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	atSetup, err := tracker.Follow(&corev1.ConfigMap{}, module.Scope{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer startTracker(ctx, t, cancel, crds, tracker)()

	if r := <-asked; r != "configmaps" {
		t.Fatalf("access asked for %s, want configmaps", r)
	}
	if tracker.Ready() {
		t.Fatal("ready while a kind followed before the start is not known")
	}
	if got := syncedSeries(t, corev1.SchemeGroupVersion.WithKind("ConfigMap")); len(got) != 1 || got[0] != 0 {
		t.Fatalf("gatehouse_cache_synced of a kind not known yet: %v, want one series at 0", got)
	}
	close(let["configmaps"])
	waitFor(t, "ready once the kind followed before the start is known", tracker.Ready)
	if state := atSetup.State(); state != module.KindServed {
		t.Fatalf("the kind followed before the start: state %s once ready", state)
	}

	atRunTime, err := tracker.Follow(&corev1.Secret{}, module.Scope{Namespaces: []string{"default"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-asked; r != "secrets" {
		t.Fatalf("access asked for %s, want secrets", r)
	}
	if !tracker.Ready() || atRunTime.State() != module.KindPending {
		t.Fatalf("a kind followed at run time, not known yet: ready %v, state %s; want ready, pending", tracker.Ready(), atRunTime.State())
	}
	close(let["secrets"])
	waitCtx, cancelWait := context.WithTimeout(ctx, time.Minute)
	defer cancelWait()
	if state := atRunTime.Wait(waitCtx); state != module.KindServed {
		t.Fatalf("the kind followed at run time: state %s", state)
	}
	if ns := built.all()[1].opts.DefaultNamespaces; len(ns) != 1 {
		t.Fatalf("the run-time kind's cache is scoped to namespaces %v, want default only", ns)
	}
}
