package app

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/reports"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// host is what one module is given; see module.Host.
type host struct {
	g      *Gatehouse
	ctx    context.Context
	name   string
	mode   module.Enforcement
	log    logr.Logger
	events record.EventRecorder

	// settings are the operator's changes to the module's webhooks, applied
	// to the run-time webhooks as to the static ones.
	settings     *webhookconfig.Settings
	settingsPath *field.Path

	mu          sync.Mutex
	caches      map[string]bool
	controllers map[string]bool

	// While Setup runs, what it registers is staged: commit hands it to
	// the manager and /readyz once Setup returned, discard drops it when
	// Setup failed, so that a module that cannot start leaves nothing
	// running behind it (no cache gating /readyz, no controller, no
	// followed kind, no run-time webhook).
	staging    bool
	runnables  []manager.Runnable
	syncChecks []func()
	follows    []module.Kind
	stops      []func()
	// failed is set by discard, or when one of the module's runnables
	// failed: the module's later calls register nothing.
	failed atomic.Bool
	// hooks are the module's static webhooks, to withdraw them.
	hooks []module.Webhook
	// onError is called when one of the module's runnables returns an
	// error while the host runs, instead of stopping the host.
	onError func(error)
}

// errFailed is what a module that could not start is told when it asks
// for more.
func (h *host) errFailed() error {
	return fmt.Errorf("module %s could not start: it registers nothing", h.name)
}

// commit starts what Setup registered.
func (h *host) commit() error {
	h.mu.Lock()
	runnables, checks := h.runnables, h.syncChecks
	h.staging, h.runnables, h.syncChecks, h.follows, h.stops = false, nil, nil, nil, nil
	h.mu.Unlock()
	for _, check := range checks {
		check()
	}
	for _, r := range runnables {
		if err := h.g.Manager.Add(r); err != nil {
			return err
		}
	}
	return nil
}

// discard drops what Setup registered, and withdraws the run-time
// webhooks it set.
func (h *host) discard() {
	h.failed.Store(true)
	h.mu.Lock()
	follows, stops := h.follows, h.stops
	h.staging, h.runnables, h.syncChecks, h.follows, h.stops = false, nil, nil, nil, nil
	h.mu.Unlock()
	for _, k := range follows {
		k.Release()
	}
	for _, stop := range stops {
		stop()
	}
	_ = h.g.Server.SetRuntimeWebhooks(h.name, nil, h.mode)
	if h.g.reconciler != nil {
		h.g.reconciler.SetDynamic(h.name, nil)
	}
}

