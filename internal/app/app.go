package app

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// GenericValidatePath is the path that dispatches by GVK to validators that
// modules register at run time.
const GenericValidatePath = "/validate"

// Options configures a Gatehouse process. Defaults are set in setDefaults.
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
	// MetricsAddr serves Prometheus metrics; "0" disables it.
	MetricsAddr string
	// Namespace is where Gatehouse runs; its webhooks exclude it.
	Namespace string
	// PprofAddr serves net/http/pprof; "" or "0" disables it.
	PprofAddr string

	// ManageWebhooks, when set, makes Gatehouse write its own webhook
	// configurations (and CRD conversion stanzas) pointing at this target
	// once it serves. A target with neither URL nor Service points at the
	// server's bound address. Without it, they come from config/ or the Helm chart.
	ManageWebhooks *webhookconfig.Target

	// Catalogue is every module the binary ships; Modules says which are on.
	Catalogue []module.Module
	Modules   map[string]ModuleConfig
}

func (o *Options) setDefaults() {
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.CertDir == "" {
		o.CertDir = "/etc/gatehouse/tls"
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = ":8080"
	}
	if o.Namespace == "" {
		o.Namespace = "gatehouse-system"
	}
	o.Server.Log = o.Log.WithName("server")
}

// Gatehouse is an assembled, not yet started process.
type Gatehouse struct {
	Manager manager.Manager
	Server  *server.Server
	// Webhooks are all webhooks served, for rendering configurations.
	Webhooks []module.Webhook

	validators *module.ValidatorRegistry
	opts       Options
}

// New builds the manager, the server and the enabled modules.
func New(ctx context.Context, opts Options) (*Gatehouse, error) {
	opts.setDefaults()
	log := opts.Log
	enabled, modes, err := resolveModules(opts.Catalogue, opts.Modules)
	if err != nil {
		return nil, err
	}

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	byObject := map[client.Object]cache.ByObject{}
	owner := map[reflect.Type]string{}
	for _, m := range enabled {
		if err := m.AddToScheme(scheme); err != nil {
			return nil, fmt.Errorf("module %s: add types: %w", m.Name(), err)
		}
		for obj, scope := range m.CacheObjects() {
			t := reflect.TypeOf(obj)
			if other, dup := owner[t]; dup {
				return nil, fmt.Errorf("modules %s and %s both scope the cache for %s; one must read it another way", other, m.Name(), t)
			}
			owner[t] = m.Name()
			byObject[obj] = scope
		}
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
		Logger: log,
		// No decision reads managedFields; dropping them roughly halves
		// what the cache holds.
		Cache:                   cache.Options{ByObject: byObject, DefaultTransform: cache.TransformStripManagedFields()},
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  "0",
		PprofBindAddress:        opts.PprofAddr,
		WebhookServer:           srv,
		GracefulShutdownTimeout: &shutdown,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}

	// The manager adds its webhook server to the runnables when first asked
	// for it; it then starts it before the caches.
	_ = mgr.GetWebhookServer()
	g := &Gatehouse{Manager: mgr, Server: srv, opts: opts, validators: module.NewValidatorRegistry(mgr.GetRESTMapper())}
	for _, m := range enabled {
		mode := modes[m.Name()]
		host := module.Host{
			Manager:     mgr,
			Log:         log.WithName(m.Name()),
			Enforcement: mode,
			Namespace:   opts.Namespace,
			Validators:  g.validators,
			AddSyncCheck: func(name string, synced func() bool) {
				g.addSyncCheck(m.Name()+"/"+name, synced)
			},
		}
		hooks, err := m.Setup(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name(), err)
		}
		for _, h := range hooks {
			if err := h.Validate(); err != nil {
				return nil, fmt.Errorf("module %s: %w", m.Name(), err)
			}
			if h.Type == module.Conversion {
				srv.Conversion(m.Name(), h)
			} else {
				srv.Admission(m.Name(), h, mode)
			}
			g.Webhooks = append(g.Webhooks, h)
		}
		log.Info("module enabled", "module", m.Name(), "enforcement", mode, "webhooks", len(hooks))
	}
	generic := g.genericWebhook()
	srv.Admission("gatehouse", generic, module.Enforce)
	g.Webhooks = append(g.Webhooks, generic)

	var managerCacheSynced atomic.Bool
	g.addSyncCheck("informer-cache", managerCacheSynced.Load)
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			managerCacheSynced.Store(true)
			metrics.CacheSynced.WithLabelValues("informer-cache").Set(1)
			log.Info("informer caches synced")
		}
		return nil
	})); err != nil {
		return nil, err
	}
	if opts.ManageWebhooks != nil {
		if err := g.manageWebhooks(*opts.ManageWebhooks); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// manageWebhooks applies the rendered configurations once the server
// listens, retrying until it succeeds; /readyz waits for it.
func (g *Gatehouse) manageWebhooks(target webhookconfig.Target) error {
	if target.Namespace == "" {
		target.Namespace = g.opts.Namespace
	}
	var applied atomic.Bool
	g.Server.AddReadyCheck("webhook-configuration", func() error {
		if !applied.Load() {
			return errors.New("webhook configurations not applied yet")
		}
		return nil
	})
	log := g.opts.Log.WithName("webhookconfig")
	return g.Manager.Add(manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-g.Server.Listening():
		case <-ctx.Done():
			return nil
		}
		// An uncached client: these are writes and one-off reads, and must not
		// start informers on every webhook configuration and CRD.
		c, err := client.New(g.Manager.GetConfig(), client.Options{Scheme: g.Manager.GetScheme()})
		if err != nil {
			return err
		}
		if target.URL == "" && target.Service == nil {
			// Out-of-cluster runs on a port chosen at bind time.
			target.URL = "https://" + g.Server.Addr().String()
		}
		rendered := webhookconfig.Render(g.Webhooks, target)
		backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 10 * time.Second}
		err = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
			if err := webhookconfig.Apply(ctx, c, rendered); err != nil {
				log.Error(err, "applying webhook configurations; will retry")
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return nil
		}
		applied.Store(true)
		log.Info("webhook configurations applied", "validating", len(rendered.Validating.Webhooks),
			"mutating", len(rendered.Mutating.Webhooks), "conversions", len(rendered.Conversions))
		return nil
	}))
}

