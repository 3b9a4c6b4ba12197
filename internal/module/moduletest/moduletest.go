// Package moduletest provides a module.Host for unit tests of a module's
// Setup: its caches are real controller-runtime caches built against an API
// server that is never reached (they are not started), and its optional
// kinds are in the state the test sets (KindStates; not served unless
// set), and read as the host reads a kind it cannot read: NotFound and
// empty lists. Tests that need a serving API server use internal/testing/testenv
// instead.
package moduletest

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
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

// Host records what a module asks of its host.
type Host struct {
	Mode      module.Enforcement
	Own       string
	Types     *runtime.Scheme
	Mapper    meta.RESTMapper
	Recorder  *record.FakeRecorder
	Runnables []manager.Runnable
	Audits    []module.Audit
	// Keys sign and verify the module's records (Records); New gives
	// it a fresh key.
	Keys *records.Static

	mu       sync.Mutex
	Caches   map[string]cache.Cache
	Followed []client.Object
	// Scopes are the scopes the kinds in Followed were followed in.
	Scopes      []module.Scope
	Runtime     []module.Webhook
	Controllers map[string]controller.Controller
	// ReadyChecks are the module's /readyz conditions, by name.
	ReadyChecks map[string]func() error
	// KindStates are the states of followed kinds other than KindServed
	// (the test host's caches never sync); a kind not listed is not
	// served.
	KindStates map[schema.GroupVersionKind]module.KindState
	// Released counts the Release calls per kind.
	Released map[schema.GroupVersionKind]int
}

var _ module.Host = (*Host)(nil)

// New returns a Host whose RESTMapper knows every kind of scheme, each
// namespaced unless listed in clusterScoped.
func New(scheme *runtime.Scheme, clusterScoped ...string) *Host {
	mapper := meta.NewDefaultRESTMapper(scheme.PrioritizedVersionsAllGroups())
	root := map[string]bool{}
	for _, k := range clusterScoped {
		root[k] = true
	}
	for gvk := range scheme.AllKnownTypes() {
		scope := meta.RESTScopeNamespace
		if root[gvk.Kind] {
			scope = meta.RESTScopeRoot
		}
		mapper.Add(gvk, scope)
	}
	return &Host{Mode: module.Enforce, Own: "gatehouse-test", Types: scheme, Mapper: mapper,
		Recorder: record.NewFakeRecorder(100), Keys: records.NewStatic(), Caches: map[string]cache.Cache{},
		KindStates: map[schema.GroupVersionKind]module.KindState{}, Released: map[schema.GroupVersionKind]int{}}
}

func (h *Host) Enforcement() module.Enforcement     { return h.Mode }
func (h *Host) Namespace() string                   { return h.Own }
func (h *Host) Scheme() *runtime.Scheme             { return h.Types }
func (h *Host) RESTMapper() meta.RESTMapper         { return h.Mapper }
func (h *Host) Client() client.Client               { return nil }
func (h *Host) APIReader() client.Reader            { return nil }
func (h *Host) EventRecorder() record.EventRecorder { return h.Recorder }
func (h *Host) Records() module.Records             { return h.Keys }

func (h *Host) Add(r manager.Runnable) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Runnables = append(h.Runnables, r)
	return nil
}

// AddAudit records the module's periodic check.
func (h *Host) AddAudit(a module.Audit) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Audits = append(h.Audits, a)
	return nil
}

// NewCache builds an unstarted cache against an unreachable API server.
func (h *Host) NewCache(name string, opts cache.Options) (cache.Cache, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.Caches[name]; dup {
		return nil, fmt.Errorf("cache %q created twice", name)
	}
	opts.Scheme, opts.Mapper = h.Types, h.Mapper
	opts.ReaderFailOnMissingInformer = true
	c, err := cache.New(&rest.Config{Host: "https://127.0.0.1:1"}, opts)
	if err != nil {
		return nil, err
	}
	h.Caches[name] = c
	return c, nil
}

// StartCache builds an unstarted cache like NewCache; stop forgets it.
func (h *Host) StartCache(name string, opts cache.Options) (cache.Cache, func(), error) {
	c, err := h.NewCache(name, opts)
	if err != nil {
		return nil, nil, err
	}
	return c, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.Caches, name)
	}, nil
}

// NewController builds an unstarted controller and records it by name.
func (h *Host) NewController(name string, opts controller.Options) (controller.Controller, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.Controllers[name]; dup {
		return nil, fmt.Errorf("controller %q created twice", name)
	}
	opts.SkipNameValidation = ptr.To(true)
	c, err := controller.NewUnmanaged(name, opts)
	if err != nil {
		return nil, err
	}
	if h.Controllers == nil {
		h.Controllers = map[string]controller.Controller{}
	}
	h.Controllers[name] = c
	return c, nil
}

// FollowKind records obj and scope; the kind is in the state KindStates
// says.
func (h *Host) FollowKind(obj client.Object, scope module.Scope, _ func()) (module.Kind, error) {
	gvk, err := apiutil.GVKForObject(obj, h.Types)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Followed = append(h.Followed, obj)
	h.Scopes = append(h.Scopes, scope)
	return &unreadableKind{NoObjects: module.NoObjects(gvk), h: h, gvk: gvk}, nil
}

// Served says whether the test's scheme knows gvk.
func (h *Host) Served(gvk schema.GroupVersionKind) bool { return h.Types.Recognizes(gvk) }

// AddReadyCheck records check under name, for the test to call.
func (h *Host) AddReadyCheck(name string, check func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ReadyChecks == nil {
		h.ReadyChecks = map[string]func() error{}
	}
	h.ReadyChecks[name] = check
}

// SetWebhooks records the module's run-time webhooks.
func (h *Host) SetWebhooks(hooks []module.Webhook) error {
	if err := module.ValidateWebhooks(hooks); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Runtime = hooks
	return nil
}

// unreadableKind is a followed kind of the test host: never readable.
type unreadableKind struct {
	module.NoObjects
	h   *Host
	gvk schema.GroupVersionKind
}

func (k *unreadableKind) State() module.KindState {
	k.h.mu.Lock()
	defer k.h.mu.Unlock()
	if s, ok := k.h.KindStates[k.gvk]; ok {
		return s
	}
	return module.KindNotServed
}

// Wait answers at once, unless the kind is pending: then ctx's end.
func (k *unreadableKind) Wait(ctx context.Context) module.KindState {
	if s := k.State(); s != module.KindPending {
		return s
	}
	<-ctx.Done()
	return module.KindPending
}

func (k *unreadableKind) GVK() schema.GroupVersionKind { return k.gvk }

func (k *unreadableKind) Informer() cache.Informer { return nil }

func (k *unreadableKind) Release() {
	k.h.mu.Lock()
	defer k.h.mu.Unlock()
	k.h.Released[k.gvk]++
}
