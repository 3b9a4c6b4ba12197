package e2e

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/testing/clustertest"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// configcheckEnv is one test's HAProxyTemplateConfig (examples/configcheck,
// in a namespace of the test's own), the namespace its Ingresses and
// Services live in, and Gatehouse with the configcheck module.
type configcheckEnv struct {
	t      *testing.T
	c      client.Client
	cfgKey types.NamespacedName
	app    string
	scope  string // the scopeLabel value of the test's namespaces
	g      *testenv.Gatehouse
}

const scopeLabel = clustertest.ScopeLabel

// label puts namespace in the test's scope.
func (e *configcheckEnv) label(namespace string) {
	e.t.Helper()
	ns := &corev1.Namespace{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: namespace}, ns); err != nil {
		e.t.Fatal(err)
	}
	ns.Labels = map[string]string{scopeLabel: e.scope}
	if err := e.c.Update(context.Background(), ns); err != nil {
		e.t.Fatal(err)
	}
}

func startConfigcheck(t *testing.T) *configcheckEnv {
	t.Helper()
	return startConfigcheckWith(t, nil)
}

// startConfigcheckWith is startConfigcheck with the example config changed
// by change before it is created.
func startConfigcheckWith(t *testing.T, change func(*gatehousev1alpha1.HAProxyTemplateConfig)) *configcheckEnv {
	t.Helper()
	return startConfigcheckOn(t, change, func(opts app.Options) *testenv.Gatehouse { return startGatehouse(t, opts) })
}

// startConfigcheckOn is startConfigcheckWith with Gatehouse started by
// start, given configcheck's options.
func startConfigcheckOn(t *testing.T, change func(*gatehousev1alpha1.HAProxyTemplateConfig), start func(app.Options) *testenv.Gatehouse) *configcheckEnv {
	t.Helper()
	c := controlPlane.Client
	if err := gatehousev1alpha1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	e := &configcheckEnv{t: t, c: c, app: namespace(t, "app"), scope: "cc-" + randSuffix()}
	e.label(e.app)
	cfg := exampleConfig(t)
	cfg.Namespace = namespace(t, "lb")
	// The config watches this test's namespaces only: Ingresses other runs
	// left in the shared cluster must not enter its rendering.
	scopeTo(cfg, e.scope)
	if change != nil {
		change(cfg)
	}
	e.cfgKey = types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name}
	e.g = start(configcheckOptions())
	// Created through Gatehouse's own webhook, which runs its embedded
	// tests.
	eventually(t, "the config is admitted", func() error { return c.Create(context.Background(), cfg) })
	e.waitFor("the Ingress webhook is served", func() error {
		err := e.c.Create(context.Background(), e.ingress("probe", "haproxy", "probe.example", "no-such-service", 80), client.DryRunAll)
		if err == nil {
			return errors.New("an Ingress to a missing Service was admitted")
		}
		if !strings.Contains(err.Error(), "Service 'no-such-service' not found") {
			return err
		}
		return nil
	})
	return e
}

// startConfigcheckGatehouse starts Gatehouse with the configcheck module
// alone.
func startConfigcheckGatehouse(t testing.TB) *testenv.Gatehouse {
	t.Helper()
	return startGatehouse(t, configcheckOptions())
}

// configcheckOptions runs the configcheck module alone.
func configcheckOptions() app.Options {
	return app.Options{
		Catalogue: []module.Module{configcheck.New(configcheck.Options{})},
		Modules:   map[string]app.ModuleConfig{"configcheck": {Enabled: true}},
	}
}

// exampleConfig and scopeTo are clustertest's: the example config,
// watching the namespaces of one scope.
var (
	exampleConfig = clustertest.ExampleConfig
	scopeTo       = clustertest.ScopeTo
)

func (e *configcheckEnv) waitFor(what string, check func() error) {
	e.t.Helper()
	eventually(e.t, what, check)
}

func (e *configcheckEnv) ingress(name, class, host, service string, port int32) *networkingv1.Ingress {
	return clustertest.Ingress(e.app, name, class, host, service, port)
}

func (e *configcheckEnv) service(name string) *corev1.Service {
	e.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.app, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": name}},
	}
	if err := e.c.Create(context.Background(), svc); err != nil {
		e.t.Fatal(err)
	}
	return svc
}

// denied asserts err is the webhook's denial and contains want.
func denied(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted; want a denial containing %q", want)
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v; want a denial containing %q", err, want)
	}
}

func (e *configcheckEnv) config() *gatehousev1alpha1.HAProxyTemplateConfig {
	e.t.Helper()
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if err := e.c.Get(context.Background(), e.cfgKey, cfg); err != nil {
		e.t.Fatal(err)
	}
	return cfg
}

// updateConfig applies change to the latest config, again on a conflict:
// Gatehouse writes the config's status while the test runs.
func (e *configcheckEnv) updateConfig(t *testing.T, change func(*gatehousev1alpha1.HAProxyTemplateConfig)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := e.c.Get(context.Background(), e.cfgKey, cfg); err != nil {
			return err
		}
		change(cfg)
		return e.c.Update(context.Background(), cfg)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// published returns the rendering published in the config's ConfigMap.
func (e *configcheckEnv) published() map[string]string {
	e.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: e.cfgKey.Namespace, Name: configcheck.RenderedConfigMapName(e.cfgKey.Name)}, cm); err != nil {
		return nil
	}
	return cm.Data
}

func (e *configcheckEnv) webhookNames() []string {
	e.t.Helper()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: webhookconfig.ValidatingName}, vwc); err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, w := range vwc.Webhooks {
		// Only this test's config: configs of other tests (their
		// namespaces still terminating) may be registered beside it.
		if strings.HasSuffix(w.Name, "."+e.cfgKey.Name+"."+e.cfgKey.Namespace+".configcheck.gatehouse.dev") {
			names = append(names, w.Name)
		}
	}
	return names
}