func (g *Gatehouse) addSyncCheck(name string, synced func() bool) {
	metrics.CacheSynced.WithLabelValues(name).Set(0)
	g.Server.AddReadyCheck(name, func() error {
		if !synced() {
			return errors.New("cache not synced")
		}
		metrics.CacheSynced.WithLabelValues(name).Set(1)
		return nil
	})
}

// genericWebhook dispatches /validate by the request's GVK. A GVK without a
// validator is allowed: the path only carries rules for registered resources,
// and anything else reaching it is not Gatehouse's to judge.
func (g *Gatehouse) genericWebhook() module.Webhook {
	hook := module.Webhook{
		Name:           "validate.gatehouse.dev",
		Path:           GenericValidatePath,
		Type:           module.Validating,
		FailurePolicy:  admissionregistrationv1.Fail,
		SideEffects:    admissionregistrationv1.SideEffectClassNone,
		TimeoutSeconds: 10,
		Admit: func(ctx context.Context, req admission.Request) admission.Response {
			key := module.GVKString(schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind})
			fn, ok := g.validators.Lookup(key)
			if !ok {
				return admission.Allowed("no validator registered for " + key)
			}
			return fn(ctx, req)
		},
	}
	for _, gvr := range g.validators.Resources() {
		hook.Rules = append(hook.Rules, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{gvr.Group}, APIVersions: []string{gvr.Version}, Resources: []string{gvr.Resource},
			},
		})
	}
	return hook
}

// Start runs until ctx ends.
func (g *Gatehouse) Start(ctx context.Context) error {
	return g.Manager.Start(ctx)
}

func newCertSource(ctx context.Context, opts Options) (certs.Source, error) {
	log := opts.Log.WithName("certs")
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
	cs, err := kubernetes.NewForConfig(opts.RestConfig)
	if err != nil {
		return nil, err
	}
	src, err := certs.NewSecret(ctx, cs, ns, name, log)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	return src, nil
}
