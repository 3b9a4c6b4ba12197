package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/kinds"
	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/records"
	"github.com/gatehouse-dev/gatehouse/internal/reports"
	"github.com/gatehouse-dev/gatehouse/internal/server"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// Options configures a Gatehouse process. Defaults are set in SetDefaults.
type Options struct {
	RestConfig *rest.Config
	Log        logr.Logger

	// Server is passed to the webhook server; its Certificates field is
	// filled from CertDir or CertSecret.
	Server server.Options
	// CertDir holds tls.crt and tls.key. Ignored when CertSecret is set.
	CertDir string
	// CertSecret is "namespace/name" of a kubernetes.io/tls Secret.
	CertSecret string
	// SelfManagedCerts, when set, makes Gatehouse create the CertSecret
	// Secret and rotate its CA and serving certificate (on the leader); the
	// CA bundle in the webhook configurations follows it. Namespace and Name
	// come from CertSecret; empty DNSNames are the webhook Service's names,
	// or the host of the managed webhook URL.
	SelfManagedCerts *certs.SelfManagedOptions
	// RecordsKeySecret is "namespace/name" of the Secret holding the keys
	// that sign Gatehouse's records on objects (internal/records): Gatehouse
	// creates it and its leader rotates the keys. Default, with CertSecret:
	// <Namespace>/<Instance>-records-key. RecordsKeyDir, when set (or
	// without CertSecret, <CertDir>/../records-key), keeps them in a
	// directory instead: one process, `make run`.
	RecordsKeySecret string
	RecordsKeyDir    string
	// RecordsKeys tunes the keys' rotation; zero values take the defaults.
	RecordsKeys records.Options
	// MetricsAddr serves Prometheus metrics; "0" disables it. Default
	// 127.0.0.1:8080: the metrics say which modules deny how often, in
	// which namespaces' caches, so they are served beyond the pod only
	// when told (the chart passes the pod's address).
	MetricsAddr string
	// MetricsSecure serves metrics over HTTPS (the serving certificate)
	// to callers whose bearer token the API server authenticates
	// (TokenReview) and authorizes for get on the /metrics non-resource
	// URL (SubjectAccessReview); others get 401 or 403.
	MetricsSecure bool
	// Namespace is where Gatehouse runs; its webhooks exclude it, and the
	// leader election lease lives there.
	Namespace string
	// Instance names what this install writes, so that two installs in one
	// cluster never touch each other's objects: the webhook configurations
	// <Instance>-validating and <Instance>-mutating, the lease
	// <Instance>-leader, and the label gatehouse.dev/instance=<Instance> on
	// them and the annotation on the CRDs whose conversion it keeps. The
	// chart passes its fullname. Default "gatehouse".
	Instance string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	// Default controller-runtime's: 15 s, 10 s, 2 s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// PprofAddr serves net/http/pprof; "0" disables it. Default "0".
	PprofAddr string
	// LeaderElection elects the one replica that writes the webhook
	// configurations. Every replica serves webhooks either way.
	LeaderElection bool

	// ManageWebhooks, when set, makes Gatehouse keep its own webhook
	// configurations (and CRD conversion stanzas) in the declared state,
	// pointing at this target. A target with neither URL nor Service points
	// at the server's bound address; a target without a CA bundle takes the
	// certificate source's. Without it (static mode), config/ or the Helm
	// chart own the configurations, and webhooks registered at run time are
	// served but named by no configuration.
	ManageWebhooks *webhookconfig.Target
	// ManageWebhooksCAFile, with ManageWebhooks, is a PEM CA bundle file
	// written as the configurations' caBundle instead of the certificate
	// source's, and followed: a CA rotated in the file reaches the
	// configurations without a restart (certs.CAFile).
	ManageWebhooksCAFile string

	// Reports tunes the PolicyReports of the modules' periodic checks.
	Reports ReportOptions

	// Catalogue is every module the binary ships; Modules says which are on
	// and their settings (ModuleConfig.Settings), which ModuleFlags, the
	// modules' flags given on the command line, override
	// (ConfigureModules).
	Catalogue   []module.Module
	Modules     map[string]ModuleConfig
	ModuleFlags *ModuleFlags
}