// addReadyCheck adds a /readyz check of the module's, named
// "<module>/<name>": staged while Setup runs, as the caches' checks are,
// and passing once the module failed, so that a module that cannot decide
// never holds the replica out of the Service its other modules serve
// through. (A module.Host method giving modules their own checks
// delegates here.)
func (h *host) addReadyCheck(name string, check func() error) {
	wrapped := func() error {
		if h.failed.Load() {
			return nil
		}
		return check()
	}
	add := func() { h.g.Server.AddReadyCheck(h.name+"/"+name, wrapped) }
	h.mu.Lock()
	if h.staging {
		h.syncChecks = append(h.syncChecks, add)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	add()
}

// add runs r with the host, or stages it while Setup runs. An error r
// returns while the host runs fails the module alone (onError), never the
// host: the manager would stop every module with it.
func (h *host) add(r manager.Runnable) error {
	if h.failed.Load() {
		return h.errFailed()
	}
	r = failsAlone(r, h.onError)
	h.mu.Lock()
	if h.staging {
		h.runnables = append(h.runnables, r)
		h.mu.Unlock()
		return nil
	}
	h.mu.Unlock()
	return h.g.Manager.Add(r)
}

// addSyncCheck wires a cache's readiness and gatehouse_cache_synced
// series, or stages it while Setup runs.
func (h *host) addSyncCheck(name string, synced func() bool) {
	// A module that failed while running no longer holds /readyz back
	// by one of its caches: the others serve.
	inner := synced
	synced = func() bool { return inner() || h.failed.Load() }
	h.mu.Lock()
	if h.staging {
		h.syncChecks = append(h.syncChecks, func() { h.g.addSyncCheck(name, synced) })
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.g.addSyncCheck(name, synced)
}

var _ module.Host = (*host)(nil)

func (h *host) Enforcement() module.Enforcement     { return h.mode }
func (h *host) Namespace() string                   { return h.g.opts.Namespace }
func (h *host) Scheme() *runtime.Scheme             { return h.g.Manager.GetScheme() }
func (h *host) RESTMapper() meta.RESTMapper         { return h.g.Manager.GetRESTMapper() }
func (h *host) Client() client.Client               { return h.g.writer }
func (h *host) APIReader() client.Reader            { return h.g.Manager.GetAPIReader() }
func (h *host) EventRecorder() record.EventRecorder { return h.events }
func (h *host) Records() module.Records             { return h.g.records }
func (h *host) Add(r manager.Runnable) error        { return h.add(withLogger(r, h.log)) }

func (h *host) AddReadyCheck(name string, check func() error) { h.addReadyCheck(name, check) }

func (h *host) NewController(name string, opts controller.Options) (controller.Controller, error) {
	h.mu.Lock()
	if h.controllers[name] {
		h.mu.Unlock()
		return nil, fmt.Errorf("module %s: controller %q created twice", h.name, name)
	}
	if h.controllers == nil {
		h.controllers = map[string]bool{}
	}
	h.controllers[name] = true
	h.mu.Unlock()
	if opts.Logger.GetSink() == nil {
		opts.Logger = h.log.WithName("Controllers").WithName(name)
	}
	opts.DefaultFromConfig(h.g.Manager.GetControllerOptions())
	// The name is unique in this Gatehouse: the module's prefix and the
	// check above. controller-runtime's own check spans the process,
	// which may run one Gatehouse after another (the e2e tests) and never
	// forgets a name.
	opts.SkipNameValidation = ptr.To(true)
	c, err := controller.NewUnmanaged(h.name+"-"+strings.ToLower(name), opts)
	if err != nil {
		return nil, fmt.Errorf("module %s: controller %s: %w", h.name, name, err)
	}
	return c, nil
}

func (h *host) AddAudit(a module.Audit) error {
	if a.Run == nil || a.Period <= 0 {
		return fmt.Errorf("module %s: an audit needs a Run function and a period", h.name)
	}
	return h.Add(&reports.Runner{Writer: h.g.reports, Module: h.name, Audit: a, Period: h.g.opts.Reports.Interval})
}

func (h *host) NewCache(name string, opts cache.Options) (cache.Cache, error) {
	h.mu.Lock()
	if h.caches[name] {
		h.mu.Unlock()
		return nil, fmt.Errorf("module %s: cache %q created twice", h.name, name)
	}
	h.caches[name] = true
	h.mu.Unlock()
	if h.failed.Load() {
		return nil, h.errFailed()
	}
	c, err := h.g.newCache(h.ctx, h.name+"/"+name, opts, h.add, h.addSyncCheck)
	if err != nil {
		return nil, fmt.Errorf("module %s: cache %s: %w", h.name, name, err)
	}
	return c, nil
}

func (h *host) StartCache(name string, opts cache.Options) (cache.Cache, func(), error) {
	if h.failed.Load() {
		return nil, nil, h.errFailed()
	}
	h.mu.Lock()
	if h.caches[name] {
		h.mu.Unlock()
		return nil, nil, fmt.Errorf("module %s: cache %q created twice", h.name, name)
	}
	h.caches[name] = true
	h.mu.Unlock()
	release := func() {
		h.mu.Lock()
		delete(h.caches, name)
		h.mu.Unlock()
	}
	c, err := cache.New(h.g.Manager.GetConfig(), h.g.cacheOptions(opts))
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("module %s: cache %s: %w", h.name, name, err)
	}
	series := h.name + "/" + name
	metrics.CacheSynced.WithLabelValues(series).Set(0)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Start(ctx); err != nil {
			h.log.Error(err, "run-time cache stopped", "cache", name)
		}
	}()
	go func() {
		if c.WaitForCacheSync(ctx) {
			metrics.CacheSynced.WithLabelValues(series).Set(1)
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			metrics.CacheSynced.DeleteLabelValues(series)
			release()
		})
	}
	h.mu.Lock()
	if h.staging {
		h.stops = append(h.stops, stop)
	}
	h.mu.Unlock()
	return c, stop, nil
}

