package module

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Host is what the process provides a module during Setup.
type Host interface {
	// Enforcement is the mode configured for this module. The server applies
	// it to the module's validating webhooks; a module needs it only to word
	// its messages.
	Enforcement() Enforcement
	// Namespace is the namespace Gatehouse runs in.
	Namespace() string
	Scheme() *runtime.Scheme
	// RESTMapper resolves kinds and resources through discovery.
	RESTMapper() meta.RESTMapper
	// Client writes to the API server. Its reads are live: decisions read
	// the module's caches instead.
	Client() client.Client
	// APIReader reads the API server directly, for the documented cases
	// that need a live read (confirming a denial).
	APIReader() client.Reader
	// EventRecorder records Events in the module's name.
	EventRecorder() record.EventRecorder

	// NewCache returns a cache of the module's own, scoped by opts, started
	// with the host and required by /readyz and gatehouse_cache_synced
	// (labelled "<module>/<name>"), for the kinds the API server always
	// serves. The types in opts.ByObject get their informers at once.
	// Reading a type without an informer fails rather than starting a
	// cluster-wide informer by accident. managedFields are stripped unless
	// opts.DefaultTransform says otherwise.
	NewCache(name string, opts cache.Options) (cache.Cache, error)
	// StartCache returns a cache of the module's own, scoped by opts like
	// NewCache's, for what configuration objects ask for at run time: it
	// starts at once, runs until stop is called or the host stops, and does
	// not gate /readyz (the module checks its handlers' sync before
	// reading). Its gatehouse_cache_synced series ("<module>/<name>") is
	// removed by stop. The name must be unique among the module's running
	// caches.
	StartCache(name string, opts cache.Options) (c cache.Cache, stop func(), err error)
	// FollowKind follows obj's kind within scope, a kind whose CRD may be
	// installed or removed at any time (built-in kinds are always served).
	// The host builds the kind's cache, scoped, its managedFields stripped,
	// and shares it with every follower of the same kind, shape (typed,
	// unstructured or metadata, as obj) and scope, whichever module follows
	// it: its informer runs while the CRD is served and Gatehouse may list
	// and watch the kind cluster-wide, and is removed when either stops;
	// the cache stops when its last follower released it. The Kind
	// returned reads the kind (NotFound, empty lists while it cannot be
	// read; read it with objects shaped as obj). onChange, if not nil, is
	// called after the kind became readable or stopped being readable.
	// /readyz waits until the state of the kinds followed during Setup is
	// known (and, when served, their informers have synced); kinds
	// followed later never make a serving replica unready.
	FollowKind(obj client.Object, scope Scope, onChange func()) (Kind, error)
	// Served says whether the API server serves a kind as FollowKind
	// judges it (built-in, or served by an established CRD), from the
	// host's CRD cache: no API call, whatever kind a request names.
	Served(gvk schema.GroupVersionKind) bool
	// SetWebhooks replaces the module's run-time webhooks (those its
	// configuration objects ask for). They are served with the module's
	// enforcement, metrics and logs, and the leader writes them into the
	// webhook configurations. Paths must start with the module's RuntimePath.
	SetWebhooks(hooks []Webhook) error
	// Add runs r with the host: on every replica, unless r needs leader
	// election.
	Add(r manager.Runnable) error
	// NewController returns a controller-runtime controller of the
	// module's, with the manager's controller defaults for what opts
	// leaves unset: a workqueue, rate-limited retries, recovered panics,
	// and each reconciliation's logger (log.FromContext) the module's,
	// named "Controllers/<name>". It is "<module>-<name>" (lowercased) in
	// controller-runtime's metrics and its "controller" log key; name is
	// unique among the module's controllers. Its sources may watch the
	// module's caches (source.Kind); it needs leader election unless
	// opts.NeedLeaderElection says otherwise. It runs once given to Add.
	NewController(name string, opts controller.Options) (controller.Controller, error)
	// AddReadyCheck adds a condition of the module's to /readyz, named
	// "<module>/<name>": the replica is sent no admissions until it holds.
	// For state a module loads at run time that its decisions need (the
	// caches of NewCache and the kinds followed during Setup gate /readyz
	// already). Every replica runs it, each probe calls it: it must be cheap,
	// and bounded in time, since a replica held out for what a tenant
	// controls would be that tenant's outage of every module.
	AddReadyCheck(name string, check func() error)
	// Records signs and verifies what the module writes on objects and
	// later reads as Gatehouse's own word (a config's author): whatever a
	// client can write on an object, only this install can sign.
	Records() Records
	// AddAudit runs a periodic check of what stands in the cluster, on the
	// leader only; its findings are written as PolicyReports while that
	// API is served (internal/reports).
	AddAudit(a Audit) error
}

// Kind is an optional kind a module follows, and the reader of it: the
// host owns "the kind may not be served yet", so that a module reads an
// optional kind as it reads any other.
type Kind interface {
	// Get and List read the kind from the cache the host built for it. While
	// the kind is not served, Gatehouse may not list and watch it, or its
	// informer has not synced, Get answers NotFound and List an empty list:
	// a kind that cannot be read holds no objects. Reading another kind
	// through it is an error.
	client.Reader
	// GVK is the followed kind.
	GVK() schema.GroupVersionKind
	// Wait returns the kind's state once it is known: its CRD looked at
	// and, when served and permitted, its informer synced. It waits for
	// the tracker's events, never polls, and returns KindPending when ctx
	// ends first.
	Wait(ctx context.Context) KindState
	// State is the kind's state now.
	State() KindState
	// Informer is the kind's informer while the kind is served and synced,
	// nil otherwise; onChange says when that changes. For event handlers.
	Informer() cache.Informer
	// Release stops following the kind for this caller. The kind's cache
	// (its informer) stops when its last follower released it.
	Release()
}

// KindState is what the host knows of a followed kind.
type KindState int32

const (
	// KindPending: not known yet (the CRDs not looked at, the access not
	// asked, or the informer starting).
	KindPending KindState = iota
	// KindNotServed: no established CRD serves the kind's version.
	KindNotServed
	// KindForbidden: served, but Gatehouse may not list and watch it
	// (asked again periodically: RBAC may be granted later).
	KindForbidden
	// KindServed: served, and its informer has synced.
	KindServed
)

func (s KindState) String() string {
	switch s {
	case KindNotServed:
		return "not-served"
	case KindForbidden:
		return "forbidden"
	case KindServed:
		return "served"
	}
	return "pending"
}

// RuntimePath is the path prefix of module's run-time webhooks.
func RuntimePath(module string) string { return "/validate/" + module + "/" }

// Records signs records with a key only Gatehouse reads (internal/records).
// A module binds a record to everything it vouches for (the object's
// namespace, name, uid, generation, the identity) in claims, and purpose
// names the kind of record, so that no record reads as another.
type Records interface {
	// Sign returns the signature of claims under purpose, with this
	// install's signing key; "" when there is none.
	Sign(purpose string, claims []byte) string
	// Verify says whether sig is this install's signature of claims under
	// purpose (ok), and whether it was made with the key that signs now
	// (current): a record verified with an older key should be signed
	// again before its key is dropped at a later rotation.
	Verify(purpose string, claims []byte, sig string) (ok, current bool)
}
