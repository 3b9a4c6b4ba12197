package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// recorded is a runnable that records whether the manager started it.
type recorded struct {
	started atomic.Bool
	ran     chan struct{}
}

func (r *recorded) Start(ctx context.Context) error {
	r.started.Store(true)
	close(r.ran)
	<-ctx.Done()
	return nil
}

func (*recorded) NeedLeaderElection() bool { return false }

// setupThat is a module whose Setup runs setup.
type setupThat struct {
	name  string
	setup func(module.Host) error
}

func (m setupThat) Name() string                                 { return m.name }
func (setupThat) AddToScheme(*runtime.Scheme) error              { return nil }
func (setupThat) Webhooks() []module.Webhook                     { return nil }
func (m setupThat) Setup(_ context.Context, h module.Host) error { return m.setup(h) }

func testServer(t *testing.T) *server.Server {
	t.Helper()
	bundle, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := bundle.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	src, err := certs.NewDir(dir, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Addr: "127.0.0.1:0", Certificates: src, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestAModuleThatCannotStartLeavesNothingRunning: what a module's Setup
// registered before it failed (a runnable, a run-time webhook) is
// discarded: the manager never starts it, the server serves no run-time
// webhook of the module, and what the module asks for later is refused;
// the module that started has its runnable run.
func TestAModuleThatCannotStartLeavesNothingRunning(t *testing.T) {
	mgr, err := manager.New(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	g := &Gatehouse{Manager: mgr, Server: testServer(t)}
	newHost := func(name string) *host {
		return &host{g: g, name: name, mode: module.Enforce, log: logr.Discard(), caches: map[string]bool{}, staging: true, ctx: context.Background()}
	}
	broken, fine := &recorded{ran: make(chan struct{})}, &recorded{ran: make(chan struct{})}
	hook := module.Webhook{
		Name: "w.broken.test", Path: module.RuntimePath("broken") + "w", Type: module.Validating,
		FailurePolicy: admissionregistrationv1.Fail, SideEffects: admissionregistrationv1.SideEffectClassNone, TimeoutSeconds: 5,
		Admit: func(context.Context, admission.Request) admission.Response { return admission.Allowed("") },
	}
	bh := newHost("broken")
	err = setupModule(bh.ctx, setupThat{name: "broken", setup: func(h module.Host) error {
		if err := h.Add(broken); err != nil {
			return err
		}
		if err := h.SetWebhooks([]module.Webhook{hook}); err != nil {
			return err
		}
		return errors.New("no Landlock")
	}}, bh)
	if err == nil || err.Error() != "no Landlock" {
		t.Fatalf("Setup: %v, want its error", err)
	}
	if len(g.Server.RuntimeWebhookPaths("broken")) != 1 {
		t.Fatal("the run-time webhook set during Setup is not served: the test proves nothing")
	}
	bh.discard()
	if len(g.Server.RuntimeWebhookPaths("broken")) != 0 {
		t.Fatal("the failed module's run-time webhook is still served")
	}
	if err := bh.Add(&recorded{ran: make(chan struct{})}); err == nil {
		t.Fatal("a failed module's later Add was accepted")
	}
	if err := bh.SetWebhooks([]module.Webhook{hook}); err == nil {
		t.Fatal("a failed module's later SetWebhooks was accepted")
	}

	fh := newHost("fine")
	if err := setupModule(fh.ctx, setupThat{name: "fine", setup: func(h module.Host) error { return h.Add(fine) }}, fh); err != nil {
		t.Fatal(err)
	}
	if err := fh.commit(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	<-fine.ran
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The manager has returned: every runnable it held was started and
	// has stopped.
	if broken.started.Load() {
		t.Fatal("the runnable of the module that could not start was started")
	}
}

// TestSetupPanicIsTheModulesFailure: a panic in Setup fails the module,
// not the process.
func TestSetupPanicIsTheModulesFailure(t *testing.T) {
	err := setupModule(context.Background(), setupThat{name: "p", setup: func(module.Host) error { panic("boom") }}, nil)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Setup that panicked: %v, want an error naming the panic", err)
	}
}

// TestModuleStatesReportEachModule: gatehouse_module_ready is 1 for a
// module that started, 0 for one that failed; FailedModules and the
// /readyz note name the failed one with its reason, the started one not.
func TestModuleStatesReportEachModule(t *testing.T) {
	g := &Gatehouse{}
	g.modules.started("unit-fine")
	g.modules.fail("unit-broken", errors.New("this kernel cannot confine"), nil)
	if v := testutil.ToFloat64(metrics.ModuleReady.WithLabelValues("unit-fine")); v != 1 {
		t.Fatalf("gatehouse_module_ready{module=unit-fine} = %v, want 1", v)
	}
	if v := testutil.ToFloat64(metrics.ModuleReady.WithLabelValues("unit-broken")); v != 0 {
		t.Fatalf("gatehouse_module_ready{module=unit-broken} = %v, want 0", v)
	}
	if got := g.FailedModules(); len(got) != 1 || got["unit-broken"] != "this kernel cannot confine" {
		t.Fatalf("FailedModules = %v", got)
	}
	if note := g.moduleNote("unit-fine")(); note != "" {
		t.Fatalf("note of a started module: %q", note)
	}
	if note := g.moduleNote("unit-broken")(); note != "not started: this kernel cannot confine" {
		t.Fatalf("note of a failed module: %q", note)
	}
	if note := g.moduleNote("unit-long"); note() != "" {
		t.Fatal("a note for an unknown module")
	}
	g.modules.fail("unit-long", errors.New(strings.Repeat("é", 400)), nil)
	if note := g.moduleNote("unit-long")(); len(note) > len("not started: ")+300+len("…") || !strings.HasSuffix(note, "é…") {
		t.Fatalf("a long reason is not bounded on a rune boundary: %d bytes, ends %q", len(note), note[len(note)-8:])
	}
}

// TestNamedByConfigurations: a failed module is named when a webhook of
// the install's configurations calls one of its paths (by URL or through
// the Service), never for another module's or another install's.
func TestNamedByConfigurations(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	validating, mutating := webhookconfig.ConfigurationNames("gh")
	other, _ := webhookconfig.ConfigurationNames("other")
	failed := failedModule{reason: "x", paths: []string{"/validate-broken"}}
	byURL := func(name, path string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://gh.example:9443" + path)}}
	}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		want string
	}{
		{"no configurations", nil, ""},
		{"another module's webhook", []runtime.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: validating}, Webhooks: []admissionregistrationv1.ValidatingWebhook{byURL("fine.test", "/validate-fine")}}}, ""},
		{"another install's configuration", []runtime.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: other}, Webhooks: []admissionregistrationv1.ValidatingWebhook{byURL("broken.test", "/validate-broken")}}}, ""},
		{"its webhook by URL", []runtime.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: validating}, Webhooks: []admissionregistrationv1.ValidatingWebhook{byURL("fine.test", "/validate-fine"), byURL("broken.test", "/validate-broken")}}},
			"validating webhook broken.test"},
		{"its mutating webhook through the Service", []runtime.Object{&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: mutating}, Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "broken.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: "gh", Name: "gh", Path: ptr.To("/validate-broken")}}}}}},
			"mutating webhook broken.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(tc.objs...).Build()
			got, err := namedByConfigurations(context.Background(), c, "gh", failed)
			if err != nil || got != tc.want {
				t.Fatalf("named %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// failing is a runnable that fails once started.
type failing struct{}

func (failing) Start(context.Context) error { return errors.New("informer never synced") }
func (failing) NeedLeaderElection() bool    { return false }

// TestAModuleThatFailsWhileRunningFailsAlone: a module runnable's error
// does not stop the manager: the module is reported failed, its webhooks
// answer undecided on this replica and its run-time webhooks are
// dropped; another module's runnable runs on until the host stops.
func TestAModuleThatFailsWhileRunningFailsAlone(t *testing.T) {
	mgr, err := manager.New(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	g := &Gatehouse{Manager: mgr, Server: testServer(t)}
	failed := make(chan struct{})
	h := &host{g: g, name: "unit-running", mode: module.Enforce, log: logr.Discard(), caches: map[string]bool{}, staging: true, ctx: context.Background()}
	h.onError = func(err error) {
		g.failRunning(h, err)
		close(failed)
	}
	hook := module.Webhook{
		Name: "w.running.test", Path: module.RuntimePath("unit-running") + "w", Type: module.Validating,
		FailurePolicy: admissionregistrationv1.Fail, SideEffects: admissionregistrationv1.SideEffectClassNone, TimeoutSeconds: 5,
		Admit: func(context.Context, admission.Request) admission.Response { return admission.Allowed("") },
	}
	if err := h.SetWebhooks([]module.Webhook{hook}); err != nil {
		t.Fatal(err)
	}
	if err := h.Add(failing{}); err != nil {
		t.Fatal(err)
	}
	if err := h.commit(); err != nil {
		t.Fatal(err)
	}
	g.modules.started("unit-running")
	other := &recorded{ran: make(chan struct{})}
	if err := mgr.Add(other); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case <-failed:
	case err := <-done:
		t.Fatalf("the host stopped with the module: %v", err)
	}
	<-other.ran
	select {
	case err := <-done:
		t.Fatalf("the host stopped with the module: %v", err)
	default:
	}
	if v := testutil.ToFloat64(metrics.ModuleReady.WithLabelValues("unit-running")); v != 0 {
		t.Fatalf("gatehouse_module_ready = %v, want 0", v)
	}
	if got := g.FailedModules()["unit-running"]; got != "informer never synced" {
		t.Fatalf("reason %q", got)
	}
	if !g.Server.Withdrawn("unit-running") || len(g.Server.RuntimeWebhookPaths("unit-running")) != 0 {
		t.Fatal("the failed module's webhooks are still decided on this replica")
	}
	if err := h.Add(&recorded{ran: make(chan struct{})}); err == nil {
		t.Fatal("a failed module's later Add was accepted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAModulesReadyChecksAreItsOwn: a module's readiness check is staged
// with its Setup (a failed Setup adds none) and passes once the module
// failed while running: a module that no longer decides holds no replica
// out of the Service.
func TestAModulesReadyChecksAreItsOwn(t *testing.T) {
	g := &Gatehouse{Server: testServer(t)}
	never := func() error { return errors.New("never ready") }
	discarded := &host{g: g, name: "unit-discarded", staging: true}
	discarded.addReadyCheck("loaded", never)
	discarded.discard()
	kept := &host{g: g, name: "unit-kept", staging: true}
	kept.addReadyCheck("loaded", never)
	if err := kept.commit(); err != nil {
		t.Fatal(err)
	}
	// The server has not started: every answer is 503. What counts is
	// which checks it names.
	body := func() string {
		rec := httptest.NewRecorder()
		g.Server.WebhookMux().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Body.String()
	}
	if b := body(); strings.Contains(b, "unit-discarded") || !strings.Contains(b, "unit-kept/loaded: never ready") {
		t.Fatalf("/readyz names %q: want the committed module's check alone", b)
	}
	kept.failed.Store(true)
	if b := body(); strings.Contains(b, "unit-kept") {
		t.Fatalf("/readyz still waits for a failed module: %q", b)
	}
}