// SetDefaults gives every zero field its default, the server's included:
// the one place they are written. New calls it; cmd/gatehouse calls it
// first, so that its flags show these defaults.
func (o *Options) SetDefaults() {
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.CertDir == "" {
		o.CertDir = "/etc/gatehouse/tls"
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = DefaultMetricsAddr
	}
	if o.Namespace == "" {
		o.Namespace = "gatehouse-system"
	}
	if o.Instance == "" {
		o.Instance = webhookconfig.DefaultInstance
	}
	if o.PprofAddr == "" {
		o.PprofAddr = "0"
	}
	// controller-runtime's own defaults, written here so that the flags
	// can show them.
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = 2 * time.Second
	}
	o.Server.SetDefaults()
	o.Server.Log = o.Log.WithName("server")
}

// ReportOptions tune the PolicyReports the leader writes of the modules'
// periodic checks (internal/reports, docs/policy-reports.md).
type ReportOptions struct {
	// Interval, when set, runs every module's check this often instead of
	// at the module's own period.
	Interval time.Duration
	// MaxResults bounds the results of one report; 0 takes
	// reports.DefaultMaxResults.
	MaxResults int
	// API is the report API written; "" takes reports.APIAuto.
	API reports.API
}

// DefaultMetricsAddr is loopback: metrics leave the pod only when asked.
const DefaultMetricsAddr = "127.0.0.1:8080"

// LeaseName is the leader election lease of an instance.
func LeaseName(instance string) string {
	if instance == "" {
		instance = webhookconfig.DefaultInstance
	}
	return instance + "-leader"
}

// ValidateInstance checks an install's name: it is a label value and the
// start of object names, so a DNS-1123 label (63 characters at most).
func ValidateInstance(instance string) error {
	if msgs := validation.IsDNS1123Label(instance); len(msgs) > 0 {
		return fmt.Errorf("instance name %q: %s", instance, strings.Join(msgs, "; "))
	}
	return nil
}

// Gatehouse is an assembled, not yet started process.
type Gatehouse struct {
	Manager manager.Manager
	Server  *server.Server
	// Webhooks are the static webhooks served, for rendering configurations.
	Webhooks []module.Webhook

	opts           Options
	writer         client.Client
	kinds          *kinds.Tracker
	reconciler     *webhookconfig.Reconciler
	reports        *reports.Writer
	certs          certs.Source
	records        module.Records
	staticModeOnce sync.Once
	modules        moduleStates
}

