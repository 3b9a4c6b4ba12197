package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/server"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/uninstall"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// chartIdentity installs the RBAC objects the chart renders (ServiceAccount,
// roles, bindings; nothing else) for release in namespace ns with set, and
// returns a rest config acting as that ServiceAccount (impersonated, with
// the groups the API server gives a ServiceAccount token) and its name, the
// chart's fullname. The uninstall hook's identity is left out.
func chartIdentity(t *testing.T, release, ns string, set ...string) (*rest.Config, string) {
	t.Helper()
	ctx := context.Background()
	args := []string{"template", release, "charts/gatehouse", "--namespace", ns}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := testenv.YAMLDocuments([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	sa := ""
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatal(err)
		}
		if obj.GetKind() != "ServiceAccount" && obj.GroupVersionKind().Group != "rbac.authorization.k8s.io" {
			continue
		}
		if obj.GetLabels()["gatehouse.dev/granted-to"] == "users" {
			continue // a role for people (pvsafe's bypass), not Gatehouse's
		}
		if obj.GetAnnotations()["helm.sh/hook"] != "" {
			continue // the uninstall hook's identity, not the server's
		}
		if obj.GetKind() == "ServiceAccount" {
			sa = obj.GetName()
		}
		if err := controlPlane.Client.Create(ctx, obj); err != nil {
			t.Fatalf("%s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		t.Cleanup(func() { _ = controlPlane.Client.Delete(context.Background(), obj) })
	}
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return cfg, sa
}

// TestGatehouseRunsOnTheChartsRBAC runs Gatehouse as the chart's
// ServiceAccount, bound to exactly the rules the chart renders for a module
// combination (self-managed certificates, managed webhooks, leader
// election, as the chart's defaults): a missing verb leaves an informer
// unable to list, a certificate or webhook configuration unwritten, and
// /readyz never passes. Then, as an attacker holding its token would, it
// tries what the RBAC of before allowed: reading and writing any Secret,
// writing ConfigMaps anywhere, and creating a webhook configuration.
func TestGatehouseRunsOnTheChartsRBAC(t *testing.T) {
	ctx := context.Background()
	admin := controlPlane.Client
	if err := gatehousev1alpha1.AddToScheme(admin.Scheme()); err != nil {
		t.Fatal(err)
	}
	// A Secret of a tenant, which Gatehouse's token must not read.
	victim := namespace(t, "rbac-victim")
	loot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "db-password"}, StringData: map[string]string{"password": "hunter2"}}
	if err := admin.Create(ctx, loot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, obj := range []client.Object{
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookconfig.ValidatingName}},
			&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookconfig.MutatingName}},
		} {
			_ = admin.Delete(ctx, obj)
		}
	})

	for _, on := range [][]string{{"pvsafe"}, {"nodegroup"}, {"placement"}, {"configcheck"}, chartModules} {
		t.Run(strings.Join(on, ","), func(t *testing.T) {
			ns := namespace(t, "rbac")
			publish := namespace(t, "rbac-lb")
			release := "rbac-" + randSuffix()
			set := append(moduleValues(on), "modules.configcheck.publishNamespaces={"+publish+"}")
			cfg, sa := chartIdentity(t, release, ns, set...)

			modules := map[string]app.ModuleConfig{}
			for _, m := range on {
				modules[m] = app.ModuleConfig{Enabled: true}
			}
			cp := *controlPlane
			cp.Config = cfg
			port := freePort(t)
			g, err := testenv.StartGatehouse(ctx, &cp, t.TempDir(), app.Options{
				// The chart's ServiceAccount is named as the install (its
				// fullname), which names its configurations and lease.
				Log: testr.New(t), Namespace: ns, Catalogue: catalogue.All(), Modules: modules, Instance: sa,
				CertSecret:       ns + "/" + sa + "-serving-cert",
				SelfManagedCerts: &certs.SelfManagedOptions{DNSNames: []string{"localhost"}},
				LeaderElection:   true,
				Server:           server.Options{Addr: "127.0.0.1:" + port},
				// The CA is the one of the Secret Gatehouse creates.
				ManageWebhooks: &webhookconfig.Target{URL: "https://localhost:" + port},
			})
			if err != nil {
				t.Fatalf("Gatehouse with only the chart's RBAC for %v: %v", on, err)
			}
			t.Cleanup(func() {
				if err := g.Stop(); err != nil {
					t.Error(err)
				}
				// Each install writes its own configurations and owns the
				// conversions it took: a stopped one's would keep pointing
				// at its closed port, and no later install takes them over.
				if err := uninstall.Run(ctx, uninstall.Options{Client: controlPlane.Client, Instance: sa}); err != nil {
					t.Errorf("remove install %s: %v", sa, err)
				}
			})

			token, err := client.New(cfg, client.Options{Scheme: admin.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			forbidden := func(what string, err error) {
				t.Helper()
				if !apierrors.IsForbidden(err) {
					t.Errorf("%s with Gatehouse's token: %v, want Forbidden", what, err)
				}
			}
			forbidden("reading another namespace's Secret", token.Get(ctx, client.ObjectKeyFromObject(loot), &corev1.Secret{}))
			overwrite := loot.DeepCopy()
			overwrite.StringData = map[string]string{"password": "pwned"}
			forbidden("overwriting another namespace's Secret", token.Update(ctx, overwrite, client.DryRunAll))
			forbidden("listing Secrets", token.List(ctx, &corev1.SecretList{}, client.InNamespace(victim)))
			forbidden("creating a Secret in another namespace",
				token.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "planted"}}, client.DryRunAll))
			forbidden("creating a ConfigMap in another namespace",
				token.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "planted"}}, client.DryRunAll))
			// In its own namespace, only its own certificate Secret.
			forbidden("creating another Secret in Gatehouse's namespace",
				token.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted"}}, client.DryRunAll))
			planted := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"namespace": ns, "name": "planted"}}}
			forbidden("applying another Secret in Gatehouse's namespace",
				token.Apply(ctx, client.ApplyConfigurationFromUnstructured(planted), client.FieldOwner("attacker"), client.DryRunAll))
			// No webhook configuration but its own two.
			evil := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "evil-" + randSuffix()}}
			forbidden("creating a MutatingWebhookConfiguration", token.Create(ctx, evil, client.DryRunAll))
			forbidden("creating a ValidatingWebhookConfiguration",
				token.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: evil.Name}}, client.DryRunAll))
			evilApply := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
				"metadata": map[string]any{"name": evil.Name}}}
			forbidden("applying a MutatingWebhookConfiguration", token.Apply(ctx, client.ApplyConfigurationFromUnstructured(evilApply), client.FieldOwner("attacker"), client.DryRunAll))

			if slices.Contains(on, "configcheck") {
				configcheckPublishesOnlyWhereGranted(t, publish)
			}
		})
	}
}

