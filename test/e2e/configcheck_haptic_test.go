package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// These tests follow haptic's HAProxyTemplateConfig (haproxy-haptic.org)
// in a cluster, as a team switching from haptic's webhook runs it: haptic's
// own CRD (testdata of internal/configcheck, as haptic's chart installs
// it), a config in haptic's dialect (Scriggo, haptic's filters, fail(),
// controller-only fields Gatehouse ignores), written as a haptic user
// writes one, and tenants writing Ingresses through kube-apiserver.

// hapticTemplate renders a backend per Ingress: named by the
// backend-name annotation (else by namespace and name), with the
// timeout-server annotation as its server timeout; "never" stops the
// rendering with fail(), naming the Ingress.
const hapticTemplate = `global
  log stdout format raw local0
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend http
  bind :8080
  default_backend fallback
backend fallback
  http-request return status 404
{% for _, ing := range resources.ingresses.List() %}
{% var ns = ing | dig("metadata", "namespace") | fallback("") | tostring() %}
{% var name = ing | dig("metadata", "name") | fallback("") | tostring() %}
{% var backend = ing | dig("metadata", "annotations", "haproxy.example/backend-name") | fallback("ing_" + ns + "_" + name) | tostring() %}
{% var timeout = ing | dig("metadata", "annotations", "haproxy.example/timeout-server") | fallback("") | tostring() %}
{% if timeout == "never" %}{{ fail("Ingress " + ns + "/" + name + " asks for timeout never: give it a duration, such as 30s") }}{% end %}
backend {{ backend }}
{% if timeout != "" %}
  timeout server {{ timeout }}
{% end %}
  server s1 127.0.0.1:80
{% end %}
`

// hapticConfig is a haptic config named name in namespace, watching the
// Ingresses of the namespaces nsSelector selects (haptic's string form),
// with its validation webhook, and a test that a timeout renders.
func hapticConfig(t *testing.T, namespace, name, nsSelector string) *unstructured.Unstructured {
	t.Helper()
	spec := map[string]any{
		// Controller-only fields: haptic's CRD requires them, Gatehouse
		// reads none of them.
		"credentialsSecretRef": map[string]any{"name": "haproxy-credentials"},
		"podSelector":          map[string]any{"matchLabels": map[string]any{"app": "haproxy"}},
		"watchedResources": map[string]any{"ingresses": map[string]any{
			"apiVersion": "networking.k8s.io/v1", "resources": "ingresses", "indexBy": []any{"metadata.namespace", "metadata.name"},
			"namespaceSelector": nsSelector, "enableValidationWebhook": true,
		}},
		"haproxyConfig": map[string]any{"template": hapticTemplate},
		"validationTests": map[string]any{"timeout": map[string]any{
			"description": "an Ingress with a timeout renders its backend",
			"fixtures": map[string]any{"ingresses": []any{map[string]any{
				"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
				"metadata": map[string]any{"namespace": "shop", "name": "web", "annotations": map[string]any{"haproxy.example/timeout-server": "10s"}},
			}}},
			"assertions": []any{
				map[string]any{"type": "haproxy_valid"},
				map[string]any{"type": "contains", "target": "haproxy.cfg", "pattern": "timeout server 10s"},
			},
		}},
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "haproxy-haptic.org/v1alpha1", "kind": "HAProxyTemplateConfig", "spec": spec}}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// hapticTLSTemplate is hapticTemplate with each Ingress's TLS Secret read
// on demand, as haptic's ssl library reads them: the tls-secret
// annotation names it ("name" in the Ingress's namespace, or
// "namespace/name"), and a Secret the config cannot read stops the
// rendering.
var hapticTLSTemplate = strings.Replace(hapticTemplate, `backend {{ backend }}
`, `{% var tlsRef = ing | dig("metadata", "annotations", "haproxy.example/tls-secret") | fallback("") | tostring() %}
{% if tlsRef != "" %}
{% var tlsNs, tlsName = ns, tlsRef %}
{% var parts = split(tlsRef, "/") %}
{% if len(parts) == 2 %}{% tlsNs, tlsName = parts[0], parts[1] %}{% end %}
{% if resources.secrets.GetSingle(tlsNs, tlsName) == nil %}{{ fail("TLS Secret not found: " + tlsNs + "/" + tlsName) }}{% end %}
{% end %}
backend {{ backend }}
`, 1)