func (h *host) FollowKind(obj client.Object, scope module.Scope, onChange func()) (module.Kind, error) {
	if h.failed.Load() {
		return nil, h.errFailed()
	}
	k, err := h.g.kinds.Follow(obj, scope, onChange)
	if err != nil {
		return nil, fmt.Errorf("module %s: follow %T: %w", h.name, obj, err)
	}
	h.mu.Lock()
	if h.staging {
		h.follows = append(h.follows, k)
	}
	h.mu.Unlock()
	return k, nil
}

func (h *host) Served(gvk schema.GroupVersionKind) bool { return h.g.kinds.Served(gvk) }

func (h *host) SetWebhooks(hooks []module.Webhook) error {
	if h.failed.Load() {
		return h.errFailed()
	}
	served := make([]module.Webhook, len(hooks))
	for i, hook := range hooks {
		hook, err := h.settings.Apply(hook, h.settingsPath)
		if err != nil {
			return fmt.Errorf("module %s: %w", h.name, err)
		}
		if hook.Kinds == nil {
			hook.Kinds = ruleKinds(h.RESTMapper(), hook, h.log)
		}
		served[i] = hook
	}
	if err := h.g.Server.SetRuntimeWebhooks(h.name, served, h.mode); err != nil {
		return fmt.Errorf("module %s: %w", h.name, err)
	}
	if h.g.reconciler != nil {
		h.g.reconciler.SetDynamic(h.name, served)
	} else if len(hooks) > 0 {
		h.g.staticModeOnce.Do(func() {
			h.log.Info("webhooks registered at run time are served, but no webhook configuration names them: Gatehouse does not manage its webhook configurations (static mode)")
		})
	}
	return nil
}

// ruleKinds are the kinds hook's rules name, resolved through discovery,
// so that the server allows a review of another kind posted to its path
// instead of judging it as the path's kind (module.Webhook.Kinds). Rules
// with wildcards or subresources (whose reviews carry kinds of their own:
// Scale, Eviction) and resources discovery does not know leave the webhook
// open to every kind, as before: the module judges what it is sent.
func ruleKinds(mapper meta.RESTMapper, hook module.Webhook, log logr.Logger) []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	for _, rule := range hook.Rules {
		for _, group := range rule.APIGroups {
			for _, version := range rule.APIVersions {
				for _, resource := range rule.Resources {
					if group == "*" || version == "*" || strings.ContainsAny(resource, "*/") {
						return nil
					}
					gvk, err := mapper.KindFor(schema.GroupVersionResource{Group: group, Version: version, Resource: resource})
					if err != nil {
						log.Info("a run-time webhook's rule names a resource discovery does not know: the webhook is sent every kind posted to it",
							"webhook", hook.Name, "resource", schema.GroupVersionResource{Group: group, Version: version, Resource: resource}.String(), "error", err.Error())
						return nil
					}
					kinds = append(kinds, gvk)
				}
			}
		}
	}
	return kinds
}