// configcheckPublishesOnlyWhereGranted: a config in a namespace of
// modules.configcheck.publishNamespaces is published; one elsewhere is
// checked, and its Published condition says OutputForbidden (no crash, no
// hot retry: nothing is written).
func configcheckPublishesOnlyWhereGranted(t *testing.T, granted string) {
	t.Helper()
	ctx := context.Background()
	admin := controlPlane.Client
	elsewhere := namespace(t, "rbac-lb-ungranted")
	scope := "cc-" + randSuffix()
	for _, ns := range []string{granted, elsewhere} {
		cfg := exampleConfig(t)
		cfg.Namespace = ns
		scopeTo(cfg, scope)
		eventually(t, "config "+ns+"/"+cfg.Name+" is admitted", func() error { return admin.Create(ctx, cfg) })
		// Deleted while this Gatehouse still runs: a namespace deletion
		// can take minutes once its webhooks point at nothing, and a
		// config left behind is followed by every later test's Gatehouse.
		t.Cleanup(func() { _ = admin.Delete(context.Background(), cfg) })
	}
	cfg := exampleConfig(t)
	published := func(ns string) *metav1.Condition {
		got := &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: cfg.Name}, got); err != nil {
			return nil
		}
		return meta.FindStatusCondition(got.Status.Conditions, gatehousev1alpha1.ConditionPublished)
	}
	eventually(t, "the config in the granted namespace is published", func() error {
		if c := published(granted); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Published %+v", c)
		}
		return admin.Get(ctx, types.NamespacedName{Namespace: granted, Name: configcheck.RenderedConfigMapName(cfg.Name)}, &corev1.ConfigMap{})
	})
	eventually(t, "the config elsewhere says OutputForbidden", func() error {
		c := published(elsewhere)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "OutputForbidden" ||
			!strings.Contains(c.Message, "Gatehouse may not write the rendering into namespace "+elsewhere+", so nothing is published") ||
			!strings.Contains(c.Message, "modules.configcheck.publishNamespaces") {
			return fmt.Errorf("Published %+v", c)
		}
		return nil
	})
	err := admin.Get(ctx, types.NamespacedName{Namespace: elsewhere, Name: configcheck.RenderedConfigMapName(cfg.Name)}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a rendering in the namespace not granted: %v", err)
	}
}
