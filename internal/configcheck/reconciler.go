package configcheck

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/ondemand"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/trigger"
)

// reconciler keeps every replica's configStates in step with the configs:
// each replica decides admissions, so each holds the stores. Status and
// publishing are the leader's (publisher).
type reconciler struct {
	m          *Module
	controller controller.Controller
	// haptic queues haptic's configs (hapticFollower); Gatehouse's come
	// from their cache.
	haptic *trigger.Source[reconcile.Request]
}

// newReconciler builds the controller of the configs, fed by the module's
// cache of them.
func newReconciler(m *Module) (*reconciler, error) {
	r := &reconciler{m: m}
	c, err := m.host.NewController("HAProxyTemplateConfig", controller.Options{
		Reconciler:         r,
		NeedLeaderElection: ptr.To(false),
		RateLimiter:        workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
	})
	if err != nil {
		return nil, err
	}
	if err := c.Watch(source.Kind(m.configs, &gatehousev1alpha1.HAProxyTemplateConfig{},
		&handler.TypedEnqueueRequestForObject[*gatehousev1alpha1.HAProxyTemplateConfig]{})); err != nil {
		return nil, err
	}
	r.haptic = trigger.New(func() []reconcile.Request {
		var out []reconcile.Request
		for _, key := range m.haptic.keys(context.Background()) {
			out = append(out, key.Request())
		}
		return out
	})
	if err := c.Watch(r.haptic); err != nil {
		return nil, err
	}
	m.haptic.start(func(key spec.Key) { r.haptic.Add(key.Request()) })
	r.controller = c
	return r, nil
}

func (r *reconciler) NeedLeaderElection() bool { return false }

// Start runs the controller until ctx ends. Without any config no
// reconciliation would ever say that nothing is validated: that is said
// first, once the configs are listed. When the controller has stopped, no
// reconciliation runs any more, and the stores' informers are released.
func (r *reconciler) Start(ctx context.Context) error {
	if !r.m.configs.WaitForCacheSync(ctx) {
		return nil
	}
	var configs gatehousev1alpha1.HAProxyTemplateConfigList
	if err := r.m.configs.List(ctx, &configs); err != nil {
		// A synced cache lists without error; were it to fail, the
		// replica waits for no config rather than never becoming ready.
		r.controller.GetLogger().Error(err, "listing the configs at start")
	}
	keys := make([]spec.Key, 0, len(configs.Items))
	for i := range configs.Items {
		keys = append(keys, spec.KeyOf(spec.GatehouseConfig{HAProxyTemplateConfig: &configs.Items[i]}))
	}
	// haptic's kind, followed during Setup, is known (and synced when
	// served) before the replica is ready; its configs of the moment are
	// waited for as Gatehouse's are.
	r.m.hapticConfigs.Wait(ctx)
	keys = append(keys, r.m.haptic.keys(ctx)...)
	r.m.initialLoad.listed(keys)
	if len(keys) == 0 {
		r.m.registerWebhooks(logf.IntoContext(ctx, r.controller.GetLogger()))
	}
	err := r.controller.Start(ctx)
	for _, st := range r.m.allStates() {
		r.m.releaseFeeds(st)
	}
	return err
}

// resolveRetry is how often a config whose watched kinds discovery does not
// know is looked at again (a CRD installed after the config).
const resolveRetry = 15 * time.Second

// Reconcile loads one config's current generation into a new state, or
// drops the state of a config that is gone.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := spec.KeyOfRequest(req)
	log := logf.FromContext(ctx).WithValues("config", key)
	ctx = logf.IntoContext(ctx, log)
	m := r.m
	cfg, err := m.storedConfig(ctx, key)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		m.replaceState(ctx, key, nil)
		return reconcile.Result{}, nil
	}
	old := m.state(key)
	if old != nil && old.uid == cfg.GetUID() && old.generation == cfg.GetGeneration() && old.record == cfg.GetAnnotations()[authz.AuthorAnnotation] && len(old.unresolved) == 0 {
		m.publisher.trigger(key)
		return reconcile.Result{}, nil
	}
	st, err := m.buildState(ctx, cfg)
	if err != nil {
		return reconcile.Result{}, err
	}
	m.replaceState(ctx, key, st)
	log.Info("config loaded", "generation", st.generation, "valid", st.compiled != nil, "unresolved", st.unresolved)
	if len(st.unresolved) > 0 {
		return reconcile.Result{RequeueAfter: resolveRetry}, nil
	}
	return reconcile.Result{}, nil
}

