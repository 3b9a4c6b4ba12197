package configcheck

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/haproxy"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/renderproc"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// Webhook identities of the static webhook (the config's own validation);
// the watched resources' webhooks are registered at run time under
// module.RuntimePath("configcheck").
const (
	ConfigWebhookName = "configcheck-haproxytemplateconfig.gatehouse.dev"
	ConfigWebhookPath = "/validate-configcheck-haproxytemplateconfig"
	// configWebhookTimeout leaves room for the embedded tests.
	configWebhookTimeout = 20
)

// The module reads its configs and writes their status; it reads
// namespaces' labels for namespaceSelectors. The watched resources are
// whatever the configs name: the generated rules grant the common ones
// (Ingresses, Services, EndpointSlices, IngressClasses); the chart's
// modules.configcheck.watchedResources grants others (docs/configcheck.md).
//
// Renderings are published (ConfigMaps, Secrets) only in the namespaces the
// operator grants, never cluster-wide: the chart's
// modules.configcheck.publishNamespaces renders a Role in each; elsewhere a
// config's Published condition says OutputForbidden (publish.go).
//
// SubjectAccessReviews ask, when a config is written, whether its author
// holds the rights the config exercises (authz).
//
// haptic's configs (haproxy-haptic.org) are read, and patched for their
// author record's renewal only (authz's record): haptic's controller owns their
// status, and Gatehouse publishes nothing of them.
//
// +kubebuilder:rbac:groups=gatehouse.dev,resources=haproxytemplateconfigs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=haproxy-haptic.org,resources=haproxytemplateconfigs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=gatehouse.dev,resources=haproxytemplateconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses;ingressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch

// Options tunes the module; zero values take the defaults in setDefaults.
// The fields with a json name are its settings (settings.go):
// modules.configcheck.settings in the --config file and the chart.
type Options struct {
	// HAProxyBinary is the haproxy executable (default: found in PATH, else
	// /usr/sbin/haproxy).
	HAProxyBinary string `json:"-"`
	// HAProxyRoot, when set, is an unpacked root file system haproxy runs
	// from, through its own loader and libraries (haproxy.RunnerOptions.Root):
	// HAProxyBinary is then its path inside the root.
	HAProxyRoot string `json:"-"`
	// AllowLua lets renderings load Lua (lua-load and friends), for a
	// platform whose HAProxy needs it. Off by default: haproxy -c runs Lua
	// while parsing. The check process stays confined either way.
	AllowLua bool `json:"allowLua,omitempty"`
	// Confinement is ConfinementRequired (the default: the module does not
	// start where the kernel cannot confine haproxy -c and the render
	// workers, having no Landlock or no seccomp filters) or
	// ConfinementBestEffort (it starts with what there is: the check
	// policy and the resource limits still hold, and whatever layers the
	// kernel has; the gauge and an alert say what is missing).
	Confinement string `json:"confinement,omitempty" enum:"required,bestEffort"`
	// AllowUnconfined is ConfinementBestEffort (the older flag).
	AllowUnconfined bool `json:"-"`
	// RunnerDir names the directory shared with a sandbox runner in
	// another container (`gatehouse sandbox-runner`, the chart's
	// default): checks and renderings then run under its user. RunnerUser
	// ("UID:GID"), for a server running as root (make run), starts such a
	// runner as a child under that user instead. Either makes the separate
	// identity required under ConfinementRequired: the module does not
	// start without it.
	// Both are where the process runs, not policy: flags only
	// (--sandbox-runner-dir, which the chart passes beside the volume it
	// mounts, and --sandbox-runner-user), never settings.
	RunnerDir  string `json:"-"`
	RunnerUser string `json:"-"`
	// Kernel reports what the kernel can confine; nil asks the kernel
	// (sandbox.Available). Tests and the hidden flag
	// --configcheck-simulate-no-landlock answer for a kernel without
	// Landlock, to start the module as it starts there.
	Kernel func() sandbox.Capabilities `json:"-"`
	// MaxConcurrentChecks bounds the haproxy -c processes at once (default
	// 2).
	MaxConcurrentChecks int `json:"-"`
	// Margin is kept free of each request's timeoutSeconds, for the API
	// server's own round trip. Default 1 s.
	Margin time.Duration `json:"-"`
	// PublishDelay gathers a burst of watched changes into one rendering
	// to publish. Default 500 ms.
	PublishDelay time.Duration `json:"-"`
	// RenderWorkers is how many render worker processes run at once
	// (default 2); RenderMemory is each rendering's memory budget in bytes
	// (default 256 MiB). Size the Pod's memory limit for Gatehouse plus
	// RenderWorkers × RenderMemory.
	RenderWorkers int   `json:"-"`
	RenderMemory  int64 `json:"-"`
	// TestTimeout bounds a config's embedded tests outside admission (the
	// spec's 60 s). Default 60 s.
	TestTimeout time.Duration `json:"-"`
	// AccessRecheck is how often each config's access is checked again
	// when nothing else asks (accesscontroller.go): a right taken from its author
	// stops what it read within AccessRecheck and accessTTL. Default 2
	// minutes.
	AccessRecheck time.Duration `json:"-"`
}