// New builds the manager, the server and the enabled modules.
func New(ctx context.Context, opts Options) (*Gatehouse, error) {
	opts.SetDefaults()
	log := opts.Log
	if err := ValidateInstance(opts.Instance); err != nil {
		return nil, err
	}
	if err := (&FileConfig{Modules: opts.Modules}).Validate(); err != nil {
		return nil, err
	}
	enabled, modes, err := resolveModules(opts.Catalogue, opts.Modules)
	if err != nil {
		return nil, err
	}
	if err := ConfigureModules(opts.Catalogue, opts.Modules, opts.ModuleFlags); err != nil {
		return nil, err
	}
	scheme, err := module.NewScheme(enabled)
	if err != nil {
		return nil, err
	}

	certSource, err := newCertSource(ctx, opts)
	if err != nil {
		return nil, err
	}
	srvOpts := opts.Server
	srvOpts.Certificates = certSource
	srv, err := server.New(srvOpts)
	if err != nil {
		return nil, err
	}

	// The manager must outwait the server's own graceful shutdown.
	shutdown := srv.ShutdownTimeout() + 5*time.Second
	mgr, err := manager.New(opts.RestConfig, manager.Options{
		Scheme: scheme,
		// The graceful release of the lease is logged at info (leader.go).
		Logger: managerLogger(log),
		// Every read goes through a module's own scoped cache, a followed
		// kind's cache or the platform cache; the manager's cache must never start an informer
		// by accident.
		Cache:                         cache.Options{ReaderFailOnMissingInformer: true},
		Metrics:                       metricsOptions(opts, certSource),
		HealthProbeBindAddress:        "0",
		PprofBindAddress:              opts.PprofAddr,
		WebhookServer:                 srv,
		GracefulShutdownTimeout:       &shutdown,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              LeaseName(opts.Instance),
		LeaderElectionNamespace:       opts.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	writer, err := client.New(opts.RestConfig, client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
	if err != nil {
		return nil, err
	}
	// The manager adds its webhook server to the runnables when first asked
	// for it; it then starts it before the caches.
	_ = mgr.GetWebhookServer()
	g := &Gatehouse{Manager: mgr, Server: srv, opts: opts, writer: writer, certs: certSource}
	if g.records, err = newRecords(ctx, opts, writer, mgr.Add); err != nil {
		return nil, err
	}
	if rotating, ok := certSource.(*certs.SelfManaged); ok {
		// Every replica serves the Secret; only the leader rotates it.
		if err := mgr.Add(withLogger(rotating.Rotator(), log.WithName("certs"))); err != nil {
			return nil, err
		}
	}

	platformScope := map[client.Object]cache.ByObject{&apiextensionsv1.CustomResourceDefinition{}: {}}
	if opts.ManageWebhooks != nil {
		platformScope = webhookconfig.CacheByObject(opts.Instance)
	}
	platform, err := g.newCache(ctx, "platform", cache.Options{ByObject: platformScope, DefaultTransform: kinds.StripSchemas}, mgr.Add, g.addSyncCheck)
	if err != nil {
		return nil, err
	}
	if err := g.newKinds(ctx, platform); err != nil {
		return nil, err
	}
	if err := mgr.Add(withLogger(g.kinds, log.WithName("kinds"))); err != nil {
		return nil, err
	}
	g.reports = reports.NewWriter(reports.Options{
		Client: writer, Served: g.kinds.Served, Instance: opts.Instance, MaxResults: opts.Reports.MaxResults, API: opts.Reports.API,
	})
	srv.AddReadyCheck("optional-kinds", func() error {
		if !g.kinds.Ready() {
			return errors.New("optional kinds not decided yet")
		}
		return nil
	})

	for _, m := range enabled {
		mode := modes[m.Name()]
		mlog := log.WithName(m.Name())
		settings := opts.Modules[m.Name()].Webhook
		settingsPath := field.NewPath("modules").Key(m.Name()).Child("webhook")
		// The declarations and the operator's settings are checked before
		// Setup: an error in them is the binary's or the configuration's,
		// the same on every replica, and stops the process (a rollout that
		// never becomes ready, the previous replicas serving on). What
		// Setup meets at run time (the kernel, a binary, the API server)
		// fails the module alone.
		var hooks []module.Webhook
		for _, hook := range m.Webhooks() {
			if err := hook.Validate(); err != nil {
				return nil, fmt.Errorf("module %s: %w", m.Name(), err)
			}
			if hook, err = settings.Apply(hook, settingsPath); err != nil {
				return nil, fmt.Errorf("module %s: %w", m.Name(), err)
			}
			if strings.HasPrefix(hook.Path, "/validate/") {
				return nil, fmt.Errorf("module %s: webhook %s: /validate/ is reserved for run-time webhooks", m.Name(), hook.Name)
			}
			if hook.Path == server.ValidatePath {
				return nil, fmt.Errorf("module %s: webhook %s: %s is the server's own endpoint", m.Name(), hook.Name, server.ValidatePath)
			}
			hooks = append(hooks, hook)
		}
		newHost := func() *host {
			return &host{
				g: g, name: m.Name(), mode: mode, log: mlog, caches: map[string]bool{},
				settings: settings, settingsPath: settingsPath, staging: true,
				ctx:    logf.IntoContext(ctx, mlog),
				events: mgr.GetEventRecorderFor("gatehouse-" + m.Name()),
			}
		}
		h := newHost()
		h.hooks = hooks
		h.onError = func(err error) { g.failRunning(h, err) }
		srv.AddReadyNote("module/"+m.Name(), g.moduleNote(m.Name()))
		srv.AddReadyCheck("module/"+m.Name(), g.moduleCheck(m.Name(), platform))
		if err := setupModule(h.ctx, m, h); err != nil {
			h.discard()
			g.modules.fail(m.Name(), err, hooks)
			mlog.Error(err, "module could not start: its webhooks are neither served nor written into the webhook configurations; the other modules serve without it",
				"module", m.Name())
			if f, ok := m.(module.Failer); ok {
				fh := newHost()
				fh.onError = func(err error) {
					mlog.Error(err, "module could not start, nor say so on its objects", "module", m.Name())
				}
				if ferr := failedSetup(fh.ctx, f, fh, err); ferr != nil {
					mlog.Error(ferr, "module could not start, nor say so on its objects", "module", m.Name())
				}
			}
			continue
		}
		if err := h.commit(); err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name(), err)
		}
		for _, hook := range hooks {
			if hook.Type == module.Conversion {
				srv.Conversion(m.Name(), hook)
			} else {
				srv.Admission(m.Name(), hook, mode)
			}
			g.Webhooks = append(g.Webhooks, hook)
		}
		g.modules.started(m.Name())
		log.Info("module enabled", "module", m.Name(), "enforcement", mode, "webhooks", len(hooks))
	}

	if opts.ManageWebhooks != nil {
		if err := g.manageWebhooks(*opts.ManageWebhooks, platform, certSource); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// newKinds builds the tracker of optional kinds over the CRDs of platform
// (which the caller runs), for the modules' hosts; the caller runs it too.
func (g *Gatehouse) newKinds(ctx context.Context, platform cache.Cache) error {
	var err error
	g.kinds, err = kinds.New(ctx, platform, kinds.Options{
		Scheme: g.Manager.GetScheme(), Mapper: g.Manager.GetRESTMapper(), MayListWatch: kinds.SelfAccess(g.writer),
		// The followed kinds' caches are built as the modules' are.
		NewCache: func(opts cache.Options) (cache.Cache, error) {
			return cache.New(g.Manager.GetConfig(), g.cacheOptions(opts))
		},
	})
	return err
}

// metricsOptions serves metrics plainly, or, with MetricsSecure, over TLS
// with the webhook's rotating certificate and the webhook's TLS policy,
// each scrape authenticated and authorized through the API server as
// kubebuilder scaffolds it.
func metricsOptions(opts Options, certSource certs.Source) metricsserver.Options {
	m := metricsserver.Options{BindAddress: opts.MetricsAddr}
	if !opts.MetricsSecure {
		return m
	}
	m.SecureServing = true
	m.FilterProvider = filters.WithAuthenticationAndAuthorization
	m.TLSOpts = []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = certSource.GetCertificate
		c.MinVersion = max(opts.Server.TLSMinVersion, tls.VersionTLS12)
		c.CipherSuites = server.TLS12CipherSuites
		// HTTP/2 stays off here too (CVE-2023-44487).
		c.NextProtos = []string{"http/1.1"}
	}}
	return m
}

// manageWebhooks runs the leader-elected reconciler of the webhook
// configurations; /readyz on every replica waits until this replica sees
// the static webhooks written.
func (g *Gatehouse) manageWebhooks(target webhookconfig.Target, platform cache.Cache, certSource certs.Source) error {
	if target.Namespace == "" {
		target.Namespace = g.opts.Namespace
	}
	caBundle := func() []byte { return target.CABundle }
	// The bundle to publish, followed: a CA file given for the purpose,
	// else the certificate source's CA (a fixed Target.CABundle wins).
	var bundler certs.CABundler
	if g.opts.ManageWebhooksCAFile != "" {
		caFile, err := certs.NewCAFile(g.opts.ManageWebhooksCAFile, g.opts.Log.WithName("certs"))
		if err != nil {
			return fmt.Errorf("webhook configurations' CA file: %w", err)
		}
		if err := g.Manager.Add(caFile); err != nil {
			return err
		}
		bundler = caFile
	} else if b, ok := certSource.(certs.CABundler); ok {
		bundler = b
	}
	if bundler != nil && len(target.CABundle) == 0 {
		caBundle = bundler.CABundle
	}
	rec := webhookconfig.NewReconciler(webhookconfig.ReconcilerOptions{
		Target: func() webhookconfig.Target {
			t := target
			if t.URL == "" && t.Service == nil {
				// Out-of-cluster runs on a port chosen at bind time.
				t.URL = "https://" + g.Server.Addr().String()
			}
			return t
		},
		CABundle: caBundle,
		Static:   g.Webhooks,
		Client:   g.writer,
		Cache:    platform,
		Instance: g.opts.Instance,
	})
	if bundler != nil {
		bundler.OnCABundleChange(rec.Trigger)
	}
	g.reconciler = rec
	g.Server.AddReadyCheck("webhook-configuration", rec.Written)
	// The configurations may only point at a server that listens.
	return g.Manager.Add(withLogger(leaderOnly(func(ctx context.Context) error {
		select {
		case <-g.Server.Listening():
		case <-ctx.Done():
			return nil
		}
		return rec.Start(ctx)
	}), g.opts.Log.WithName("webhookconfig")))
}

// Reconciler is the webhook configuration reconciler, nil in static mode.
func (g *Gatehouse) Reconciler() *webhookconfig.Reconciler { return g.reconciler }

// leaderOnly is a runnable that runs on the elected leader only.
type leaderOnly func(ctx context.Context) error

func (f leaderOnly) Start(ctx context.Context) error { return f(ctx) }
func (leaderOnly) NeedLeaderElection() bool          { return true }

func (g *Gatehouse) addSyncCheck(name string, synced func() bool) {
	metrics.CacheSynced.WithLabelValues(name).Set(0)
	g.Server.AddReadyCheck(name, func() error {
		if !synced() {
			return errors.New("cache not synced")
		}
		return nil
	})
}

// Start runs until ctx ends. With a shutdown delay (server.Options) the
// server drains first, for that long, with every cache and the leader's
// work still running: only then is the manager told to stop (caches first,
// the webhook server last, which waits for the requests in flight).
func (g *Gatehouse) Start(ctx context.Context) error {
	delay := g.Server.ShutdownDelay()
	if delay <= 0 {
		return g.Manager.Start(ctx)
	}
	mgrCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
		case <-mgrCtx.Done():
			return
		}
		g.Server.Drain()
		timer := time.NewTimer(delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-mgrCtx.Done():
		}
		stop()
	}()
	return g.Manager.Start(mgrCtx)
}