// hapticTLSConfig is hapticConfig reading TLS Secrets on demand.
func hapticTLSConfig(t *testing.T, namespace, name, nsSelector string) *unstructured.Unstructured {
	t.Helper()
	cfg := hapticConfig(t, namespace, name, nsSelector)
	spec := cfg.Object["spec"].(map[string]any)
	spec["haproxyConfig"] = map[string]any{"template": hapticTLSTemplate}
	spec["watchedResources"].(map[string]any)["secrets"] = map[string]any{
		"apiVersion": "v1", "resources": "secrets", "indexBy": []any{"metadata.namespace", "metadata.name"}, "store": "on-demand",
	}
	return cfg
}

// tlsIngress is an Ingress naming its TLS Secret in the tls-secret
// annotation.
func tlsIngress(namespace, name, secret string) client.Object {
	ing := tenantIngress(namespace, name, name+".example", "")
	ing.Annotations = map[string]string{"haproxy.example/tls-secret": secret}
	return ing
}

// tlsSecret is a Secret holding value.
func tlsSecret(namespace, name, value string) client.Object {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, StringData: map[string]string{"tls.key": value}}
}

// installHapticCRD installs haptic's CRD, as haptic's chart does, and
// removes it when the test ends (with every haptic config).
func installHapticCRD(t *testing.T) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "internal/configcheck/testdata/haptic/haproxy-haptic.org_haproxytemplateconfigs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := controlPlane.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = controlPlane.Client.Delete(ctx, crd)
		eventually(t, "haptic's CRD is gone", func() error {
			err := controlPlane.Client.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
	})
	eventually(t, "haptic's kind is served", func() error {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("haproxy-haptic.org/v1alpha1")
		list.SetKind("HAProxyTemplateConfigList")
		return controlPlane.Client.List(ctx, list, client.Limit(1))
	})
}

// hapticAuthor is a user who may write haptic configs in namespace, and
// edit it (ClusterRole edit does not cover a CRD's kind unless it is
// aggregated; haptic's chart aggregates none).
func hapticAuthor(t *testing.T, namespace string) (client.Client, string) {
	t.Helper()
	c, user := tenantClient(t, namespace)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user + "-haptic"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"haproxy-haptic.org"}, Resources: []string{"haproxytemplateconfigs"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user + "-haptic"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := controlPlane.Client.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	return c, user
}