// withDefaults returns o with its defaults applied.
func (o Options) withDefaults() Options {
	o.setDefaults()
	return o
}

func (o *Options) setDefaults() {
	if o.MaxConcurrentChecks == 0 {
		o.MaxConcurrentChecks = 2
	}
	if o.Margin == 0 {
		o.Margin = time.Second
	}
	if o.PublishDelay == 0 {
		o.PublishDelay = 500 * time.Millisecond
	}
	if o.RenderWorkers == 0 {
		o.RenderWorkers = 2
	}
	if o.RenderMemory == 0 {
		o.RenderMemory = 256 << 20
	}
	if o.TestTimeout == 0 {
		o.TestTimeout = 60 * time.Second
	}
	if o.AccessRecheck == 0 {
		o.AccessRecheck = 2 * time.Minute
	}
}

// Module is configcheck.
type Module struct {
	opts    Options
	host    module.Host
	checker *haproxy.Checker
	// renders runs every rendering: templates are programs a config's
	// author wrote, so they run in confined worker processes, never in
	// the server.
	renders *renderproc.Pool

	namespaces cache.Cache
	configs    cache.Cache
	// hapticConfigs reads haptic's kind, followed through the host: it
	// holds configs while haptic's CRD is served (spec.Key).
	hapticConfigs module.Kind
	haptic        *hapticFollower
	watches       *watchSet
	publisher     *publisher
	// access answers SubjectAccessReviews, shared and bounded; accessCtl
	// checks what each config's author may have read (accesscontroller.go).
	access    *authz.Cache
	accessCtl *accessController

	// configChecks bounds the config admissions checked at once
	// (RenderWorkers-1, at least 1), in fair turns by namespace.
	configChecks *fair.Queue

	// initialLoad holds /readyz until the configs that existed at start
	// are loaded (initialload.go).
	initialLoad *initialLoad

	mu     sync.RWMutex
	states map[spec.Key]*configState
	// admitted holds each config's turn and pending changes (guard.Admissions).
	admitted map[spec.Key]*guard.Admissions
	// failOpenLogged is set once "no config asks for validation" was logged.
	failOpenLogged bool
	// onDemandForbidden logs once that Gatehouse may not get an on-demand
	// resource's objects (package ondemand).
	onDemandForbidden sync.Once
}

// New returns the configcheck module.
func New(opts Options) *Module {
	opts.setDefaults()
	checks, err := fair.New(fair.Options{Slots: max(1, opts.RenderWorkers-1), MaxWaiting: maxAuthorWaiting})
	if err != nil {
		panic(fmt.Sprintf("configcheck: RenderWorkers %d: %v", opts.RenderWorkers, err))
	}
	return &Module{opts: opts, states: map[spec.Key]*configState{}, configChecks: checks}
}

// maxAuthorWaiting bounds the config admissions of one namespace waiting
// to be checked: configs are written one at a time, and a check takes up
// to the config webhook's timeout; a burst of them (dry runs in a loop)
// fails at once rather than holding connections until its deadline.
const maxAuthorWaiting = 1

func (m *Module) Name() string { return "configcheck" }

func (m *Module) AddToScheme(s *runtime.Scheme) error {
	if err := gatehousev1alpha1.AddToScheme(s); err != nil {
		return err
	}
	return hapticv1alpha1.AddToScheme(s)
}

