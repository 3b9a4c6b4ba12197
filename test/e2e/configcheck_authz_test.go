package e2e

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
)

// authzTemplate is a haproxy.cfg that passes haproxy -c whatever the
// stores hold, so that the publisher reaches the write.
const authzTemplate = `global
  default-path config
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend fe_http
  bind :8080
  default_backend be_default
backend be_default
  http-request return status 404
# {{ len .resources.services.List }} services
`

// authzEnv is a namespaced user, as a team gets one: edit on its namespace
// team (through the built-in aggregated ClusterRole), a Role to write
// HAProxyTemplateConfigs there, view on another team's namespace victim,
// and nothing else. user is a client impersonating them, through
// kube-apiserver: the API server authenticates, authorizes and sends their
// identity to Gatehouse's webhook, as for a real user.
type authzEnv struct {
	t            *testing.T
	admin, user  client.Client
	name         string
	team, victim string
}

func startConfigcheckAuthz(t *testing.T) *authzEnv {
	t.Helper()
	e := newAuthzEnv(t)
	startConfigcheckGatehouse(t)
	e.waitServed(t)
	return e
}

// newAuthzEnv creates the namespaces, the user and its rights, without a
// Gatehouse.
func newAuthzEnv(t *testing.T) *authzEnv {
	t.Helper()
	ctx := context.Background()
	admin := controlPlane.Client
	if err := gatehousev1alpha1.AddToScheme(admin.Scheme()); err != nil {
		t.Fatal(err)
	}
	e := &authzEnv{t: t, admin: admin, name: "alice-" + randSuffix(), team: namespace(t, "team"), victim: namespace(t, "victim")}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: e.name}}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: "haproxytemplateconfig-author"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{gatehousev1alpha1.GroupVersion.Group}, Resources: []string{"haproxytemplateconfigs"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
	for _, obj := range []client.Object{
		role,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: "config-author"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: "edit"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.victim, Name: "view"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// edit and view are aggregated by kube-controller-manager: wait until
	// they carry what the test relies on.
	for _, q := range []authorizationv1.ResourceAttributes{
		{Verb: "update", Resource: "configmaps", Namespace: e.team},
		{Verb: "list", Resource: "secrets", Namespace: e.team},
		{Verb: "list", Resource: "configmaps", Namespace: e.victim},
		{Verb: "create", Group: gatehousev1alpha1.GroupVersion.Group, Resource: "haproxytemplateconfigs", Namespace: e.team},
	} {
		eventually(t, fmt.Sprintf("%s may %s %s in %s", e.name, q.Verb, q.Resource, q.Namespace), func() error {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: e.name, Groups: []string{"system:authenticated"}, ResourceAttributes: &q}}
			if err := admin.Create(ctx, sar); err != nil {
				return err
			}
			if !sar.Status.Allowed {
				return errors.New("not yet")
			}
			return nil
		})
	}
	e.user = impersonated(t, e.name)
	return e
}

