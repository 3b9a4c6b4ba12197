package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// secretDump is authzTemplate printing every Secret its store holds, as a
// config that means to leak them would.
const secretDump = authzTemplate + `{{ range .resources.secrets.List }}# {{ .metadata.namespace }}/{{ .metadata.name }} {{ index .data "password" }}
{{ end }}`

// victimSecret creates, as the cluster's admin, a Secret in namespace that
// a config selecting cert=true Secrets would read; it returns what must
// never be published: its name and its data as a template sees it.
func victimSecret(t *testing.T, namespace string) (name, data string) {
	t.Helper()
	name = "db-password-" + randSuffix()
	value := []byte("s3cr3t-" + randSuffix())
	if err := controlPlane.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"cert": "true"}},
		Data:       map[string][]byte{"password": value},
	}); err != nil {
		t.Fatal(err)
	}
	return name, base64.StdEncoding.EncodeToString(value)
}

// leakingConfig reads every cert=true Secret of the cluster (or of
// namespace secretsIn) and prints them.
func leakingConfig(namespace, name, secretsIn string) *gatehousev1alpha1.HAProxyTemplateConfig {
	secrets := gatehousev1alpha1.WatchedResource{APIVersion: "v1", Resources: "secrets", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"cert": "true"}}}
	if secretsIn != "" {
		secrets.NamespaceSelector = onlyNamespace(secretsIn)
	}
	return &gatehousev1alpha1.HAProxyTemplateConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: gatehousev1alpha1.HAProxyTemplateConfigSpec{
			WatchedResources: map[string]gatehousev1alpha1.WatchedResource{
				"secrets":  secrets,
				"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: onlyNamespace(namespace)},
			},
			HAProxyConfig: gatehousev1alpha1.Template{Template: secretDump},
		},
	}
}

// authorized waits until Gatehouse has judged the author of key's current
// generation (Authorized is True or False), as judged wants when given,
// and returns the condition.
func authorized(t *testing.T, c client.Client, key types.NamespacedName, judged func(*metav1.Condition) bool) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	eventually(t, "config "+key.String()+"'s author is judged", func() error {
		cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := c.Get(context.Background(), key, cfg); err != nil {
			return err
		}
		got = meta.FindStatusCondition(cfg.Status.Conditions, gatehousev1alpha1.ConditionAuthorized)
		if got == nil || got.Status == metav1.ConditionUnknown || got.ObservedGeneration != cfg.Generation || (judged != nil && !judged(got)) {
			return fmt.Errorf("conditions %+v", cfg.Status.Conditions)
		}
		return nil
	})
	return got
}

// notPublished fails when the config's ConfigMap holds the Secret.
func notPublished(t *testing.T, key types.NamespacedName, secretName, secretData string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := controlPlane.Client.Get(context.Background(), types.NamespacedName{Namespace: key.Namespace, Name: configcheck.RenderedConfigMapName(key.Name)}, cm)
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range cm.Data {
		if strings.Contains(v, secretData) || strings.Contains(v, secretName) {
			t.Fatalf("ConfigMap %s/%s[%s] publishes another tenant's Secret:\n%s", cm.Namespace, cm.Name, k, v)
		}
	}
}

// TestConfigcheckForgedAuthorInExcludedNamespacePublishesNothing plays a
// user who may write HAProxyTemplateConfigs (and read ConfigMaps) only in
// kube-node-lease, which no webhook of Gatehouse sees: they store a config
// whose author record claims system:masters and that selects every
// cert=true Secret of the cluster, another tenant's among them. The
// config publishes nothing and says why.
func TestConfigcheckForgedAuthorInExcludedNamespacePublishesNothing(t *testing.T) {
	ctx := context.Background()
	admin := controlPlane.Client
	if err := gatehousev1alpha1.AddToScheme(admin.Scheme()); err != nil {
		t.Fatal(err)
	}
	const excluded = "kube-node-lease"
	user := "mallory-" + randSuffix()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: excluded, Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{gatehousev1alpha1.GroupVersion.Group}, Resources: []string{"haproxytemplateconfigs"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
		},
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: excluded, Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}
	for _, obj := range []client.Object{role, binding} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), obj) })
	}
	eventually(t, user+" may create configs in "+excluded, func() error {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Group: gatehousev1alpha1.GroupVersion.Group, Resource: "haproxytemplateconfigs", Namespace: excluded}}}
		if err := admin.Create(ctx, sar); err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return errors.New("not yet")
		}
		return nil
	})
	secretName, secretData := victimSecret(t, namespace(t, "victim"))
	startConfigcheckGatehouse(t)

	mallory := impersonated(t, user)
	cfg := leakingConfig(excluded, "spy-"+randSuffix(), "")
	cfg.Annotations = map[string]string{configcheck.AuthorAnnotation: `{"username":"platform-admin","groups":["system:masters","system:authenticated"]}`}
	if err := mallory.Create(ctx, cfg); err != nil {
		t.Fatalf("the API server stores what it stores in %s without Gatehouse: %v", excluded, err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), cfg) })
	key := client.ObjectKeyFromObject(cfg)
	c := authorized(t, mallory, key, nil)
	if c.Status != metav1.ConditionFalse || c.Reason != "NoAuthor" || !strings.Contains(c.Message, "never read") {
		t.Fatalf("a forged record in %s: Authorized %s %s: %s; want False NoAuthor, never read", excluded, c.Status, c.Reason, c.Message)
	}
	notPublished(t, key, secretName, secretData)
}

