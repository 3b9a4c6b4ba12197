package policytest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/records"
)

// This file is the offline module.Host: what internal/app's host gives a
// module in a cluster, given over the suite's in-memory API server. Its
// caches are controller-runtime caches built with the options app's host
// completes them with, so a module reads exactly as it does when serving.

// environment is what every module's host of one suite shares.
type environment struct {
	scheme     *runtime.Scheme
	mapper     meta.RESTMapper
	config     *rest.Config
	httpClient *http.Client
	// client reads and writes through the in-memory API server: reads
	// answer from the suite's state, writes are refused but for
	// SubjectAccessReviews and Events.
	client    client.Client
	namespace string
	log       logr.Logger
	records   *records.Static

	mu sync.Mutex
	// ctx is set by start: caches built later (StartCache) start at once.
	ctx     context.Context
	pending []namedCache
	// followers are FollowKind's onChange calls, made once the kind's
	// informer has synced.
	followers []follower
	// runnables are what modules Add: periodic work (audits, publishers)
	// that no decision waits for, so a suite does not run it.
	runnables []manager.Runnable
}

type namedCache struct {
	name  string
	cache cache.Cache
}

type follower struct {
	informer cache.Informer
	onChange func()
}

// syncTimeout bounds the wait for the caches over the in-memory server,
// which answer at once: only a bug makes them wait.
const syncTimeout = 30 * time.Second

func newEnvironment(scheme *runtime.Scheme, mapper meta.RESTMapper, server *apiServer, namespace string, log logr.Logger) (*environment, error) {
	// The host name is never resolved: the transport hands each request
	// to the in-memory server.
	config := &rest.Config{Host: "http://suite.gatehouse-test.invalid", QPS: -1, Transport: inProcess{server}}
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		return nil, err
	}
	c, err := client.New(config, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return nil, err
	}
	return &environment{scheme: scheme, mapper: mapper, config: config, httpClient: httpClient, client: c, namespace: namespace, log: log, records: records.NewStatic()}, nil
}

// cacheOptions completes a module's options as app's host does.
func (e *environment) cacheOptions(opts cache.Options) cache.Options {
	return module.HostCacheOptions(opts, e.scheme, e.mapper, e.httpClient)
}

// start starts the caches built during Setup, waits for their sync, then
// tells the followers of optional kinds.
func (e *environment) start(ctx context.Context) error {
	e.mu.Lock()
	e.ctx = ctx
	pending, followers := e.pending, e.followers
	e.pending, e.followers = nil, nil
	e.mu.Unlock()
	for _, c := range pending {
		go func() {
			if err := c.cache.Start(ctx); err != nil {
				e.log.Error(err, "cache stopped", "cache", c.name)
			}
		}()
	}
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	for _, c := range pending {
		if !c.cache.WaitForCacheSync(syncCtx) {
			return fmt.Errorf("cache %s did not sync over the suite's state", c.name)
		}
	}
	for _, f := range followers {
		if !toolscache.WaitForCacheSync(syncCtx.Done(), f.informer.HasSynced) {
			return fmt.Errorf("an optional kind's informer did not sync over the suite's state")
		}
		f.onChange()
	}
	return nil
}

// host is one module's view of the environment.
type host struct {
	env  *environment
	name string
	mode module.Enforcement

	mu     sync.Mutex
	caches map[string]bool
}

var _ module.Host = (*host)(nil)

func (h *host) Enforcement() module.Enforcement { return h.mode }
func (h *host) Namespace() string               { return h.env.namespace }
func (h *host) Scheme() *runtime.Scheme         { return h.env.scheme }
func (h *host) RESTMapper() meta.RESTMapper     { return h.env.mapper }
func (h *host) Client() client.Client           { return h.env.client }
func (h *host) APIReader() client.Reader        { return h.env.client }

// Records signs with a key of the run's own: `gatehouse test` reads back
// no record a previous run wrote.
func (h *host) Records() module.Records             { return h.env.records }
func (h *host) EventRecorder() record.EventRecorder { return &record.FakeRecorder{} }

func (h *host) Add(r manager.Runnable) error {
	h.env.mu.Lock()
	defer h.env.mu.Unlock()
	h.env.runnables = append(h.env.runnables, r)
	return nil
}

func (h *host) claim(name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.caches[name] {
		return fmt.Errorf("module %s: cache %q created twice", h.name, name)
	}
	h.caches[name] = true
	return nil
}

func (h *host) NewCache(name string, opts cache.Options) (cache.Cache, error) {
	if err := h.claim(name); err != nil {
		return nil, err
	}
	c, err := cache.New(h.env.config, h.env.cacheOptions(opts))
	if err != nil {
		return nil, fmt.Errorf("module %s: cache %s: %w", h.name, name, err)
	}
	for obj := range opts.ByObject {
		if _, err := c.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false)); err != nil {
			return nil, fmt.Errorf("module %s: cache %s: informer for %T: %w", h.name, name, obj, err)
		}
	}
	h.env.mu.Lock()
	defer h.env.mu.Unlock()
	h.env.pending = append(h.env.pending, namedCache{name: h.name + "/" + name, cache: c})
	return c, nil
}

// AddAudit accepts a periodic check and never runs it: a suite judges
// requests, not what stands in a cluster (docs/testing-policies.md).
func (h *host) AddAudit(a module.Audit) error {
	if a.Run == nil || a.Period <= 0 {
		return fmt.Errorf("module %s: an audit needs a Run function and a period", h.name)
	}
	return nil
}