// newCache builds a scoped cache, registers the informers of the types it
// names (so that its sync covers them), and wires its readiness and
// gatehouse_cache_synced series.
func (g *Gatehouse) newCache(ctx context.Context, name string, opts cache.Options, add func(manager.Runnable) error, addSyncCheck func(string, func() bool)) (cache.Cache, error) {
	c, err := cache.New(g.Manager.GetConfig(), g.cacheOptions(opts))
	if err != nil {
		return nil, err
	}
	for obj := range opts.ByObject {
		// Before the cache starts this only registers the informer.
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("informer for %T: %w", obj, err)
		}
	}
	if err := add(ownedCache{c}); err != nil {
		return nil, err
	}
	var synced atomic.Bool
	addSyncCheck(name, synced.Load)
	return c, add(everyReplica(func(ctx context.Context) error {
		if c.WaitForCacheSync(ctx) {
			synced.Store(true)
			metrics.CacheSynced.WithLabelValues(name).Set(1)
		}
		return nil
	}))
}

// cacheOptions completes a module's cache options with what every module
// cache shares.
func (g *Gatehouse) cacheOptions(opts cache.Options) cache.Options {
	return module.HostCacheOptions(opts, g.Manager.GetScheme(), g.Manager.GetRESTMapper(), g.Manager.GetHTTPClient())
}

// ownedCache makes the manager start a cache with its other caches (before
// any other runnable, on every replica) and wait for its sync.
type ownedCache struct{ cache.Cache }

func (c ownedCache) GetCache() cache.Cache { return c.Cache }

// withLogger runs r with log in its context, as controller-runtime's
// controllers run each reconciliation: a runnable takes its logger from
// log.FromContext(ctx) and adds its own name and the keys of what it works
// on. The manager's own context carries no logger (it would fall back to
// the global one, without the module's name). Caches, servers and
// controllers are passed as they are: the manager sorts runnables by those
// types, and a controller puts its own logger into each reconciliation's
// context.
func withLogger(r manager.Runnable, log logr.Logger) manager.Runnable {
	switch r.(type) {
	case interface{ GetCache() cache.Cache }, webhook.Server, *manager.Server, interface{ Warmup(context.Context) error }:
		return r
	}
	return logged{runnable: r, log: log}
}

type logged struct {
	runnable manager.Runnable
	log      logr.Logger
}

func (r logged) Start(ctx context.Context) error {
	return r.runnable.Start(logf.IntoContext(ctx, r.log))
}

// NeedLeaderElection keeps the wrapped runnable's choice; the manager's
// default for a runnable that does not say is to need it.
func (r logged) NeedLeaderElection() bool {
	if le, ok := r.runnable.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}

// failsAlone wraps a module's runnable so that an error it returns while
// the host runs goes to onError instead of the manager, which would stop
// every module. Caches are passed as they are: the manager starts and
// waits for them as caches, and their failure is a cache that does not
// sync (/readyz, gatehouse_cache_synced). A runnable that warms up keeps
// its Warmup.
func failsAlone(r manager.Runnable, onError func(error)) manager.Runnable {
	if onError == nil {
		return r
	}
	switch r.(type) {
	case interface{ GetCache() cache.Cache }, webhook.Server, *manager.Server:
		return r
	}
	f := alone{runnable: r, onError: onError}
	if w, ok := r.(interface{ Warmup(context.Context) error }); ok {
		return aloneWarmup{alone: f, warmup: w.Warmup}
	}
	return f
}

type alone struct {
	runnable manager.Runnable
	onError  func(error)
}

func (r alone) Start(ctx context.Context) error {
	err := r.runnable.Start(ctx)
	if err != nil && ctx.Err() == nil {
		r.onError(err)
		return nil
	}
	return err
}

// NeedLeaderElection keeps the wrapped runnable's choice.
func (r alone) NeedLeaderElection() bool {
	if le, ok := r.runnable.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}

type aloneWarmup struct {
	alone
	warmup func(context.Context) error
}

func (r aloneWarmup) Warmup(ctx context.Context) error { return r.warmup(ctx) }

// everyReplica is a runnable that runs on every replica, leader or not.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }
