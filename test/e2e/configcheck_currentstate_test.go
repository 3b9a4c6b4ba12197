package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// TestConfigcheckConfigIsCheckedOverTheCurrentState is a confined config
// author (edit and config writing in one namespace, through kube-apiserver)
// writing configs whose own rendering fails. Each was admitted as valid
// before: the config webhook compiled the templates and ran the tests, and
// never rendered the cluster's state. Now a config whose rendering of the
// current state fails haproxy -c or calls fail is refused with the reason;
// one that fails only because no watched object exists yet, and whose
// tests show it renders a valid configuration from fixtures, is admitted
// with warnings saying so.
func TestConfigcheckConfigIsCheckedOverTheCurrentState(t *testing.T) {
	e := startConfigcheckAuthz(t)
	ctx := context.Background()
	// A Service in the team's namespace: the state the configs render.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: "api"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if err := e.user.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	author, warnings := e.authorWithWarnings(t)

	t.Run("a template haproxy -c rejects is refused, naming the alert", func(t *testing.T) {
		c := e.config("bad-timeout", nil)
		c.Spec.HAProxyConfig.Template = strings.Replace(authzTemplate, "timeout server 30s", "timeout server abc", 1)
		denied(t, author.Create(ctx, c), "the config's rendering of the cluster's current state fails")
		denied(t, author.Create(ctx, c, client.DryRunAll), "timeout server")
	})

	t.Run("a template that always calls fail is refused with its message", func(t *testing.T) {
		c := e.config("always-fails", nil)
		c.Spec.HAProxyConfig.Template = authzTemplate + `{{ fail "this config never renders" }}` + "\n"
		denied(t, author.Create(ctx, c), "this config never renders")
	})

	t.Run("a template failing only over the cluster's objects is refused", func(t *testing.T) {
		// A caller that cannot be verified has this config admitted
		// (TestConfigcheckUnverifiedConfigIsCheckedWithoutState).
		denied(t, author.Create(ctx, failsOverServices(e)), "the config's rendering of the cluster's current state fails")
	})

	// Needs an Ingress to render: the frontend's default backend is the
	// first Ingress's.
	waiting := func(name string, withProof bool) *gatehousev1alpha1.HAProxyTemplateConfig {
		c := e.config(name, map[string]gatehousev1alpha1.WatchedResource{
			"ingresses": {APIVersion: "networking.k8s.io/v1", Resources: "ingresses", NamespaceSelector: onlyNamespace(e.team)},
		})
		c.Spec.HAProxyConfig.Template = authzTemplate +
			`{{- if not .resources.ingresses.List }}{{ fail "no Ingress yet: the frontend routes to the first one" }}{{ end }}` + "\n"
		if withProof {
			c.Spec.ValidationTests = map[string]gatehousev1alpha1.ValidationTest{
				"renders-with-an-ingress": {
					Fixtures: map[string][]apiextensionsv1.JSON{
						"ingresses": {{Raw: []byte(fmt.Sprintf(`{"metadata":{"name":"web","namespace":%q}}`, e.team))}},
					},
					Assertions: []gatehousev1alpha1.Assertion{{Type: "haproxy_valid"}},
				},
			}
		}
		return c
	}

	t.Run("a config that needs objects, without a test showing it renders with them, is refused", func(t *testing.T) {
		denied(t, author.Create(ctx, waiting("waits-unproven", false)), "watched resource ingresses selects no object yet")
	})

	t.Run("a config that needs objects, with a test rendering them valid, is admitted with warnings", func(t *testing.T) {
		warnings()
		c := waiting("waits", true)
		if err := author.Create(ctx, c); err != nil {
			t.Fatalf("refused: %v", err)
		}
		got := warnings()
		for _, want := range []string{
			fmt.Sprintf("HAProxyTemplateConfig %s/waits does not render the cluster's current state yet", e.team),
			"no Ingress yet: the frontend routes to the first one",
			`watched resource ingresses selects no object yet and test "renders-with-an-ingress"`,
		} {
			if !strings.Contains(got, want) {
				t.Errorf("warnings %q lack %q", got, want)
			}
		}
		// A write that leaves the spec alone (a label, as controllers
		// write) renders nothing and is admitted without warnings.
		c.Labels = map[string]string{"team": "a"}
		if err := author.Update(ctx, c); err != nil {
			t.Fatalf("a label-only update refused: %v", err)
		}
		if got := warnings(); strings.Contains(got, "does not render") {
			t.Errorf("a label-only update was rendered: %q", got)
		}
		// Once an Ingress exists, the same config renders: an update is
		// admitted without the warning.
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: "web"},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "api", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
		if err := e.user.Create(ctx, ing); err != nil {
			t.Fatal(err)
		}
		// (Gatehouse's cache may be a moment behind the create: a
		// warning until then.)
		rev := 1
		eventually(t, "an update once an Ingress exists is admitted without the warning", func() error {
			if err := author.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
				return err
			}
			rev++
			c.Spec.TemplatingSettings.ExtraContext = &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(`{"rev":%d}`, rev))}
			if err := author.Update(ctx, c); err != nil {
				return fmt.Errorf("refused: %w", err)
			}
			if got := warnings(); strings.Contains(got, "does not render") {
				return fmt.Errorf("warned: %q", got)
			}
			return nil
		})
	})

	t.Run("a config rendering the current state is admitted without warnings", func(t *testing.T) {
		warnings()
		if err := author.Create(ctx, e.config("renders", nil)); err != nil {
			t.Fatalf("refused: %v", err)
		}
		if got := warnings(); got != "" {
			t.Errorf("warnings: %q", got)
		}
	})
}