// NewController builds an unstarted controller: a suite runs no loops
// (docs/testing-policies.md), only the decisions.
func (h *host) NewController(name string, opts controller.Options) (controller.Controller, error) {
	opts.SkipNameValidation = ptr.To(true)
	return controller.NewUnmanaged(h.name+"-"+strings.ToLower(name), opts)
}

func (h *host) StartCache(name string, opts cache.Options) (cache.Cache, func(), error) {
	if err := h.claim(name); err != nil {
		return nil, nil, err
	}
	c, err := cache.New(h.env.config, h.env.cacheOptions(opts))
	if err != nil {
		return nil, nil, fmt.Errorf("module %s: cache %s: %w", h.name, name, err)
	}
	h.env.mu.Lock()
	ctx := h.env.ctx
	if ctx == nil {
		// Asked for during Setup: it starts with the others.
		h.env.pending = append(h.env.pending, namedCache{name: h.name + "/" + name, cache: c})
		h.env.mu.Unlock()
		return c, func() {}, nil
	}
	h.env.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	go func() { _ = c.Start(ctx) }()
	return c, cancel, nil
}

// FollowKind builds obj's cache, scoped, and runs obj's informer in it when
// the suite's API server serves the kind (the scheme or the suite's objects
// know it); otherwise the kind is never readable, as an absent CRD. A
// suite lives for one run, so followers do not share caches: Release stops
// a cache built after the start, and the suite's end the others.
func (h *host) FollowKind(obj client.Object, scope module.Scope, onChange func()) (module.Kind, error) {
	gvk, err := apiutil.GVKForObject(obj, h.env.scheme)
	if err != nil {
		return nil, fmt.Errorf("module %s: follow %T: %w", h.name, obj, err)
	}
	if !h.Served(gvk) {
		return followedKind{gvk: gvk}, nil
	}
	c, err := cache.New(h.env.config, h.env.cacheOptions(scope.CacheOptions()))
	if err != nil {
		return nil, fmt.Errorf("module %s: follow %s: %w", h.name, module.GVKString(gvk), err)
	}
	inf, err := c.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("module %s: follow %s: %w", h.name, module.GVKString(gvk), err)
	}
	h.env.mu.Lock()
	ctx := h.env.ctx
	if ctx == nil {
		// Followed during Setup: it starts with the other caches, and its
		// follower is told once they synced.
		h.env.pending = append(h.env.pending, namedCache{name: h.name + "/" + module.GVKString(gvk), cache: c})
		if onChange != nil {
			h.env.followers = append(h.env.followers, follower{informer: inf, onChange: onChange})
		}
		h.env.mu.Unlock()
		return followedKind{gvk: gvk, cache: c, informer: inf, release: func() {}}, nil
	}
	h.env.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	go func() { _ = c.Start(ctx) }()
	if onChange != nil {
		go func() {
			if toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				onChange()
			}
		}()
	}
	return followedKind{gvk: gvk, cache: c, informer: inf, release: cancel}, nil
}

func (h *host) Served(gvk schema.GroupVersionKind) bool {
	_, err := h.env.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil
}

// AddReadyCheck is not kept: the checks guard state that run-time
// webhooks need, and a suite serves only the static ones, once the caches
// built during Setup have synced (start).
func (h *host) AddReadyCheck(string, func() error) {}

// SetWebhooks checks the module's run-time webhooks; a suite serves only
// the static ones (docs/testing-policies.md), so they are not kept.
func (h *host) SetWebhooks(hooks []module.Webhook) error {
	return module.ValidateWebhooks(hooks)
}

// followedKind reads a kind the suite's API server serves through the
// cache it is followed in, once its informer has synced; absent kinds are
// a followedKind without an informer, which holds no objects.
type followedKind struct {
	gvk      schema.GroupVersionKind
	cache    cache.Cache
	informer cache.Informer
	// release stops a cache started after the suite's start.
	release func()
}

func (k followedKind) readable() bool { return k.informer != nil && k.informer.HasSynced() }

func (k followedKind) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if !k.readable() {
		return module.NoObjects(k.gvk).Get(ctx, key, obj)
	}
	return k.cache.Get(ctx, key, obj, opts...)
}

func (k followedKind) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if !k.readable() {
		return module.NoObjects(k.gvk).List(ctx, list)
	}
	return k.cache.List(ctx, list, opts...)
}

func (k followedKind) GVK() schema.GroupVersionKind { return k.gvk }

func (k followedKind) State() module.KindState {
	switch {
	case k.informer == nil:
		return module.KindNotServed
	case k.informer.HasSynced():
		return module.KindServed
	}
	return module.KindPending
}

// Wait waits for the informer's sync; the suite's API server answers at
// once, so this is the caches' start.
func (k followedKind) Wait(ctx context.Context) module.KindState {
	if k.informer != nil && !toolscache.WaitForCacheSync(ctx.Done(), k.informer.HasSynced) {
		return module.KindPending
	}
	return k.State()
}

func (k followedKind) Informer() cache.Informer {
	if !k.readable() {
		return nil
	}
	return k.informer
}

func (k followedKind) Release() {
	if k.release != nil {
		k.release()
	}
}
