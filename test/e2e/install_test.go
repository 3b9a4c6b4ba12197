package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/nodegroup"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/uninstall"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// startInstance starts a labelguard Gatehouse named instance in namespace
// ns, and removes its configurations when the test ends.
func startInstance(t *testing.T, instance, ns string, settings *webhookconfig.Settings) *testenv.Gatehouse {
	t.Helper()
	g := startGatehouse(t, app.Options{
		Instance:  instance,
		Namespace: ns,
		Catalogue: []module.Module{&labelGuard{}},
		Modules:   map[string]app.ModuleConfig{"labelguard": {Enabled: true, Webhook: settings}},
	})
	t.Cleanup(func() {
		_ = g.Stop()
		if err := uninstall.Run(context.Background(), uninstall.Options{Client: controlPlane.Client, Instance: instance}); err != nil {
			t.Errorf("remove instance %s: %v", instance, err)
		}
	})
	return g
}

func liveValidating(t testing.TB, name string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	t.Helper()
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err := controlPlane.Client.Get(context.Background(), client.ObjectKey{Name: name}, c)
	return c, err
}

// Two installs in one cluster: each keeps its own configuration, labelled
// with its name, and neither the drift repair nor the resync of one
// rewrites or deletes the other's. Before per-install names, both wrote
// gatehouse-validating, each pointing it at its own server.
func TestTwoInstallsKeepTheirOwnConfigurations(t *testing.T) {
	nsA, nsB := namespace(t, "install-a"), namespace(t, "install-b")
	a := startInstance(t, "gh-a", nsA, nil)
	b := startInstance(t, "gh-b", nsB, nil)
	ctx := context.Background()

	eventually(t, "both configurations written", func() error {
		for name, g := range map[string]*testenv.Gatehouse{"gh-a-validating": a, "gh-b-validating": b} {
			c, err := liveValidating(t, name)
			if err != nil {
				return err
			}
			if len(c.Webhooks) != 1 || *c.Webhooks[0].ClientConfig.URL != g.URL+"/validate-labelguard" {
				return fmt.Errorf("%s: webhooks %+v, want one calling %s", name, c.Webhooks, g.URL)
			}
			if want := strings.TrimSuffix(name, "-validating"); c.Labels[webhookconfig.InstanceLabel] != want {
				return fmt.Errorf("%s: labels %v, want %s=%s", name, c.Labels, webhookconfig.InstanceLabel, want)
			}
		}
		return nil
	})
	if _, err := liveValidating(t, webhookconfig.ValidatingName); !apierrors.IsNotFound(err) {
		t.Errorf("the default configuration %s: %v, want none written", webhookconfig.ValidatingName, err)
	}
	before, err := liveValidating(t, "gh-a-validating")
	if err != nil {
		t.Fatal(err)
	}

	// B's configuration deleted: B's drift repair writes it back, and A's
	// is neither rewritten nor deleted by B (its resourceVersion stays).
	applied := b.Reconciler().Applied()
	if err := controlPlane.Client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "gh-b-validating"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B repairs its own configuration", func() error {
		if b.Reconciler().Applied() <= applied+1 {
			return errors.New("B has not reconciled twice since")
		}
		_, err := liveValidating(t, "gh-b-validating")
		return err
	})
	after, err := liveValidating(t, "gh-a-validating")
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || *after.Webhooks[0].ClientConfig.URL != a.URL+"/validate-labelguard" {
		t.Errorf("A's configuration changed under B's repair: resourceVersion %s → %s, URL %s", before.ResourceVersion, after.ResourceVersion, *after.Webhooks[0].ClientConfig.URL)
	}

	// Removing B removes B's configuration alone.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := uninstall.Run(ctx, uninstall.Options{Client: controlPlane.Client, Instance: "gh-b", Namespace: nsB, Deployment: "gh-b", Out: &out}); err != nil {
		t.Fatal(err)
	}
	if _, err := liveValidating(t, "gh-b-validating"); !apierrors.IsNotFound(err) {
		t.Errorf("B's configuration after uninstall: %v", err)
	}
	if c, err := liveValidating(t, "gh-a-validating"); err != nil || c.ResourceVersion != before.ResourceVersion {
		t.Errorf("A's configuration after B's uninstall: %v (resourceVersion %s, was %s)", err, c.ResourceVersion, before.ResourceVersion)
	}
	for _, want := range []string{"deployment " + nsB + "/gh-b not found: none stopped", "validatingwebhookconfiguration gh-b-validating deleted"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("uninstall said %q, want %q", out.String(), want)
		}
	}
}

// An operator's settings reach the live configuration, and the drift
// repair keeps them (not the module's defaults) when edited by hand.
func TestModuleWebhookSettingsAreKeptByTheDriftRepair(t *testing.T) {
	ns := namespace(t, "install-settings")
	settings := &webhookconfig.Settings{
		FailurePolicy:       ptr.To(admissionregistrationv1.Ignore),
		TimeoutSeconds:      ptr.To[int32](4),
		NamespaceExclusions: []string{"tenant-z", "tenant-y"},
		ObjectSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"guarded-by": "gatehouse"}},
		MatchConditions: []admissionregistrationv1.MatchCondition{
			{Name: "not-ci", Expression: `request.userInfo.username != "system:serviceaccount:ci:deployer"`}},
	}
	g := startInstance(t, "gh-settings", ns, settings)
	check := func() error {
		c, err := liveValidating(t, "gh-settings-validating")
		if err != nil {
			return err
		}
		if len(c.Webhooks) != 1 {
			return fmt.Errorf("webhooks %+v", c.Webhooks)
		}
		w := c.Webhooks[0]
		var excluded []string
		for _, e := range w.NamespaceSelector.MatchExpressions {
			excluded = append(excluded, e.Values...)
		}
		want := []string{"kube-node-lease", "kube-system", ns, "tenant-y", "tenant-z"}
		slices.Sort(want)
		if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.TimeoutSeconds != 4 || w.ObjectSelector.MatchLabels["guarded-by"] != "gatehouse" ||
			!slices.Equal(excluded, want) || !reflect.DeepEqual(w.MatchConditions, settings.MatchConditions) {
			return fmt.Errorf("webhook failurePolicy %s, timeout %d, objectSelector %v, excluded %v, matchConditions %v",
				*w.FailurePolicy, *w.TimeoutSeconds, w.ObjectSelector, excluded, w.MatchConditions)
		}
		return nil
	}
	eventually(t, "the settings are written", check)
	c, err := liveValidating(t, "gh-settings-validating")
	if err != nil {
		t.Fatal(err)
	}
	c.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	c.Webhooks[0].TimeoutSeconds = ptr.To[int32](10)
	c.Webhooks[0].ObjectSelector = &metav1.LabelSelector{}
	c.Webhooks[0].MatchConditions = nil
	if err := controlPlane.Client.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	applied := g.Reconciler().Applied()
	eventually(t, "the drift repair restores the settings", func() error {
		if g.Reconciler().Applied() <= applied {
			return errors.New("not reconciled since the edit")
		}
		return check()
	})
}

// A setting that would open a guard is refused at start-up, naming it.
func TestPlacementGuardRefusesIgnore(t *testing.T) {
	_, err := testenv.StartGatehouse(context.Background(), controlPlane, t.TempDir(), app.Options{
		Namespace: "gatehouse-e2e",
		Catalogue: catalogue.All(),
		Modules: map[string]app.ModuleConfig{"placement": {Enabled: true, Webhook: &webhookconfig.Settings{
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore)}}},
	})
	want := "module placement: modules[placement].webhook.failurePolicy: Forbidden: webhook placement-helmrelease.gatehouse.dev must stay Fail: it keeps a tenant's placement boundary"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("start-up error %v, want %q", err, want)
	}
	_, err = testenv.StartGatehouse(context.Background(), controlPlane, t.TempDir(), app.Options{
		Namespace: "gatehouse-e2e",
		Catalogue: catalogue.All(),
		Modules: map[string]app.ModuleConfig{"pvsafe": {Enabled: true, Webhook: &webhookconfig.Settings{
			TimeoutSeconds: ptr.To[int32](60)}}},
	})
	if want := "modules[pvsafe].webhook.timeoutSeconds: Invalid value: 60: must be between 1 and 30 seconds"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("start-up error %v, want %q", err, want)
	}
	// A match condition kube-apiserver would refuse stops Gatehouse at
	// start-up, rather than every write of its configuration later.
	_, err = testenv.StartGatehouse(context.Background(), controlPlane, t.TempDir(), app.Options{
		Namespace: "gatehouse-e2e",
		Catalogue: catalogue.All(),
		Modules: map[string]app.ModuleConfig{"pvsafe": {Enabled: true, Webhook: &webhookconfig.Settings{
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "typo", Expression: "request.userInfo.usernme == 'x'"}}}}},
	})
	if want := "modules[pvsafe].webhook.matchConditions[0].expression: Invalid value"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("start-up error %v, want %q", err, want)
	}
}

// gatehouse uninstall resets the conversion this install wrote (NodeGroups
// then read in every version, relabelled), deletes its configurations and
// leaves another install's; it refuses, changing nothing, while objects may
// be stored in an older version; run twice, it finds nothing to do.
func TestUninstallResetsItsConversionAndLeavesOthers(t *testing.T) {
	nsU, nsO := namespace(t, "uninstall-u"), namespace(t, "uninstall-o")
	env := startNodeGroupWith(t, app.Options{
		Instance:  "gh-u",
		Namespace: nsU,
		Catalogue: []module.Module{nodegroup.New()},
		Modules:   map[string]app.ModuleConfig{"nodegroup": {Enabled: true}},
	})
	startInstance(t, "gh-o", nsO, nil)
	ctx := context.Background()
	name := ngName("uninstall")
	env.create(t, &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ngv1.NodeGroupSpec{NodeType: ngv1.NodeTypeStatic}})

	crd := &apiextensionsv1.CustomResourceDefinition{}
	eventually(t, "the conversion is marked as gh-u's", func() error {
		if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: nodegroup.CRDName}, crd); err != nil {
			return err
		}
		if crd.Annotations[webhookconfig.ConversionOwnerAnnotation] != "gh-u" {
			return fmt.Errorf("annotations %v", crd.Annotations)
		}
		return nil
	})
	if err := env.g.Stop(); err != nil {
		t.Fatal(err)
	}
	opts := uninstall.Options{Client: controlPlane.Client, Instance: "gh-u", Namespace: nsU, Deployment: "gh-u"}

	// Objects possibly stored as v1alpha1: nothing is changed.
	stored := crd.Status.StoredVersions
	crd.Status.StoredVersions = []string{"v1alpha1", "v1"}
	if err := controlPlane.Client.Status().Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	err := uninstall.Run(ctx, opts)
	if err == nil || !strings.Contains(err.Error(), "nothing changed: the conversion of nodegroups.deckhouse.io (objects may be stored as v1alpha1, v1, the storage version is v1) cannot be reset to None safely") {
		t.Fatalf("uninstall with objects stored as v1alpha1: %v", err)
	}
	if _, err := liveValidating(t, "gh-u-validating"); err != nil {
		t.Fatalf("gh-u's configuration after a refused uninstall: %v", err)
	}
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: nodegroup.CRDName}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		t.Fatalf("conversion %s after a refused uninstall", crd.Spec.Conversion.Strategy)
	}
	crd.Status.StoredVersions = stored
	if err := controlPlane.Client.Status().Update(ctx, crd); err != nil {
		t.Fatal(err)
	}

	for run := range 2 {
		var out bytes.Buffer
		opts.Out = &out
		if err := uninstall.Run(ctx, opts); err != nil {
			t.Fatalf("uninstall run %d: %v", run+1, err)
		}
		t.Logf("uninstall run %d:\n%s", run+1, out.String())
	}
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: nodegroup.CRDName}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter || crd.Annotations[webhookconfig.ConversionOwnerAnnotation] != "" {
		t.Fatalf("conversion %+v, annotations %v after uninstall", crd.Spec.Conversion, crd.Annotations)
	}
	if _, err := liveValidating(t, "gh-u-validating"); !apierrors.IsNotFound(err) {
		t.Errorf("gh-u's configuration after uninstall: %v", err)
	}
	if c, err := liveValidating(t, "gh-o-validating"); err != nil || len(c.Webhooks) != 1 {
		t.Errorf("gh-o's configuration after gh-u's uninstall: %v", err)
	}
	// The API server no longer calls the stopped server: every version reads.
	for _, version := range []string{"v1alpha1", "v1alpha2", "v1"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("deckhouse.io/" + version)
		u.SetKind("NodeGroup")
		if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			t.Errorf("read NodeGroup %s as %s after uninstall: %v", name, version, err)
		}
	}
}