// hapticTenant is a namespace in scope with a user who may edit it, and
// that user's client, recording the warnings the API server relays.
func hapticTenant(t *testing.T, base, scope string) (string, client.Client, *warningRecorder) {
	t.Helper()
	ns := namespace(t, base)
	labelNamespace(t, ns, scope)
	_, user := tenantClient(t, ns)
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cfg.WarningHandler = rec
	c, err := client.New(cfg, client.Options{Scheme: controlPlane.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return ns, c, rec
}

// labelNamespace puts namespace in scope.
func labelNamespace(t *testing.T, namespace, scope string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, scopeLabel, scope))
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(namespace)
	if err := controlPlane.Client.Patch(context.Background(), ns, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

// timedIngress is tenantIngress with the timeout-server annotation (and
// the backend-name one when backend is set).
func timedIngress(namespace, name, timeout, backend string) client.Object {
	ing := tenantIngress(namespace, name, name+".example", "")
	ing.Annotations = map[string]string{"haproxy.example/timeout-server": timeout}
	if backend != "" {
		ing.Annotations["haproxy.example/backend-name"] = backend
	}
	return ing
}

// waitHapticWebhook waits until the haptic config's Ingress webhook judges
// namespace's Ingresses: a dry run with an unparsable timeout is refused.
func waitHapticWebhook(t *testing.T, c client.Client, namespace string) {
	t.Helper()
	eventually(t, "the haptic config's Ingress webhook is served", func() error {
		err := c.Create(context.Background(), timedIngress(namespace, "probe", "soon", ""), client.DryRunAll)
		if err == nil {
			return errors.New("an Ingress with timeout server soon was admitted")
		}
		if !strings.Contains(err.Error(), "haproxy") {
			return err
		}
		return nil
	})
}

// TestConfigcheckFollowsHapticsKind: Gatehouse runs before haptic's CRD is
// installed, as when a team adds Gatehouse first; once the CRD is served,
// haptic's configs are judged as Gatehouse's own. A config is written as
// haptic's users write it (its author record signed for haptic's kind),
// and an Ingress that breaks its rendering is refused through
// kube-apiserver with haproxy's words, or with the template's fail() text,
// while a valid one is admitted. Gatehouse writes nothing of haptic's
// (status, renderings): haptic's controller owns them. A namespaced
// author cannot make it watch namespaces they may not read, and its
// on-demand Secrets are those they may read.
func TestConfigcheckFollowsHapticsKind(t *testing.T) {
	startConfigcheckGatehouse(t)
	installHapticCRD(t)
	ctx := context.Background()
	scope := "cc-" + randSuffix()
	lb := namespace(t, "haptic-lb")
	nsA, tenantA, _ := hapticTenant(t, "tenant-a", scope)

	cfg := hapticConfig(t, lb, "edge", scopeLabel+"="+scope)
	eventually(t, "the haptic config is admitted", func() error { return controlPlane.Client.Create(ctx, cfg.DeepCopy()) })
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(cfg.GroupVersionKind())
	if err := controlPlane.Client.Get(ctx, client.ObjectKeyFromObject(cfg), stored); err != nil {
		t.Fatal(err)
	}
	if stored.GetAnnotations()[configcheck.AuthorAnnotation] == "" {
		t.Fatalf("the haptic config carries no author record: %v", stored.GetAnnotations())
	}
	waitHapticWebhook(t, tenantA, nsA)

	t.Run("an Ingress breaking the rendering is refused, a valid one admitted", func(t *testing.T) {
		denied(t, tenantA.Create(ctx, timedIngress(nsA, "slow", "soon", "")), "haproxy")
		denied(t, tenantA.Create(ctx, timedIngress(nsA, "forever", "never", "")),
			fmt.Sprintf("Ingress %s/forever asks for timeout never: give it a duration, such as 30s", nsA))
		if err := tenantA.Create(ctx, timedIngress(nsA, "web", "10s", "")); err != nil {
			t.Fatalf("a valid Ingress: %v", err)
		}
		// The stored Ingress is in the config's state: another Ingress
		// claiming its backend's name breaks the rendering.
		eventually(t, "the stored Ingress is judged with", func() error {
			err := tenantA.Create(ctx, timedIngress(nsA, "web-copy", "10s", "ing_"+nsA+"_web"), client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), "has the same name as backend") {
				return fmt.Errorf("a second backend ing_%s_web: %v", nsA, err)
			}
			return nil
		})
	})

	t.Run("a tenant's lines meet the check policy", func(t *testing.T) {
		// haptic's templates print annotations as they are (Scriggo shows
		// are not escaped: haptic's snippet annotations need it), so a
		// tenant's line breaks become directives. Reading a file outside
		// the check's directory is refused by the policy before haproxy
		// runs, and nothing of the file is quoted.
		err := tenantA.Create(ctx, timedIngress(nsA, "snippet", "10s\n  errorfile 503 /etc/shadow", ""))
		denied(t, err, "check policy")
		if !strings.Contains(err.Error(), "errorfile") || strings.Contains(err.Error(), "root:") {
			t.Fatalf("denial %v: want the policy naming errorfile, and nothing read", err)
		}
	})

	t.Run("nothing of haptic's is written", func(t *testing.T) {
		if err := controlPlane.Client.Get(ctx, client.ObjectKeyFromObject(cfg), stored); err != nil {
			t.Fatal(err)
		}
		if status, found := stored.Object["status"]; found {
			t.Errorf("Gatehouse wrote the haptic config's status: %v", status)
		}
		cm := &unstructured.Unstructured{}
		cm.SetAPIVersion("v1")
		cm.SetKind("ConfigMap")
		err := controlPlane.Client.Get(ctx, client.ObjectKey{Namespace: lb, Name: configcheck.RenderedConfigMapName("edge")}, cm)
		if !apierrors.IsNotFound(err) {
			t.Errorf("a rendering of the haptic config was published: %v", err)
		}
	})

	t.Run("a namespaced author reads no namespace they may not", func(t *testing.T) {
		teamNS := namespace(t, "haptic-team")
		author, _ := hapticAuthor(t, teamNS)
		// Every namespace of the scope: tenant A's among them.
		err := author.Create(ctx, hapticConfig(t, teamNS, "mine", scopeLabel+"="+scope))
		denied(t, err, "spec.watchedResources[ingresses]")
		// Their own namespace: admitted, and its record names them.
		own := hapticConfig(t, teamNS, "own", "kubernetes.io/metadata.name="+teamNS)
		eventually(t, "the author's config of their own namespace is admitted", func() error { return author.Create(ctx, own) })
	})

	t.Run("on-demand Secrets are fetched with the author's rights", func(t *testing.T) {
		// A namespaced author's config reads TLS Secrets on demand, as
		// haptic's ssl library does: "name" in the Ingress's namespace, or
		// "namespace/name".
		teamNS := namespace(t, "haptic-tls")
		author, _ := hapticAuthor(t, teamNS)
		cfg := hapticTLSConfig(t, teamNS, "tls", "kubernetes.io/metadata.name="+teamNS)
		eventually(t, "the author's TLS config is admitted", func() error { return author.Create(ctx, cfg.DeepCopy()) })
		waitHapticWebhook(t, author, teamNS)

		denied(t, author.Create(ctx, tlsIngress(teamNS, "site", "site-tls")), fmt.Sprintf("TLS Secret not found: %s/site-tls", teamNS))
		// Created a moment later: found at once (the absence remembered
		// from the refusal above never stands behind a denial: a denial
		// is confirmed over objects fetched anew).
		if err := author.Create(ctx, tlsSecret(teamNS, "site-tls", "site certificate")); err != nil {
			t.Fatal(err)
		}
		if err := author.Create(ctx, tlsIngress(teamNS, "site", "site-tls")); err != nil {
			t.Fatalf("an Ingress naming an existing Secret its author may read: %v", err)
		}
		// Another namespace's Secret, which the config's author may not
		// read, is absent to the config, whoever asks: nothing of it is
		// fetched or shown.
		if err := controlPlane.Client.Create(ctx, tlsSecret(nsA, "a-tls", "tenant-a-private-key")); err != nil {
			t.Fatal(err)
		}
		err := author.Create(ctx, tlsIngress(teamNS, "borrowed", nsA+"/a-tls"))
		denied(t, err, fmt.Sprintf("TLS Secret not found: %s/a-tls", nsA))
		if strings.Contains(err.Error(), "tenant-a-private-key") || strings.Contains(err.Error(), "dGVuYW50") {
			t.Fatalf("the denial shows the other namespace's Secret: %v", err)
		}
	})

	t.Run("an on-demand store has no webhook", func(t *testing.T) {
		cfg := hapticTLSConfig(t, lb, "tls-hook", scopeLabel+"="+scope)
		watched := cfg.Object["spec"].(map[string]any)["watchedResources"].(map[string]any)
		watched["secrets"].(map[string]any)["enableValidationWebhook"] = true
		denied(t, controlPlane.Client.Create(ctx, cfg), "spec.watchedResources[secrets].enableValidationWebhook")
	})

	t.Run("the kind's webhooks go with its CRD", func(t *testing.T) {
		registered := func() bool {
			vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: webhookconfig.ValidatingName}, vwc); err != nil {
				t.Fatal(err)
			}
			for _, w := range vwc.Webhooks {
				if w.Name == "ingresses.edge."+lb+".haptic.configcheck.gatehouse.dev" {
					return true
				}
			}
			return false
		}
		if !registered() {
			t.Fatal("the haptic config's Ingress webhook is not registered under its name")
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		crd.Name = "haproxytemplateconfigs.haproxy-haptic.org"
		if err := controlPlane.Client.Delete(ctx, crd); err != nil {
			t.Fatal(err)
		}
		eventually(t, "no webhook of a haptic config is registered", func() error {
			if registered() {
				return errors.New("the haptic config's Ingress webhook is still registered")
			}
			return nil
		})
		// Tenant A's Ingresses are judged by nothing of the config any more.
		if err := tenantA.Create(ctx, timedIngress(nsA, "after", "soon", ""), client.DryRunAll); err != nil {
			t.Fatalf("an Ingress after the config's kind went: %v", err)
		}
	})
}