func newCertSource(ctx context.Context, opts Options) (certs.Source, error) {
	log := opts.Log.WithName("certs")
	ctx = logf.IntoContext(ctx, log)
	if opts.CertSecret == "" {
		src, err := certs.NewDir(opts.CertDir, log)
		if err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		return src, nil
	}
	ns, name, ok := strings.Cut(opts.CertSecret, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--cert-secret %q: want namespace/name", opts.CertSecret)
	}
	if opts.SelfManagedCerts != nil {
		sm := *opts.SelfManagedCerts
		sm.Namespace, sm.Name = ns, name
		if len(sm.DNSNames) == 0 {
			sm.DNSNames = webhookDNSNames(opts.ManageWebhooks)
		}
		src, err := certs.NewSelfManaged(ctx, opts.RestConfig, sm)
		if err != nil {
			return nil, fmt.Errorf("self-managed certificates: %w", err)
		}
		return src, nil
	}
	src, err := certs.NewSecret(ctx, opts.RestConfig, ns, name, log)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	return src, nil
}

// webhookDNSNames are the names the API server calls Gatehouse by.
func webhookDNSNames(t *webhookconfig.Target) []string {
	switch {
	case t == nil:
		return nil
	case t.Service != nil:
		return certs.ServiceDNSNames(t.Service.Name, t.Service.Namespace)
	case t.URL != "":
		if u, err := url.Parse(t.URL); err == nil && u.Hostname() != "" {
			return []string{u.Hostname()}
		}
	}
	return nil
}