// authorWithWarnings is a client of the env's user, through kube-apiserver,
// and a function returning (and forgetting) the warnings it was sent.
func (e *authzEnv) authorWithWarnings(t *testing.T) (client.Client, func() string) {
	t.Helper()
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: e.name, Groups: []string{"system:authenticated"}}
	cfg.WarningHandler = rec
	author, err := client.New(cfg, client.Options{Scheme: controlPlane.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return author, func() string {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		out := strings.Join(rec.msgs, "\n")
		rec.msgs = nil
		return out
	}
}

// failsOverServices is a config whose template fails once the team's
// namespace holds a Service: its rendering of empty watched resources
// passes, that of the cluster's current state does not.
func failsOverServices(e *authzEnv) *gatehousev1alpha1.HAProxyTemplateConfig {
	c := e.config("fails-over-services", nil)
	c.Spec.HAProxyConfig.Template = authzTemplate + `{{ range .resources.services.List }}{{ fail "a Service exists" }}{{ end }}` + "\n"
	return c
}

// TestConfigcheckUnverifiedConfigIsCheckedWithoutState is a confined config
// author (edit and config writing in one namespace, through kube-apiserver)
// on a Gatehouse that serves webhooks without client certificates, as
// every default install and make run did: it cannot tell the API server's
// reviews from anyone else's, so it never renders the cluster's state for
// them. Before, a config whose rendering fails whatever the cluster holds
// (haproxy -c rejects a directive; the template always calls fail) was
// admitted, and its author learned it from Ready=False. Now it is rendered
// over empty watched resources and its tests' fixtures, and refused naming
// the failure and why it was rendered so; a valid config is admitted, and so
// is one failing only over the cluster's objects (nothing of them is
// rendered for an unverified caller; with a verified one it is refused:
// TestConfigcheckConfigIsCheckedOverTheCurrentState).
func TestConfigcheckUnverifiedConfigIsCheckedWithoutState(t *testing.T) {
	e := newAuthzEnv(t)
	opts := configcheckOptions()
	opts.Server.ClientAuth = testenv.NoClientAuth
	startGatehouse(t, opts)
	e.waitServed(t)
	entriesLinked(t)
	ctx := context.Background()
	if err := e.user.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: "api"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}); err != nil {
		t.Fatal(err)
	}
	author, warnings := e.authorWithWarnings(t)
	const why = "Gatehouse cannot verify that this request came from the API server"

	t.Run("a template haproxy -c rejects is refused, naming the alert", func(t *testing.T) {
		c := e.config("bad-timeout", nil)
		c.Spec.HAProxyConfig.Template = strings.Replace(authzTemplate, "timeout server 30s", "timeout server abc", 1)
		err := author.Create(ctx, c)
		denied(t, err, why)
		denied(t, err, "timeout server")
	})

	t.Run("a template that always calls fail is refused with its message", func(t *testing.T) {
		c := e.config("always-fails", nil)
		c.Spec.HAProxyConfig.Template = authzTemplate + `{{ fail "this config never renders" }}` + "\n"
		denied(t, author.Create(ctx, c), "its rendering of empty watched resources fails: this config never renders")
	})

	t.Run("a test whose fixtures render what haproxy -c rejects is refused, naming the test", func(t *testing.T) {
		c := e.config("bad-fixture", nil)
		c.Spec.HAProxyConfig.Template = authzTemplate + `{{ range .resources.services.List }}  timeout tunnel {{ .metadata.name }}{{ end }}` + "\n"
		c.Spec.ValidationTests = map[string]gatehousev1alpha1.ValidationTest{
			"one-service": {
				Fixtures:   map[string][]apiextensionsv1.JSON{"services": {{Raw: []byte(fmt.Sprintf(`{"metadata":{"name":"web","namespace":%q}}`, e.team))}}},
				Assertions: []gatehousev1alpha1.Assertion{{Type: "contains", Pattern: "timeout tunnel web"}},
			},
		}
		denied(t, author.Create(ctx, c), `the config's rendering of test "one-service"'s fixtures fails`)
	})

	t.Run("a valid config is admitted", func(t *testing.T) {
		warnings()
		if err := author.Create(ctx, e.config("renders", nil)); err != nil {
			t.Fatalf("refused: %v", err)
		}
		if got := warnings(); !strings.Contains(got, "it was rendered over empty watched resources and its tests' fixtures") {
			t.Errorf("warnings %q do not say how it was checked", got)
		}
	})

	t.Run("a config failing only over the cluster's objects is admitted", func(t *testing.T) {
		if err := author.Create(ctx, failsOverServices(e)); err != nil {
			t.Fatalf("refused: %v", err)
		}
	})
}