// Webhooks declares the config's own validation. failurePolicy Fail: a
// config that does not compile or whose tests fail is never stored, and
// configs are rare platform objects, so refusing them while Gatehouse is
// unreachable locks nobody out of their workloads.
func (m *Module) Webhooks() []module.Webhook {
	return []module.Webhook{m.authorWebhook(), {
		Name: ConfigWebhookName, Path: ConfigWebhookPath, Type: module.Validating,
		Rules:          configWrites(),
		FailurePolicy:  admissionregistrationv1.Fail,
		SideEffects:    admissionregistrationv1.SideEffectClassNone,
		TimeoutSeconds: configWebhookTimeout,
		Admit:          m.admitConfig,
		DenialReasons:  []string{reasonInvalidConfig, reasonTestsFailed, reasonCurrentState, reasonWithoutState},
		Locked:         module.Locked{ObjectSelector: configWebhooksLocked, NamespaceExclusions: configWebhooksLocked},
	}}
}

// Setup finds haproxy, and builds the caches of configs and namespace
// labels; the watched resources' informers start as configs ask for them.
func (m *Module) Setup(ctx context.Context, host module.Host) (err error) {
	m.host = host
	kernel := m.opts.Kernel
	if kernel == nil {
		kernel = sandbox.Available
	}
	identityWanted := m.opts.RunnerDir != "" || m.opts.RunnerUser != ""
	runner, runnerErr := startRunner(ctx, m.opts)
	caps := kernel()
	if runner != nil {
		caps.SeparateIdentity = true
		caps.RunnerUID, caps.RunnerGID = runner.Identity()
		caps.ProcessUIDs = runner.ProcessUIDs()
	}
	metrics.RecordConfinement(caps, identityWanted)
	if err := checkConfinement(caps, m.opts.bestEffort(), identityWanted, runnerErr); err != nil {
		if runner != nil {
			_ = runner.Close()
		}
		return err
	}
	if runner != nil {
		sandbox.UseRunner(runner)
		stopRunner := func() {
			sandbox.UseRunner(nil)
			_ = runner.Close()
		}
		defer func() {
			if err != nil {
				stopRunner()
			}
		}()
		if err := host.Add(closeOnStop(stopRunner)); err != nil {
			return err
		}
	}
	defer func() {
		// The host discards what a failed Setup registered (the closer
		// below among it): the workers already running go here.
		if err != nil && m.renders != nil {
			_ = m.renders.Close()
		}
	}()
	missing := confinementMissing(caps, identityWanted, runnerErr)
	if len(missing) == 0 {
		logf.FromContext(ctx).Info("configcheck: checks and renderings run confined", "layers", caps.Layers(),
			"landlockABI", caps.LandlockABI, "seccomp", caps.Seccomp, "separateIdentity", runnerIdentity(caps))
	} else {
		// logr has no warning level: this is said at error, once, at start
		// (and gatehouse_configcheck_confinement keeps saying it).
		logf.FromContext(ctx).Error(nil, "configcheck: checks and renderings run with less confinement than required (confinement bestEffort)",
			"layers", caps.Layers(), "landlockABI", caps.LandlockABI, "seccomp", caps.Seccomp, "separateIdentity", runnerIdentity(caps), "missing", missing)
	}
	var checker *haproxy.Checker
	checker, err = newChecker(m.opts.HAProxyRoot, m.opts.HAProxyBinary, m.opts.AllowLua, m.opts.MaxConcurrentChecks)
	if err != nil {
		return fmt.Errorf("configcheck: %w", err)
	}
	m.checker = checker
	m.renders, err = newRenderPool(m.opts)
	if err != nil {
		return fmt.Errorf("configcheck: %w", err)
	}
	if err := host.Add(closeOnStop(func() { _ = m.renders.Close() })); err != nil {
		return err
	}
	m.configs, err = host.NewCache("configs", cache.Options{ByObject: map[client.Object]cache.ByObject{
		&gatehousev1alpha1.HAProxyTemplateConfig{}: {},
	}})
	if err != nil {
		return err
	}
	if err := m.followHapticConfigs(ctx); err != nil {
		return err
	}
	namespace := &metav1.PartialObjectMetadata{}
	namespace.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	m.namespaces, err = host.NewCache("namespaces", cache.Options{ByObject: map[client.Object]cache.ByObject{namespace: {}}})
	if err != nil {
		return err
	}
	m.watches = newWatchSet(ctx, host)
	m.access = authz.NewCache(func(ctx context.Context, user authenticationv1.UserInfo, q authz.Question) (bool, error) {
		return m.subjectAccessReview(user)(ctx, q)
	})
	if m.accessCtl, err = newAccessController(m); err != nil {
		return err
	}
	if err := host.Add(m.accessCtl.controller); err != nil {
		return err
	}
	if err := m.handleNamespaceEvents(ctx, namespace); err != nil {
		return err
	}
	if err := metrics.FollowConfigStates(ctx, m.configs); err != nil {
		return err
	}
	m.countHapticConfigs()
	if m.publisher, err = newPublisher(m); err != nil {
		return err
	}
	m.addInitialLoadCheck(ctx)
	reconciler, err := newReconciler(m)
	if err != nil {
		return err
	}
	if err := host.Add(reconciler); err != nil {
		return err
	}
	if err := host.AddAudit(m.audit()); err != nil {
		return err
	}
	return host.Add(m.publisher.controller)
}