// A conversion stanza an install owns but that is already reset (by hand,
// or by an apply of the CRD's manifest, which sets strategy None and keeps
// the annotation) only loses its ownership mark. Uninstall used to send a
// malformed patch for it ("invalid JSON patch") and fail.
func TestUninstallForgetsAConversionAlreadyReset(t *testing.T) {
	ctx := context.Background()
	crd := schemalessCRD(schema.GroupVersionKind{Group: "reset-" + randSuffix() + ".example.com", Version: "v1", Kind: "Thing"}, "things")
	crd.Annotations = map[string]string{webhookconfig.ConversionOwnerAnnotation: "gh-reset"}
	if err := controlPlane.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = controlPlane.Client.Delete(context.Background(), crd) })
	if err := uninstall.Run(ctx, uninstall.Options{Client: controlPlane.Client, Instance: "gh-reset"}); err != nil {
		t.Fatalf("uninstall of an install whose conversion is already None: %v", err)
	}
	got := &apiextensionsv1.CustomResourceDefinition{}
	if err := controlPlane.Client.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
		t.Fatal(err)
	}
	if owner, ok := got.Annotations[webhookconfig.ConversionOwnerAnnotation]; ok {
		t.Fatalf("the CRD is still marked as %q's", owner)
	}
	if got.Spec.Conversion == nil || got.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Fatalf("conversion %+v, want None", got.Spec.Conversion)
	}
}

// The operator's labels and annotations (webhooks.labels and
// webhooks.annotations: Argo CD's tracking label, AKS's Admissions Enforcer
// opt-out) reach both configurations, cannot replace Gatehouse's own
// instance label, and are put back by the drift repair when removed.
func TestWebhookConfigurationLabelsAreKeptByTheDriftRepair(t *testing.T) {
	const instance = "gh-labels"
	ns := namespace(t, "install-labels")
	g := startGatehouse(t, app.Options{
		Instance:  instance,
		Namespace: ns,
		Catalogue: []module.Module{&labelGuard{}},
		Modules:   map[string]app.ModuleConfig{"labelguard": {Enabled: true}},
		ManageWebhooks: &webhookconfig.Target{
			Labels:      map[string]string{"argocd.argoproj.io/instance": "platform", webhookconfig.InstanceLabel: "someone-else"},
			Annotations: map[string]string{"admissions.enforcer/disabled": "true"},
		},
	})
	t.Cleanup(func() {
		_ = g.Stop()
		if err := uninstall.Run(context.Background(), uninstall.Options{Client: controlPlane.Client, Instance: instance}); err != nil {
			t.Errorf("remove instance %s: %v", instance, err)
		}
	})
	check := func() error {
		c, err := liveValidating(t, instance+"-validating")
		if err != nil {
			return err
		}
		if c.Labels["argocd.argoproj.io/instance"] != "platform" || c.Annotations["admissions.enforcer/disabled"] != "true" {
			return fmt.Errorf("labels %v, annotations %v", c.Labels, c.Annotations)
		}
		if c.Labels[webhookconfig.InstanceLabel] != instance {
			t.Fatalf("the instance label is %q: an operator's label replaced the one Gatehouse finds its configuration by", c.Labels[webhookconfig.InstanceLabel])
		}
		return nil
	}
	eventually(t, "the labels and annotations are written", check)
	c, err := liveValidating(t, instance+"-validating")
	if err != nil {
		t.Fatal(err)
	}
	delete(c.Labels, "argocd.argoproj.io/instance")
	delete(c.Annotations, "admissions.enforcer/disabled")
	if err := controlPlane.Client.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	applied := g.Reconciler().Applied()
	eventually(t, "the drift repair puts them back", func() error {
		if g.Reconciler().Applied() <= applied {
			return errors.New("not reconciled since the edit")
		}
		return check()
	})
}