// waitServed waits until the config webhook is served: a config that
// fails to compile is refused by Gatehouse rather than by the API
// server's wait.
func (e *authzEnv) waitServed(t *testing.T) {
	t.Helper()
	eventually(t, "the config webhook is served", func() error {
		bad := e.config("probe", nil)
		bad.Spec.HAProxyConfig.Template = "{{ if }}"
		err := e.admin.Create(context.Background(), bad, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "haproxyConfig") {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
}

// config is an HAProxyTemplateConfig in the team's namespace; with no
// watched resources given, the team's Services through a namespaceSelector
// naming the namespace (a label the API server sets and keeps).
func (e *authzEnv) config(name string, watched map[string]gatehousev1alpha1.WatchedResource) *gatehousev1alpha1.HAProxyTemplateConfig {
	if watched == nil {
		watched = map[string]gatehousev1alpha1.WatchedResource{
			"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: onlyNamespace(e.team)},
		}
	}
	if _, ok := watched["services"]; !ok {
		watched["services"] = gatehousev1alpha1.WatchedResource{APIVersion: "v1", Resources: "services", NamespaceSelector: onlyNamespace(e.team)}
	}
	return &gatehousev1alpha1.HAProxyTemplateConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: name},
		Spec: gatehousev1alpha1.HAProxyTemplateConfigSpec{
			WatchedResources: watched,
			HAProxyConfig:    gatehousev1alpha1.Template{Template: authzTemplate},
		},
	}
}

func onlyNamespace(name string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": name}}
}

func TestConfigcheckAuthz(t *testing.T) {
	e := startConfigcheckAuthz(t)
	ctx := context.Background()
	certSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"haproxy.gatehouse.dev/cert": "true"}}

	t.Run("every Secret of the cluster is refused, naming the permission", func(t *testing.T) {
		cfg := e.config("secrets-everywhere", map[string]gatehousev1alpha1.WatchedResource{
			"secrets": {APIVersion: "v1", Resources: "secrets", LabelSelector: certSelector},
		})
		denied(t, e.user.Create(ctx, cfg), fmt.Sprintf(`user %q may not list secrets cluster-wide (spec.watchedResources[secrets]: it has no namespaceSelector): a config reaches only what its author may read`, e.name))
	})

	t.Run("every Pod of the cluster is refused", func(t *testing.T) {
		cfg := e.config("pods-everywhere", map[string]gatehousev1alpha1.WatchedResource{
			"pods": {APIVersion: "v1", Resources: "pods"},
		})
		denied(t, e.user.Create(ctx, cfg), fmt.Sprintf(`user %q may not list pods cluster-wide`, e.name))
	})

	t.Run("Secrets selected by DoesNotExist alone are refused", func(t *testing.T) {
		// In the team's own namespace, whose Secrets the user may read:
		// only the selector is wrong.
		cfg := e.config("secrets-unlabelled", map[string]gatehousev1alpha1.WatchedResource{
			"secrets": {APIVersion: "v1", Resources: "secrets", NamespaceSelector: onlyNamespace(e.team),
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpDoesNotExist}}}},
		})
		denied(t, e.user.Create(ctx, cfg), "spec.watchedResources[secrets].labelSelector: Required value: watching Secrets needs a labelSelector with a positive requirement")
	})

	t.Run("a fail-closed webhook over a namespace the user may read but not change is refused", func(t *testing.T) {
		cfg := e.config("freeze-victim", map[string]gatehousev1alpha1.WatchedResource{
			"cms": {APIVersion: "v1", Resources: "configmaps", NamespaceSelector: onlyNamespace(e.victim), EnableValidationWebhook: true},
		})
		cfg.Spec.ValidationWebhook.FailurePolicy = "Fail"
		denied(t, e.user.Create(ctx, cfg), fmt.Sprintf(`user %q may not create configmaps in namespace %q (spec.watchedResources[cms].enableValidationWebhook): a config's webhook may refuse only the changes its author may make`, e.name, e.victim))
		// Reading them is allowed: the same config without the webhook.
		cms := cfg.Spec.WatchedResources["cms"]
		cms.EnableValidationWebhook = false
		cfg.Spec.WatchedResources["cms"] = cms
		if err := e.user.Create(ctx, cfg, client.DryRunAll); err != nil {
			t.Fatalf("a config reading what its author may read: %v", err)
		}
	})

	t.Run("a config over the user's own namespace is admitted; widening it is refused", func(t *testing.T) {
		own := func() map[string]gatehousev1alpha1.WatchedResource {
			return map[string]gatehousev1alpha1.WatchedResource{
				"ingresses": {APIVersion: "networking.k8s.io/v1", Resources: "ingresses", NamespaceSelector: onlyNamespace(e.team), EnableValidationWebhook: true},
				"services":  {APIVersion: "v1", Resources: "services", NamespaceSelector: onlyNamespace(e.team), EnableValidationWebhook: true},
			}
		}
		cfg := e.config("own", own())
		if err := e.user.Create(ctx, cfg); err != nil {
			t.Fatalf("refused a config over the user's own namespace: %v", err)
		}
		// The same resources in every namespace.
		wide := e.config("own-wide", own())
		for name, w := range wide.Spec.WatchedResources {
			w.NamespaceSelector = nil
			wide.Spec.WatchedResources[name] = w
		}
		denied(t, e.user.Create(ctx, wide), fmt.Sprintf(`user %q may not list ingresses.networking.k8s.io cluster-wide`, e.name))
		// ... which the cluster's admin may create.
		if err := e.admin.Create(ctx, wide, client.DryRunAll); err != nil {
			t.Fatalf("the cluster admin's cluster-wide config: %v", err)
		}
		// An UPDATE is asked about as a CREATE: the user may not widen
		// their config either.
		stored := &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := e.user.Get(ctx, client.ObjectKeyFromObject(cfg), stored); err != nil {
			t.Fatal(err)
		}
		stored.Spec = wide.Spec
		denied(t, e.user.Update(ctx, stored), fmt.Sprintf(`user %q may not list ingresses.networking.k8s.io cluster-wide`, e.name))
	})

	t.Run("objects of the outputs' names that are not the config's are left alone", func(t *testing.T) {
		// The admin's ConfigMap and Secret under config taken's output
		// names, and a Secret under config half's Secret name only.
		taken, half, sentinel := "taken-"+randSuffix(), "half-"+randSuffix(), "sentinel-"+randSuffix()
		adminLabels := map[string]string{"owner": "platform"}
		adminCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: configcheck.RenderedConfigMapName(taken), Labels: adminLabels},
			Data: map[string]string{"haproxy.cfg": "# the platform team's\n"}}
		adminSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: configcheck.RenderedSecretName(taken), Labels: adminLabels},
			Data: map[string][]byte{"tls.pem": []byte("the platform team's key")}}
		halfSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.team, Name: configcheck.RenderedSecretName(half), Labels: adminLabels},
			Data: map[string][]byte{"tls.pem": []byte("another key")}}
		for _, obj := range []client.Object{adminCM, adminSecret, halfSecret} {
			if err := e.admin.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		// Each config publishes a certificate too.
		var configs []*gatehousev1alpha1.HAProxyTemplateConfig
		for _, name := range []string{taken, half, sentinel} {
			cfg := e.config(name, nil)
			cfg.Spec.SSLCertificates = map[string]gatehousev1alpha1.Template{"site.pem": {Template: "# {{ len .resources.services.List }}\n"}}
			if err := e.user.Create(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			configs = append(configs, cfg)
		}

		untouched := func() error {
			for _, want := range []client.Object{adminCM, adminSecret, halfSecret} {
				got := want.DeepCopyObject().(client.Object)
				if err := e.admin.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
					return fmt.Errorf("%s: %w", want.GetName(), err)
				}
				if got.GetResourceVersion() != want.GetResourceVersion() || !reflect.DeepEqual(got.GetLabels(), want.GetLabels()) ||
					len(got.GetOwnerReferences()) != 0 || len(got.GetAnnotations()) != 0 || !reflect.DeepEqual(data(got), data(want)) {
					return fmt.Errorf("%s was written: resourceVersion %s (was %s), labels %v, annotations %v, ownerReferences %v, data %v",
						got.GetName(), got.GetResourceVersion(), want.GetResourceVersion(), got.GetLabels(), got.GetAnnotations(), got.GetOwnerReferences(), data(got))
				}
			}
			return nil
		}
		notOwned := func(name, object string) {
			t.Helper()
			eventually(t, "config "+name+"'s status says its output is taken", func() error {
				cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
				if err := e.user.Get(ctx, types.NamespacedName{Namespace: e.team, Name: name}, cfg); err != nil {
					return err
				}
				c := meta.FindStatusCondition(cfg.Status.Conditions, gatehousev1alpha1.ConditionPublished)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "OutputNotOwned" ||
					!strings.Contains(c.Message, object+" "+e.team+"/") || !strings.Contains(c.Message, "delete or rename that") ||
					meta.IsStatusConditionTrue(cfg.Status.Conditions, gatehousev1alpha1.ConditionReady) {
					return fmt.Errorf("conditions %+v", cfg.Status.Conditions)
				}
				return nil
			})
		}
		notOwned(taken, "ConfigMap")
		notOwned(half, "Secret")
		if err := untouched(); err != nil {
			t.Fatal(err)
		}
		// half's Secret is taken, so its ConfigMap is not written either.
		err := e.admin.Get(ctx, types.NamespacedName{Namespace: e.team, Name: configcheck.RenderedConfigMapName(half)}, &corev1.ConfigMap{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("config %s's ConfigMap: %v; want none written while its Secret is not the config's", half, err)
		}
		// The sentinel's outputs are its own.
		sentinelCM := &corev1.ConfigMap{}
		eventually(t, "the sentinel config is published", func() error {
			err := e.admin.Get(ctx, types.NamespacedName{Namespace: e.team, Name: configcheck.RenderedConfigMapName(sentinel)}, sentinelCM)
			if err == nil && metav1.GetControllerOf(sentinelCM) == nil {
				return errors.New("the sentinel's ConfigMap has no controller")
			}
			return err
		})

		// Deleting the configs deletes what is theirs, and only that: once
		// the garbage collector has removed the sentinel's ConfigMap, the
		// admin's objects must still be there, unchanged.
		for _, cfg := range configs {
			if err := e.user.Delete(ctx, cfg); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "the garbage collector removes the sentinel's ConfigMap", func() error {
			err := e.admin.Get(ctx, client.ObjectKeyFromObject(sentinelCM), &corev1.ConfigMap{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there: %v", err)
		})
		if err := untouched(); err != nil {
			t.Fatal(err)
		}
	})
}

// data is a ConfigMap's or Secret's data.
func data(obj client.Object) any {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return o.Data
	case *corev1.Secret:
		return o.Data
	}
	return nil
}