// newChecker is the haproxy -c checker every path shares: the confined
// process runner behind the check policy.
func newChecker(root, binary string, allowLua bool, maxConcurrent int) (*haproxy.Checker, error) {
	if caps := sandbox.Available(); allowLua && caps.LandlockABI == 0 {
		// Lua loads native modules, and without Landlock nothing but file
		// permissions stands between them and every file Gatehouse's user
		// may read (its ServiceAccount token included): the other layers
		// hold without Landlock, this one cannot.
		return nil, fmt.Errorf("Lua is allowed (allow-lua), but this kernel has no Landlock (%s), so Lua's native modules could read any file Gatehouse may read; "+
			"turn allow-lua off, or run on a kernel with the landlock LSM enabled", caps.LandlockReason)
	}
	runner, err := haproxy.NewRunner(haproxy.RunnerOptions{Root: root, Binary: binary})
	if err != nil {
		return nil, err
	}
	return haproxy.New(haproxy.Options{Runner: runner, Policy: haproxy.Policy{AllowLua: allowLua}, MaxConcurrent: maxConcurrent})
}

// checkConfinement refuses to run untrusted templates and configurations on
// a kernel that cannot confine them, or without the separate identity that
// was asked for (a runner configured but unreachable), unless the
// administrator said so.
func checkConfinement(caps sandbox.Capabilities, bestEffort, identityWanted bool, runnerErr error) error {
	missing := confinementMissing(caps, identityWanted, runnerErr)
	if len(missing) == 0 || bestEffort {
		return nil
	}
	return fmt.Errorf("configcheck: checks and renderings cannot run confined as required (%s): "+
		"run on a kernel with the landlock LSM enabled (Linux 5.13 or later) and seccomp filters, with the sandbox runner the configuration names, or accept the risk with --configcheck-confinement=bestEffort",
		strings.Join(missing, "; "))
}

// confinementMissing lists what required confinement lacks: the kernel's
// layers, and the separate identity where one was asked for. Without one
// asked for, a server that is not root cannot take another user, and the
// kernel's layers are what "required" means there (Landlock keeps the
// server's files from the checks).
func confinementMissing(caps sandbox.Capabilities, identityWanted bool, runnerErr error) []string {
	missing := caps.Missing()
	if identityWanted && !caps.SeparateIdentity {
		reason := "no runner"
		if runnerErr != nil {
			reason = runnerErr.Error()
		}
		missing = append(missing, "the separate identity ("+reason+"); checks would run as the server's user")
	}
	return missing
}

// runnerIdentity says under which identity checks run, for the start-up line.
func runnerIdentity(caps sandbox.Capabilities) string {
	if !caps.SeparateIdentity {
		return "none: the server's user"
	}
	if caps.ProcessUIDs.Count > 0 {
		// The runner holds CAP_SETUID (a root server's child): each
		// process under a user of its own, in the runner's group.
		return fmt.Sprintf("%d:%d, each process as a user of %v", caps.RunnerUID, caps.RunnerGID, caps.ProcessUIDs)
	}
	return fmt.Sprintf("%d:%d", caps.RunnerUID, caps.RunnerGID)
}

// startRunner connects to the runner opts name, or starts one: nil, nil
// when none is asked for.
func startRunner(ctx context.Context, opts Options) (*sandbox.Runner, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch {
	case opts.RunnerDir != "":
		return sandbox.ConnectRunner(ctx, opts.RunnerDir)
	case opts.RunnerUser != "":
		var o sandbox.RunnerOptions
		if _, err := fmt.Sscanf(opts.RunnerUser, "%d:%d", &o.UID, &o.GID); err != nil || o.UID <= 0 || o.GID <= 0 {
			return nil, fmt.Errorf("sandbox runner user %q: want UID:GID, neither 0", opts.RunnerUser)
		}
		// The runner is started again when it dies; checks that ran
		// through it failed with "did it crash?", so the log says why.
		log := logf.FromContext(ctx)
		o.OnRestart = func(ended string, err error) {
			if err != nil {
				log.Error(err, "configcheck: the sandbox runner ended and could not be started again; checks fail until it is (retried with backoff)", "ended", ended)
				return
			}
			log.Info("configcheck: the sandbox runner ended and was started again", "ended", ended)
		}
		return sandbox.StartRunner(ctx, o)
	}
	return nil, nil
}