// TestConfigcheckHapticTenantsAreIsolated runs the tenant-isolation cases
// of Gatehouse's own kind (configcheck_tenants_test.go) for haptic's: two
// tenants of one shared haptic config, each editing their own namespace.
// Concurrent Ingresses are judged as if they met (three claiming one
// backend name at once: exactly one admitted); a failing state another
// tenant's Ingresses brought in blocks nobody (tenant B admitted and
// told, a change adding a failure still refused, deletes that remove
// the failure admitted); and a state another tenant's Ingress breaks is
// named to tenant B without that tenant's names.
func TestConfigcheckHapticTenantsAreIsolated(t *testing.T) {
	installHapticCRD(t)
	startConfigcheckGatehouse(t)
	ctx := context.Background()
	scope := "cc-" + randSuffix()
	lb := namespace(t, "haptic-lb")
	nsA, tenantA, _ := hapticTenant(t, "tenant-a", scope)
	nsB, tenantB, warningsB := hapticTenant(t, "tenant-b", scope)
	eventually(t, "the haptic config is admitted", func() error {
		return controlPlane.Client.Create(ctx, hapticConfig(t, lb, "shared", scopeLabel+"="+scope))
	})
	waitHapticWebhook(t, tenantA, nsA)

	t.Run("concurrent Ingresses are judged together", func(t *testing.T) {
		exactlyOneAdmitted(t, atOnce(3, func(i int) error {
			return tenantA.Create(ctx, timedIngress(nsA, fmt.Sprintf("a%d", i), "10s", "shared_name"))
		}))
	})

	t.Run("a failing state blocks nobody", func(t *testing.T) {
		// Tenant C's three Ingresses claim one backend name, stored
		// before their namespace was selected; once it is, the rendering
		// fails for everyone.
		nsC := namespace(t, "tenant-c")
		tenantC, _ := tenantClient(t, nsC)
		for i := range 3 {
			if err := tenantC.Create(ctx, timedIngress(nsC, fmt.Sprintf("c%d", i), "10s", "claimed")); err != nil {
				t.Fatal(err)
			}
		}
		labelNamespace(t, nsC, scope)
		eventually(t, "tenant B is admitted over the failing state, and told", func() error {
			warnings, err := warningsB.during(func() error { return tenantB.Create(ctx, timedIngress(nsB, "b-"+randSuffix(), "10s", "")) })
			if err != nil {
				return err
			}
			if !strings.Contains(strings.Join(warnings, "\n"), "fails without this change too") {
				return fmt.Errorf("warnings %q: the failing state is not loaded yet", warnings)
			}
			return nil
		})
		// A change adding a failure of its own is still refused.
		denied(t, tenantB.Create(ctx, timedIngress(nsB, "b-slow", "soon", "")), "haproxy")
		// Deletes that remove the problem are admitted: tenant C's own,
		// and the administrator's.
		if err := tenantC.Delete(ctx, timedIngress(nsC, "c0", "", "")); err != nil {
			t.Fatalf("tenant C deletes its own Ingress: %v", err)
		}
		if err := controlPlane.Client.Delete(ctx, timedIngress(nsC, "c1", "", "")); err != nil {
			t.Fatalf("the administrator deletes the offending Ingress: %v", err)
		}
		// One Ingress of the name is left: the state passes again.
		eventually(t, "tenant B is admitted without warnings once the state passes", func() error {
			warnings, err := warningsB.during(func() error { return tenantB.Create(ctx, timedIngress(nsB, "b-"+randSuffix(), "10s", "")) })
			if err != nil {
				return err
			}
			if len(warnings) > 0 {
				return fmt.Errorf("warnings %q", warnings)
			}
			return nil
		})
	})

	t.Run("another tenant's failure is not shown", func(t *testing.T) {
		// B's own failure is B's to read, whole.
		denied(t, tenantB.Create(ctx, timedIngress(nsB, "forever", "never", "")),
			fmt.Sprintf("Ingress %s/forever asks for timeout never", nsB))
		// Another tenant's Ingress, stored while its namespace was not
		// selected, then selected: the rendering fails at its fail()
		// text, which names it.
		hidden := namespace(t, "ledger-team")
		if err := controlPlane.Client.Create(ctx, timedIngress(hidden, "vault-7", "never", "")); err != nil {
			t.Fatal(err)
		}
		labelNamespace(t, hidden, scope)
		var warnings string
		eventually(t, "tenant B's Ingress is admitted over the failing state, which it is told of", func() error {
			got, err := warningsB.during(func() error { return tenantB.Create(ctx, timedIngress(nsB, "web-"+randSuffix(), "10s", "")) })
			if err != nil {
				return err
			}
			warnings = strings.Join(got, "\n")
			if !strings.Contains(warnings, "fails without this change too") {
				return fmt.Errorf("warnings %q do not name the failing state", warnings)
			}
			return nil
		})
		if !strings.Contains(warnings, "asks for timeout never") {
			t.Errorf("warnings %q: want the failure, in the config's own words", warnings)
		}
		for _, secret := range []string{hidden, "vault-7", "ledger"} {
			if strings.Contains(warnings, secret) {
				t.Fatalf("tenant B's warnings quote %q of another tenant's Ingress: %q", secret, warnings)
			}
		}
	})
}

// during runs create and returns the warnings the API server relayed for
// it alone.
func (w *warningRecorder) during(create func() error) ([]string, error) {
	w.mu.Lock()
	w.msgs = nil
	w.mu.Unlock()
	err := create()
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs), err
}