// buildState compiles cfg, runs its tests, and starts feeding its stores.
func (m *Module) buildState(ctx context.Context, cfg spec.Object) (*configState, error) {
	key := spec.KeyOf(cfg)
	st := &configState{key: key, uid: cfg.GetUID(), generation: cfg.GetGeneration(),
		feeds: map[string]*feed{}, empty: map[string]*render.MemoryStore{},
		gvks: map[string]schema.GroupVersionKind{}, scoped: map[string]bool{},
		certs: cfg.PublishesSecrets()}
	st.record = cfg.GetAnnotations()[authz.AuthorAnnotation]
	st.author, _, st.noAuthor = authz.VerifiedAuthor(m.host.Records(), m.host.Namespace(), cfg)
	st.hasAuthor = st.noAuthor == ""
	// Compiled in the config's own turn, as its tests run (fair).
	c, errs := cfg.CompileWith(m.compiler(fair.WithShare(ctx, guard.ConfigParty(key), fair.Real)))
	if err := spec.NotCompiled(errs); err != nil {
		// Nothing said of the templates (the workers busy, the budget
		// spent on a loaded machine): tried again, never recorded as
		// the config's fault.
		return nil, err
	}
	if len(errs) > 0 {
		st.invalid = errs.ToAggregate().Error()
		return st, nil
	}
	st.compiled = c
	onDemand, err := ondemand.NewSet(c, m.onDemandFetcher(st.author, st.hasAuthor), true)
	if err != nil {
		return nil, err
	}
	st.onDemand = onDemand
	// A stored config's tests are real work of that config (fair): they
	// passed at its admission, run once per generation, and a config
	// being written must not wait behind them on the one worker checks
	// may use.
	report, err := m.runTests(fair.WithShare(ctx, guard.ConfigParty(key), fair.Real), c, m.opts.TestTimeout)
	if err != nil {
		st.invalid = "the embedded tests could not run: " + err.Error()
	} else {
		st.report = &report
	}
	for _, name := range slices.Sorted(maps.Keys(c.Watched)) {
		w := c.Watched[name]
		if w.OnDemand {
			continue // fetched when a rendering asks (st.onDemand)
		}
		gvk, scoped, err := m.resolve(w.GVR)
		if err != nil {
			if !meta.IsNoMatchError(err) && !errors.Is(err, errNoKind) {
				m.releaseFeeds(st)
				return nil, err
			}
			st.unresolved = append(st.unresolved, name)
			if st.empty[name], err = render.NewMemoryStore(w.Indexer); err != nil {
				return nil, err
			}
			continue
		}
		st.gvks[name], st.scoped[name] = gvk, scoped
		permit := func(namespace string) bool { return st.permits(name, namespace) }
		f, err := m.watches.acquire(w, gvk, scoped, m.namespaceLabels, permit, func() { m.publisher.trigger(key) })
		if err != nil {
			m.releaseFeeds(st)
			return nil, err
		}
		st.feeds[name] = f
	}
	return st, nil
}

var errNoKind = errors.New("no kind")

// resolve finds a watched resource's kind and scope through discovery.
func (m *Module) resolve(gvr schema.GroupVersionResource) (schema.GroupVersionKind, bool, error) {
	mapper := m.host.RESTMapper()
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return schema.GroupVersionKind{}, false, err
	}
	if gvk.Empty() {
		return gvk, false, errNoKind
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionKind{}, false, err
	}
	return gvk, mapping.Scope.Name() == meta.RESTScopeNameRoot, nil
}

// replaceState installs st (nil: the config is gone), releases the
// previous state's feeds after the new ones hold their informers (so a
// shared informer is not restarted), and re-registers the webhooks.
func (m *Module) replaceState(ctx context.Context, key spec.Key, st *configState) {
	m.mu.Lock()
	old := m.states[key]
	if st == nil {
		delete(m.states, key)
	} else {
		m.states[key] = st
	}
	m.mu.Unlock()
	if old != nil {
		m.releaseFeeds(old)
	}
	if st == nil {
		m.forgetAdmissions(key)
	}
	if key.Kind == spec.HapticKind {
		m.countHapticConfigs()
	}
	m.registerWebhooks(ctx)
	if st != nil {
		m.accessCtl.trigger(key)
	}
	m.publisher.trigger(key)
}

func (m *Module) releaseFeeds(st *configState) {
	for _, f := range st.feeds {
		m.watches.release(f)
	}
}