// The confinement modes (Options.Confinement).
const (
	ConfinementRequired   = "required"
	ConfinementBestEffort = "bestEffort"
)

// bestEffort says whether the module starts whatever the kernel confines.
func (o Options) bestEffort() bool {
	return o.Confinement == ConfinementBestEffort || o.AllowUnconfined
}

// newRenderPool is the worker pool every rendering goes through.
func newRenderPool(opts Options) (*renderproc.Pool, error) {
	return renderproc.New(renderproc.Options{Workers: opts.RenderWorkers, MemoryLimit: opts.RenderMemory})
}

// storedConfig reads key's config from its kind's cache.
func (m *Module) storedConfig(ctx context.Context, key spec.Key) (spec.Object, error) {
	cfg, err := spec.NewObject(key.Kind)
	if err != nil {
		return nil, err
	}
	var reader client.Reader = m.configs
	if key.Kind == spec.HapticKind {
		reader = m.hapticConfigs
	}
	if err := reader.Get(ctx, key.NamespacedName, cfg.Typed()); err != nil {
		return nil, err
	}
	return cfg, nil
}

// compiler is the worker pool's Compile in ctx.
func (m *Module) compiler(ctx context.Context) spec.TemplateCompiler {
	return func(templates render.Templates, engine string) (render.Renderer, error) {
		return m.renders.Compile(ctx, templates, engine)
	}
}

// handleNamespaceEvents re-judges the watched objects of a namespace whose
// labels changed, for the watched resources that select namespaces by label.
func (m *Module) handleNamespaceEvents(ctx context.Context, namespace client.Object) error {
	namespaces, err := m.namespaces.GetInformer(ctx, namespace)
	if err != nil {
		return err
	}
	_, err = namespaces.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			before, ok1 := old.(client.Object)
			after, ok2 := obj.(client.Object)
			if ok1 && ok2 && !labels.Equals(before.GetLabels(), after.GetLabels()) {
				m.namespaceChanged(ctx, after.GetName())
				m.accessCtl.namespaceChanged()
			}
		},
		AddFunc: func(obj any) {
			if o, ok := obj.(client.Object); ok {
				m.namespaceChanged(ctx, o.GetName())
				m.accessCtl.namespaceChanged()
			}
		},
	})
	return err
}

// namespaceLabelsOnce returns namespaceLabels reading each namespace once:
// a listing holds many objects of few namespaces.
func (m *Module) namespaceLabelsOnce() func(string) labels.Set {
	seen := map[string]labels.Set{}
	return func(ns string) labels.Set {
		if l, ok := seen[ns]; ok {
			return l
		}
		seen[ns] = m.namespaceLabels(ns)
		return seen[ns]
	}
}

// namespaceLabels are a namespace's labels from the cache (nil when it is
// unknown).
func (m *Module) namespaceLabels(name string) labels.Set {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := m.namespaces.Get(context.Background(), client.ObjectKey{Name: name}, ns); err != nil {
		return nil
	}
	return ns.GetLabels()
}

// namespaceTerminating says whether a namespace is being deleted: its
// objects go together, so one of them cannot be kept for another's sake.
func (m *Module) namespaceTerminating(name string) bool {
	if name == "" || m.namespaces == nil {
		return false
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := m.namespaces.Get(context.Background(), client.ObjectKey{Name: name}, ns); err != nil {
		return false
	}
	return ns.DeletionTimestamp != nil
}

func (m *Module) namespaceChanged(ctx context.Context, namespace string) {
	for _, st := range m.allStates() {
		for _, f := range st.feeds {
			if f != nil {
				f.namespaceChanged(ctx, namespace)
			}
		}
	}
}

// closeOnStop calls its function when the host stops, on every replica:
// each replica runs its own render workers (a manager.RunnableFunc would
// wait for leadership, and a follower's workers would never be closed).
type closeOnStop func()

func (f closeOnStop) Start(ctx context.Context) error {
	<-ctx.Done()
	f()
	return nil
}

func (closeOnStop) NeedLeaderElection() bool { return false }
