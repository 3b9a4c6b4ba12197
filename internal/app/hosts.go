package app

import (
	"context"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/gatehouse-dev/gatehouse/internal/kinds"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// Hosts gives modules set up outside New the host New gives them: the one
// implementation of module.Host (host.go), over what the caller provides.
// `gatehouse test` (internal/policytest) sets its modules up with it over
// its offline API server, so that the tool meant to predict the cluster
// stages Setup, builds caches and follows optional kinds (internal/kinds)
// as the server does.
type Hosts struct {
	g *Gatehouse
}

// HostsOptions are what the hosts are built over.
type HostsOptions struct {
	// Manager gives the hosts the scheme, RESTMapper, rest config, HTTP
	// client, API reader and controller defaults. What the hosts register
	// to run (the modules' caches, runnables, controllers and audits, and
	// the CRD cache the kinds tracker reads) goes to its Add: the caller
	// decides what of it runs.
	Manager manager.Manager
	// Server takes the modules' readiness checks and run-time webhooks.
	Server *server.Server
	// Writer is the modules' Host.Client.
	Writer    client.Client
	Records   module.Records
	Namespace string
	Log       logr.Logger
}

// NewHosts builds the hosts' shared state: the CRD cache (given to the
// manager's Add) and the kinds tracker over it (Kinds, which the caller
// runs). No webhook configuration is managed: a run-time webhook is served
// by Server alone.
func NewHosts(ctx context.Context, opts HostsOptions) (*Hosts, error) {
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	g := &Gatehouse{
		Manager: opts.Manager, Server: opts.Server, writer: opts.Writer, records: opts.Records,
		opts: Options{Namespace: opts.Namespace, Log: opts.Log},
	}
	// The static mode's notice speaks of a cluster's webhook
	// configurations, which the caller has none of.
	g.staticModeOnce.Do(func() {})
	platform, err := g.newCache(ctx, "platform", cache.Options{
		ByObject:         map[client.Object]cache.ByObject{&apiextensionsv1.CustomResourceDefinition{}: {}},
		DefaultTransform: kinds.StripSchemas,
	}, opts.Manager.Add, g.addSyncCheck)
	if err != nil {
		return nil, err
	}
	if err := g.newKinds(ctx, platform); err != nil {
		return nil, err
	}
	return &Hosts{g: g}, nil
}

// Kinds is the tracker the hosts follow optional kinds with. The caller
// runs it (it is not given to the manager), and it is Ready once the kinds
// followed before its start are decided.
func (hs *Hosts) Kinds() *kinds.Tracker { return hs.g.kinds }

// StagedHost is a module's host while its Setup runs: what Setup registers
// is staged until Commit hands it to the manager (and the server's
// readiness), or Discard drops it.
type StagedHost interface {
	module.Host
	Commit() error
	Discard()
}

// Host returns the host of module name, staged, with its enforcement, its
// logger (in ctx too) and its event recorder.
func (hs *Hosts) Host(ctx context.Context, name string, mode module.Enforcement, log logr.Logger, events record.EventRecorder) StagedHost {
	return &host{
		g: hs.g, name: name, mode: mode, log: log, caches: map[string]bool{}, staging: true,
		ctx: logf.IntoContext(ctx, log), events: events,
	}
}

// Commit starts what Setup registered.
func (h *host) Commit() error { return h.commit() }

// Discard drops what Setup registered.
func (h *host) Discard() { h.discard() }
