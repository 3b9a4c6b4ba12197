package policytest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/records"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// This file gives the suite's modules the server's module.Host
// (internal/app's Hosts) over the suite's in-memory API server: their
// caches are controller-runtime caches built as the server builds them,
// and their optional kinds are followed by the server's kinds tracker
// (internal/kinds) over the CRDs that API server serves (crds.go), so a
// module reads exactly as it does when serving. What differs is what
// runs: the caches and the tracker, never the modules' loops (offline
// manager, below).

// environment is what every module's host of one suite shares.
type environment struct {
	// client reads and writes through the in-memory API server: reads
	// answer from the suite's state, writes are refused but for
	// SubjectAccessReviews, SelfSubjectAccessReviews and Events
	// (apiserver.go).
	client    client.Client
	mgr       *offlineManager
	namespace string
	log       logr.Logger
	// hosts are set by setup.
	hosts *app.Hosts
}

// syncTimeout bounds the wait for the caches over the in-memory server,
// and for the kinds followed during Setup to be decided, which take no
// time there: only a bug makes them wait.
const syncTimeout = 30 * time.Second

func newEnvironment(scheme *runtime.Scheme, mapper meta.RESTMapper, api *apiServer, namespace string, log logr.Logger) (*environment, error) {
	// The host name is never resolved: the transport hands each request
	// to the in-memory server.
	config := &rest.Config{Host: "http://suite.gatehouse-test.invalid", QPS: -1, Transport: inProcess{api}}
	// A controller-runtime manager gives the hosts what the server's
	// gives them (its API reader, HTTP client, controller defaults), over
	// the suite's mapper: there is no discovery to ask. It never starts.
	mgr, err := manager.New(config, manager.Options{
		Scheme: scheme, Logger: log,
		MapperProvider:         func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mapper, nil },
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	c, err := client.New(config, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: mgr.GetHTTPClient()})
	if err != nil {
		return nil, err
	}
	return &environment{client: c, mgr: &offlineManager{Manager: mgr, log: log}, namespace: namespace, log: log}, nil
}

// setup builds the hosts over srv, the suite's server: the modules'
// run-time webhooks are served there, and never called (a suite calls the
// static ones).
func (e *environment) setup(ctx context.Context, srv *server.Server) error {
	var err error
	e.hosts, err = app.NewHosts(ctx, app.HostsOptions{
		Manager: e.mgr, Server: srv, Writer: e.client, Namespace: e.namespace, Log: e.log,
		// A key of the run's own: `gatehouse test` reads back no record
		// a previous run wrote.
		Records: records.NewStatic(),
	})
	return err
}

// host is module name's host, staged until its Setup returned.
func (e *environment) host(ctx context.Context, name string, mode module.Enforcement) app.StagedHost {
	// The Events a module records go nowhere: the suite's API server
	// would drop them.
	return e.hosts.Host(ctx, name, mode, e.log.WithName(name), &record.FakeRecorder{})
}

// start starts the caches built during Setup (the modules', and the CRD
// cache), waits for their sync, then runs the kinds tracker and waits
// until the kinds followed during Setup are decided, as /readyz waits on
// the server.
func (e *environment) start(ctx context.Context) error {
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if err := e.mgr.start(ctx, syncCtx); err != nil {
		return err
	}
	tracker := e.hosts.Kinds()
	go func() {
		if err := tracker.Start(logf.IntoContext(ctx, e.log.WithName("kinds"))); err != nil && ctx.Err() == nil {
			e.log.Error(err, "the kinds tracker stopped")
		}
	}()
	// Ready says no more than a bool: it is asked, briefly and often.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !tracker.Ready() {
		select {
		case <-syncCtx.Done():
			return fmt.Errorf("the optional kinds followed during Setup were not decided over the suite's state")
		case <-tick.C:
		}
	}
	return nil
}

// offlineManager is a manager that never starts: of what the hosts give
// it, it runs the caches (started with the suite, at once when given
// later) and holds every other runnable unrun. A suite judges requests,
// not what stands in a cluster, and runs none of the modules' loops
// (controllers, audits, publishers: docs/testing-policies.md).
type offlineManager struct {
	manager.Manager
	log logr.Logger

	mu sync.Mutex
	// ctx is set by start: caches given later start at once.
	ctx     context.Context
	pending []cache.Cache
	// held are the runnables a suite does not run.
	held []manager.Runnable
}

func (m *offlineManager) Add(r manager.Runnable) error {
	c, ok := r.(interface{ GetCache() cache.Cache })
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !ok:
		m.held = append(m.held, r)
	case m.ctx == nil:
		m.pending = append(m.pending, c.GetCache())
	default:
		m.run(m.ctx, c.GetCache())
	}
	return nil
}

func (m *offlineManager) run(ctx context.Context, c cache.Cache) {
	go func() {
		if err := c.Start(ctx); err != nil {
			m.log.Error(err, "cache stopped")
		}
	}()
}

// start starts the caches given so far and waits for their sync until
// syncCtx ends.
func (m *offlineManager) start(ctx, syncCtx context.Context) error {
	m.mu.Lock()
	m.ctx = ctx
	pending := m.pending
	m.pending = nil
	for _, c := range pending {
		m.run(ctx, c)
	}
	m.mu.Unlock()
	for _, c := range pending {
		if !c.WaitForCacheSync(syncCtx) {
			return fmt.Errorf("a cache did not sync over the suite's state")
		}
	}
	return nil
}