func TestConfigcheckAdmission(t *testing.T) {
	e := startConfigcheck(t)
	ctx := context.Background()

	t.Run("an Ingress to a missing Service is refused with the template's fail text", func(t *testing.T) {
		err := e.c.Create(ctx, e.ingress("web", "haproxy", "a.example", "api", 80))
		denied(t, err, "Service 'api' not found (Ingress "+e.app+"/web, host a.example)")
	})

	e.service("api")
	t.Run("an Ingress to an existing Service is admitted and published", func(t *testing.T) {
		if err := e.c.Create(ctx, e.ingress("web", "haproxy", "a.example", "api", 80)); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the rendering is published with the Ingress's host", func() error {
			data := e.published()
			if !strings.Contains(data["map.hosts.map"], "a.example be_"+e.app+"_api_80") {
				return fmt.Errorf("published map: %q", data["map.hosts.map"])
			}
			if !strings.Contains(data["haproxy.cfg"], "backend be_"+e.app+"_api_80") {
				return fmt.Errorf("published haproxy.cfg lacks the backend")
			}
			return nil
		})
		// The status is written after the ConfigMap.
		e.waitFor("the status says Valid and Ready", func() error {
			cfg := e.config()
			if cfg.Status.ValidationStatus != gatehousev1alpha1.ValidationValid || !meta.IsStatusConditionTrue(cfg.Status.Conditions, gatehousev1alpha1.ConditionReady) ||
				cfg.Status.ObservedGeneration != cfg.Generation || ptr.Deref(cfg.Status.TestsPassed, -1) != 5 || ptr.Deref(cfg.Status.TestsTotal, -1) != 5 ||
				cfg.Status.Output == nil || cfg.Status.Output.ConfigMapName != configcheck.RenderedConfigMapName(e.cfgKey.Name) {
				return fmt.Errorf("status: %+v", cfg.Status)
			}
			return nil
		})
	})

	t.Run("an UPDATE switching to a missing Service is refused", func(t *testing.T) {
		ing := &networkingv1.Ingress{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.app, Name: "web"}, ing); err != nil {
			t.Fatal(err)
		}
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "ghost"
		denied(t, e.c.Update(ctx, ing), "Service 'ghost' not found")
	})

	t.Run("an UPDATE replaces the Ingress in the rendering rather than adding it twice", func(t *testing.T) {
		ing := &networkingv1.Ingress{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.app, Name: "web"}, ing); err != nil {
			t.Fatal(err)
		}
		ing.Spec.Rules[0].Host = "b.example"
		if err := e.c.Update(ctx, ing); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the published map has the new host only", func() error {
			m := e.published()["map.hosts.map"]
			if !strings.Contains(m, "b.example") || strings.Contains(m, "a.example") {
				return fmt.Errorf("published map: %q", m)
			}
			return nil
		})
	})

	t.Run("an annotation-only UPDATE is decided from the checksum cache", func(t *testing.T) {
		before := testutil.ToFloat64(configcheck.HAProxyChecks.WithLabelValues("cached"))
		ing := &networkingv1.Ingress{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.app, Name: "web"}, ing); err != nil {
			t.Fatal(err)
		}
		ing.Annotations = map[string]string{"owner": "team-blue"}
		if err := e.c.Update(ctx, ing); err != nil {
			t.Fatal(err)
		}
		if after := testutil.ToFloat64(configcheck.HAProxyChecks.WithLabelValues("cached")); after <= before {
			t.Fatalf("cached haproxy verdicts: %v before, %v after; want an increase", before, after)
		}
	})

	t.Run("a label-only UPDATE is admitted without rendering (the config ignores labels)", func(t *testing.T) {
		e.waitFor("the store holds the annotated Ingress", func() error {
			ing := &networkingv1.Ingress{}
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.app, Name: "web"}, ing); err != nil {
				return err
			}
			before := testutil.ToFloat64(configcheck.HAProxyChecks.WithLabelValues("unchanged"))
			renders := renderCount()
			ing.Labels = map[string]string{"team": fmt.Sprint("blue-", randSuffix())}
			if err := e.c.Update(ctx, ing); err != nil {
				return err
			}
			if after := testutil.ToFloat64(configcheck.HAProxyChecks.WithLabelValues("unchanged")); after <= before || renderCount() != renders {
				return fmt.Errorf("unchanged verdicts %v -> %v, renders %v -> %v", before, after, renders, renderCount())
			}
			return nil
		})
	})

	t.Run("an Ingress of another class is admitted without rendering", func(t *testing.T) {
		rendersBefore := renderCount()
		if err := e.c.Create(ctx, e.ingress("other", "nginx", "c.example", "missing", 80)); err != nil {
			t.Fatal(err)
		}
		if after := renderCount(); after != rendersBefore {
			t.Fatalf("renders went from %v to %v for an Ingress the config does not select", rendersBefore, after)
		}
	})

	t.Run("a duplicate backend is refused at the haproxy -c phase with its ALERT line", func(t *testing.T) {
		e.service("api2")
		ing := e.ingress("dup", "haproxy", "d.example", "api2", 80)
		ing.Annotations = map[string]string{"haproxy.gatehouse.dev/backend-name": "be_" + e.app + "_api_80"}
		err := e.c.Create(ctx, ing)
		denied(t, err, "haproxy -c rejects the rendered configuration")
		if !strings.Contains(err.Error(), "[ALERT]") || !strings.Contains(err.Error(), "be_"+e.app+"_api_80") {
			t.Fatalf("the denial should quote haproxy's ALERT naming the backend: %v", err)
		}
		if strings.Contains(err.Error(), "/tmp/") {
			t.Fatalf("the denial leaks a temporary path: %v", err)
		}
	})

	t.Run("deleting a Service a backend needs is refused", func(t *testing.T) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.app, Name: "api"}}
		denied(t, e.c.Delete(ctx, svc), "Service 'api' not found")
		// A Service no Ingress uses goes.
		if err := e.c.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.app, Name: "api2"}}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("deleting a namespace is not held by its own references", func(t *testing.T) {
		doomed := namespace(t, "doomed")
		e.label(doomed)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: doomed, Name: "api"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "api"}},
		}
		if err := e.c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
		ing := e.ingress("web", "haproxy", "doomed.example", "api", 80)
		ing.Namespace = doomed
		e.waitFor("the Ingress is admitted", func() error { return e.c.Create(ctx, ing) })
		// Once the store holds the Ingress, the Service may not go alone.
		e.waitFor("the Service's deletion is refused while its Ingress stays", func() error {
			err := e.c.Delete(ctx, svc.DeepCopy(), client.DryRunAll)
			if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "Service 'api' not found") {
				return fmt.Errorf("got %v", err)
			}
			return nil
		})
		before := counterWithLabel("gatehouse_configcheck_phase_outcomes_total", "outcome", "namespace-terminating")
		if err := e.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: doomed}}); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the namespace is gone", func() error {
			err := e.c.Get(ctx, client.ObjectKey{Name: doomed}, &corev1.Namespace{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("namespace %s still there: %v", doomed, err)
		})
		if after := counterWithLabel("gatehouse_configcheck_phase_outcomes_total", "outcome", "namespace-terminating"); after <= before {
			t.Fatalf("no DELETE was admitted for its terminating namespace (%v before, %v after)", before, after)
		}
	})

	t.Run("a config whose tests fail is refused", func(t *testing.T) {
		bad := exampleConfig(t)
		bad.Namespace, bad.Name = e.cfgKey.Namespace, "broken"
		test := bad.Spec.ValidationTests["ok-single-ingress"]
		test.Assertions = append(test.Assertions, gatehousev1alpha1.Assertion{Type: "contains", Pattern: "backend be_nowhere", Description: "a backend that is not there"})
		bad.Spec.ValidationTests["ok-single-ingress"] = test
		err := e.c.Create(ctx, bad)
		denied(t, err, "Validation tests failed: 1/5 tests failed")
		if !strings.Contains(err.Error(), "ok-single-ingress") || !strings.Contains(err.Error(), "a backend that is not there") {
			t.Fatalf("the denial should name the test and the assertion: %v", err)
		}
		bad.Spec.ValidationTests = nil
		bad.Spec.HAProxyConfig.Template = "{{ if }}"
		denied(t, e.c.Create(ctx, bad), "haproxyConfig")
	})

	t.Run("certificates are published to a Secret of their own", func(t *testing.T) {
		e.updateConfig(t, func(cfg *gatehousev1alpha1.HAProxyTemplateConfig) {
			cfg.Spec.SSLCertificates = map[string]gatehousev1alpha1.Template{"default.pem": {Template: "# {{ len .resources.ingresses.List }} ingresses\n"}}
		})
		e.waitFor("the Secret holds the rendered certificate and the status names it", func() error {
			secret := &corev1.Secret{}
			name := types.NamespacedName{Namespace: e.cfgKey.Namespace, Name: configcheck.RenderedSecretName(e.cfgKey.Name)}
			if err := e.c.Get(ctx, name, secret); err != nil {
				return err
			}
			if got := string(secret.Data["default.pem"]); got != "# 1 ingresses\n" {
				return fmt.Errorf("default.pem = %q", got)
			}
			if out := e.config().Status.Output; out == nil || out.SecretName != name.Name {
				return fmt.Errorf("status output %+v", out)
			}
			if _, leaked := e.published()["default.pem"]; leaked {
				return errors.New("the certificate is in the ConfigMap too")
			}
			return nil
		})
	})

	t.Run("a rendering over what a ConfigMap holds is refused with its size, and the last one stays published", func(t *testing.T) {
		before := e.config().Status.Output
		if before == nil {
			t.Fatal("nothing published before the test")
		}
		beforeData := e.published()
		// One line of 1,100,000 bytes per Ingress (there is one): over the
		// API server's 1 MiB for a ConfigMap's values, far under the
		// rendering's own budget, and valid for haproxy -c (an unused file).
		e.updateConfig(t, func(cfg *gatehousev1alpha1.HAProxyTemplateConfig) {
			cfg.Spec.Files = map[string]gatehousev1alpha1.Template{"padding.txt": {Template: `{{ range .resources.ingresses.List }}{{ repeat 1100000 "#" }}{{ end }}` + "\n"}}
		})
		e.waitFor("Published says OutputTooLarge with the sizes", func() error {
			cfg := e.config()
			c := meta.FindStatusCondition(cfg.Status.Conditions, gatehousev1alpha1.ConditionPublished)
			if c == nil || c.ObservedGeneration != cfg.Generation || c.Status != metav1.ConditionFalse || c.Reason != "OutputTooLarge" {
				return fmt.Errorf("Published: %+v", c)
			}
			for _, want := range []string{
				"ConfigMap " + e.cfgKey.Namespace + "/" + configcheck.RenderedConfigMapName(e.cfgKey.Name),
				"file.padding.txt 1100001 bytes",
				"over the 1048576 bytes the API server accepts in one ConfigMap",
				"the last accepted rendering stays published",
			} {
				if !strings.Contains(c.Message, want) {
					t.Fatalf("the message lacks %q: %s", want, c.Message)
				}
			}
			if out := cfg.Status.Output; out == nil || out.Checksum != before.Checksum {
				t.Fatalf("status.output changed to %+v, want the last accepted one %+v", out, before)
			}
			return nil
		})
		if got := e.published(); !reflect.DeepEqual(got, beforeData) {
			t.Fatalf("the ConfigMap was written: %d keys, want the last accepted %d keys", len(got), len(beforeData))
		}
		e.updateConfig(t, func(cfg *gatehousev1alpha1.HAProxyTemplateConfig) { cfg.Spec.Files = nil })
		e.waitFor("a rendering that fits is published again", func() error {
			cfg := e.config()
			c := meta.FindStatusCondition(cfg.Status.Conditions, gatehousev1alpha1.ConditionPublished)
			if c == nil || c.ObservedGeneration != cfg.Generation || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Published: %+v", c)
			}
			return nil
		})
	})

	t.Run("a failure already in the cluster blocks no one else's change", func(t *testing.T) {
		setIngressWebhook := func(on bool) {
			e.updateConfig(t, func(cfg *gatehousev1alpha1.HAProxyTemplateConfig) {
				w := cfg.Spec.WatchedResources["ingresses"]
				w.EnableValidationWebhook = on
				cfg.Spec.WatchedResources["ingresses"] = w
			})
		}
		// An Ingress to a missing Service gets in while the webhook is off.
		setIngressWebhook(false)
		orphan := e.ingress("orphan", "haproxy", "o.example", "nowhere", 80)
		e.waitFor("the broken Ingress is admitted with the webhook off", func() error { return e.c.Create(ctx, orphan.DeepCopy()) })
		setIngressWebhook(true)
		// "a-ghost" renders before "orphan": its failure is its own.
		e.waitFor("the webhook is back and refuses a failure of a change's own", func() error {
			err := e.c.Create(ctx, e.ingress("a-ghost", "haproxy", "g.example", "ghost2", 80), client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), "Service 'ghost2' not found") {
				return fmt.Errorf("got %v", err)
			}
			return nil
		})

		before := counterWithLabel("gatehouse_configcheck_phase_outcomes_total", "outcome", "pre-existing")
		warnings := &ngWarnings{}
		withWarnings := ngClient(t, warnings)
		e.waitFor("an unrelated Ingress is admitted with warnings naming the failure", func() error {
			if err := withWarnings.Create(ctx, e.ingress("unrelated", "haproxy", "u2.example", "api", 80), client.DryRunAll); err != nil {
				return err
			}
			got := strings.Join(warnings.take(), "\n")
			if !strings.Contains(got, "HAProxyTemplateConfig "+e.cfgKey.String()+" fails without this change too") ||
				!strings.Contains(got, "the failure: Service 'nowhere' not found (Ingress "+e.app+"/orphan") {
				return fmt.Errorf("warnings: %q", got)
			}
			return nil
		})
		if after := counterWithLabel("gatehouse_configcheck_phase_outcomes_total", "outcome", "pre-existing"); after <= before {
			t.Fatalf("pre-existing outcomes %v -> %v, want an increase", before, after)
		}
		// Deleting the broken Ingress repairs the rendering: admitted.
		if err := e.c.Delete(ctx, orphan); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("disabling the webhook removes its rules", func(t *testing.T) {
		e.updateConfig(t, func(cfg *gatehousev1alpha1.HAProxyTemplateConfig) {
			w := cfg.Spec.WatchedResources["ingresses"]
			w.EnableValidationWebhook = false
			cfg.Spec.WatchedResources["ingresses"] = w
		})
		e.waitFor("the Ingress webhook leaves the configuration", func() error {
			for _, name := range e.webhookNames() {
				if strings.HasPrefix(name, "ingresses.") {
					return fmt.Errorf("still registered: %s", name)
				}
			}
			return nil
		})
		e.waitFor("an Ingress to a missing Service is admitted", func() error {
			return e.c.Create(ctx, e.ingress("unchecked", "haproxy", "u.example", "missing", 80), client.DryRunAll)
		})
	})

	t.Run("without a config nothing is validated", func(t *testing.T) {
		if err := e.c.Delete(ctx, e.config()); err != nil {
			t.Fatal(err)
		}
		e.waitFor("every configcheck webhook leaves the configuration", func() error {
			if names := e.webhookNames(); len(names) > 0 {
				return fmt.Errorf("still registered: %v", names)
			}
			return nil
		})
		if err := e.c.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.app, Name: "api"}}); err != nil {
			t.Fatal(err)
		}
	})
}

// renderCount is the number of renders observed so far.
func renderCount() uint64 {
	return uint64(seriesSum("gatehouse_configcheck_phase_seconds", map[string]string{"phase": "render"}))
}

// counterWithLabel sums a counter's series carrying one label value.
func counterWithLabel(name, label, value string) float64 {
	return seriesSum(name, map[string]string{label: value})
}

// seriesSum sums, over the series of a family in this process's registry
// (every Gatehouse of a test shares it) that carry all of labels, the
// counters' values or the histograms' sample counts.
func seriesSum(name string, labels map[string]string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			if h := m.GetHistogram(); h != nil {
				sum += float64(h.GetSampleCount())
			} else {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