// Certificates is the certificate source being served.
func (g *Gatehouse) Certificates() certs.Source { return g.certs }

// newRecords loads the keys that sign the modules' records, where the
// serving certificate is kept: a Secret of Gatehouse's namespace that the
// leader rotates (followed by every replica), or a directory.
func newRecords(ctx context.Context, opts Options, c client.Client, add func(manager.Runnable) error) (module.Records, error) {
	log := opts.Log.WithName("records")
	ctx = logf.IntoContext(ctx, log)
	secret := opts.RecordsKeySecret
	if secret == "" && opts.RecordsKeyDir == "" && opts.CertSecret != "" {
		secret = opts.Namespace + "/" + opts.Instance + "-records-key"
	}
	if secret == "" || opts.RecordsKeyDir != "" {
		dir := opts.RecordsKeyDir
		if dir == "" {
			dir = filepath.Join(filepath.Dir(filepath.Clean(opts.CertDir)), "records-key")
		}
		s, err := records.NewDir(ctx, dir, opts.RecordsKeys)
		if err != nil {
			return nil, fmt.Errorf("records keys (--records-key-dir): %w", err)
		}
		return s, nil
	}
	ns, name, ok := strings.Cut(secret, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--records-key-secret %q: want namespace/name", secret)
	}
	s, rotator, err := records.NewSecret(ctx, c, ns, name, opts.RecordsKeys)
	if err != nil {
		return nil, err
	}
	if err := add(withLogger(s, log)); err != nil {
		return nil, err
	}
	if err := add(withLogger(rotator, log)); err != nil {
		return nil, err
	}
	return s, nil
}

// Records is the store of the keys that sign the modules' records.
func (g *Gatehouse) Records() module.Records { return g.records }