// TestConfigcheckCopiedOrStaleAuthorRecordIsRefused plays a tenant who
// writes while configcheck's webhooks are withdrawn (here: Gatehouse
// stopped and its webhook configurations gone, as after a module failure
// or before the install): they copy the platform admin's record from the
// admin's config onto their own, and change the spec of the admin's
// config under its record, each to read another tenant's Secret. Once
// Gatehouse runs again (with the same keys), neither publishes, and each
// says why and how to proceed.
func TestConfigcheckCopiedOrStaleAuthorRecordIsRefused(t *testing.T) {
	ctx := context.Background()
	e := newAuthzEnv(t)
	secretName, secretData := victimSecret(t, e.victim)
	opts := configcheckOptions()
	opts.RecordsKeyDir = t.TempDir()
	g := startGatehouse(t, opts)
	e.waitServed(t)

	// The admin's config reads the victim's Secrets, and only counts them.
	platform := leakingConfig(e.team, "platform-"+randSuffix(), e.victim)
	platform.Spec.HAProxyConfig.Template = authzTemplate + "# {{ len .resources.secrets.List }} secrets\n"
	if err := e.admin.Create(ctx, platform); err != nil {
		t.Fatal(err)
	}
	if c := authorized(t, e.admin, client.ObjectKeyFromObject(platform), nil); c.Status != metav1.ConditionTrue {
		t.Fatalf("the admin's own config: Authorized %s %s: %s", c.Status, c.Reason, c.Message)
	}
	stored := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if err := e.admin.Get(ctx, client.ObjectKeyFromObject(platform), stored); err != nil {
		t.Fatal(err)
	}
	record := stored.Annotations[configcheck.AuthorAnnotation]

	// Withdrawn: Gatehouse's configurations go, as a failed module's do.
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	uninstallConfigs(t)

	// The API server forgets the configurations a moment later: until
	// then, it calls the stopped server and refuses (failurePolicy Fail).
	copied := leakingConfig(e.team, "copied-"+randSuffix(), e.victim)
	copied.Annotations = map[string]string{configcheck.AuthorAnnotation: record}
	eventually(t, "the tenant stores a config under the admin's record", func() error {
		return e.user.Create(ctx, copied.DeepCopy())
	})
	eventually(t, "the tenant changes the admin's config's spec", func() error {
		if err := e.user.Get(ctx, client.ObjectKeyFromObject(stored), stored); err != nil {
			return err
		}
		stored.Spec.HAProxyConfig.Template = secretDump
		return e.user.Update(ctx, stored)
	})

	startGatehouse(t, opts)
	for _, tc := range []struct {
		key  types.NamespacedName
		why  string
		name string
	}{
		{client.ObjectKeyFromObject(copied), "not one this install signed for this config", "a record copied from another config"},
		{client.ObjectKeyFromObject(stored), "its spec has been written since", "a record kept over a spec written without the webhooks"},
	} {
		c := authorized(t, e.user, tc.key, nil)
		if c.Status != metav1.ConditionFalse || c.Reason != "NoAuthor" || !strings.Contains(c.Message, tc.why) || !strings.Contains(c.Message, configcheck.ClaimAnnotation) {
			t.Fatalf("%s: Authorized %s %s: %s; want False NoAuthor, %q and how to claim", tc.name, c.Status, c.Reason, c.Message, tc.why)
		}
		notPublished(t, tc.key, secretName, secretData)
	}

	// The admin claims their config back without touching the spec: it is
	// theirs again, read with their rights. Gatehouse writes the config's
	// status meanwhile: a conflict is read again and retried.
	claim := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.admin.Get(ctx, client.ObjectKeyFromObject(stored), claim); err != nil {
			return err
		}
		claim.Annotations[configcheck.ClaimAnnotation] = "yes"
		return e.admin.Update(ctx, claim)
	}); err != nil {
		t.Fatal(err)
	}
	c := authorized(t, e.admin, client.ObjectKeyFromObject(stored), func(c *metav1.Condition) bool { return c.Status == metav1.ConditionTrue })
	if c.Reason != "Authorized" && c.Reason != "CheckedPerNamespace" {
		t.Fatalf("after the admin's claim: %s %s", c.Reason, c.Message)
	}
	if err := e.admin.Get(ctx, client.ObjectKeyFromObject(stored), claim); err != nil {
		t.Fatal(err)
	}
	if _, ok := claim.Annotations[configcheck.ClaimAnnotation]; ok {
		t.Fatal("the claim annotation was stored")
	}
}

// uninstallConfigs removes Gatehouse's webhook configurations, as a
// withdrawal, or an install not made yet, leaves the API server.
func uninstallConfigs(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookconfig.ValidatingName}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookconfig.MutatingName}},
	} {
		if err := controlPlane.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}
