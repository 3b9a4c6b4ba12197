package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testlog"
)

// readConfigJSON reads a config as the API server returns it, so that a
// field it leaves out is told apart from one it writes as 0.
func readConfigJSON(t *testing.T, key types.NamespacedName) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gatehousev1alpha1.GroupVersion.WithKind("HAProxyTemplateConfig"))
	if err := controlPlane.Client.Get(context.Background(), key, u); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestConfigcheckCRDDefaults: the optional structs validationWebhook and
// templatingSettings are defaulted by the API server, whether absent or
// given in part, so what a config reads back is what Gatehouse registers.
func TestConfigcheckCRDDefaults(t *testing.T) {
	c := controlPlane.Client
	if err := gatehousev1alpha1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, "lb")
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		webhook        gatehousev1alpha1.ValidationWebhook
		policy         string
		timeoutSeconds int64
	}{
		{name: "absent", policy: "Fail", timeoutSeconds: 10},
		{name: "policy-only", webhook: gatehousev1alpha1.ValidationWebhook{FailurePolicy: "Ignore"}, policy: "Ignore", timeoutSeconds: 10},
		{name: "timeout-only", webhook: gatehousev1alpha1.ValidationWebhook{TimeoutSeconds: 5}, policy: "Fail", timeoutSeconds: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := exampleConfig(t)
			cfg.Namespace, cfg.Name = ns, tc.name
			cfg.Spec.ValidationWebhook = tc.webhook
			cfg.Spec.TemplatingSettings = gatehousev1alpha1.TemplatingSettings{}
			raw, err := runtimeToUnstructured(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, raw); err != nil {
				t.Fatal(err)
			}
			got := readConfigJSON(t, types.NamespacedName{Namespace: ns, Name: tc.name})
			policy, _, _ := unstructured.NestedString(got.Object, "spec", "validationWebhook", "failurePolicy")
			timeout, _, _ := unstructured.NestedInt64(got.Object, "spec", "validationWebhook", "timeoutSeconds")
			engine, _, _ := unstructured.NestedString(got.Object, "spec", "templatingSettings", "engine")
			if policy != tc.policy || timeout != tc.timeoutSeconds || engine != "gotemplate" {
				t.Fatalf("read back failurePolicy %q, timeoutSeconds %d, engine %q; want %q, %d, gotemplate",
					policy, timeout, engine, tc.policy, tc.timeoutSeconds)
			}
		})
	}
}

// runtimeToUnstructured sends cfg as JSON through an unstructured object:
// the typed client would send the Go zero values (an empty
// validationWebhook struct) the test means to leave out.
func runtimeToUnstructured(cfg *gatehousev1alpha1.HAProxyTemplateConfig) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := jsonUnmarshal(raw, &u.Object); err != nil {
		return nil, err
	}
	spec, _ := u.Object["spec"].(map[string]any)
	for _, name := range []string{"validationWebhook", "templatingSettings"} {
		if m, ok := spec[name].(map[string]any); ok && len(m) == 0 {
			delete(spec, name)
		}
	}
	u.SetGroupVersionKind(gatehousev1alpha1.GroupVersion.WithKind("HAProxyTemplateConfig"))
	return u, nil
}

// TestConfigcheckStatusWritesAZeroCount: a config whose every embedded
// test fails (stored while Gatehouse was away: its own webhook refuses
// such a config) reads back testsPassed: 0, not an absent count.
func TestConfigcheckStatusWritesAZeroCount(t *testing.T) {
	c := controlPlane.Client
	if err := gatehousev1alpha1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	cfg := exampleConfig(t)
	cfg.Namespace = namespace(t, "lb")
	cfg.Spec.ValidationTests = map[string]gatehousev1alpha1.ValidationTest{
		"never-passes": {Assertions: []gatehousev1alpha1.Assertion{{Type: "contains", Pattern: "no rendering holds this line"}}},
	}
	// Before Gatehouse starts, so that its config webhook is not there yet.
	if err := c.Create(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(cfg)
	startConfigcheckGatehouse(t)
	eventually(t, "the status counts 0 of 1 tests passed", func() error {
		got := readConfigJSON(t, key)
		status, _, _ := unstructured.NestedString(got.Object, "status", "validationStatus")
		passed, hasPassed, _ := unstructured.NestedInt64(got.Object, "status", "testsPassed")
		total, _, _ := unstructured.NestedInt64(got.Object, "status", "testsTotal")
		if status != string(gatehousev1alpha1.ValidationInvalid) || !hasPassed || passed != 0 || total != 1 {
			return fmt.Errorf("status %v", got.Object["status"])
		}
		return nil
	})
}

// TestConfigcheckFailOpenIsLoggedOncePerChange asserts what
// docs/configcheck.md says of the fail-open line: logged at start when
// there is no config, logged when a change leaves no config with a
// webhook (naming that config), and not repeated while that lasts.
func TestConfigcheckFailOpenIsLoggedOncePerChange(t *testing.T) {
	c := controlPlane.Client
	if err := gatehousev1alpha1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The first line is the one of a cluster without any config. Tests run
	// one at a time: a config still here is a finished test's, its
	// namespace still terminating (deletions wait while webhooks point at
	// a stopped Gatehouse), so it is removed rather than waited for.
	eventually(t, "no HAProxyTemplateConfig is left in the cluster", func() error {
		var list gatehousev1alpha1.HAProxyTemplateConfigList
		if err := c.List(ctx, &list); err != nil {
			return err
		}
		for i := range list.Items {
			if err := c.Delete(ctx, &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		if n := len(list.Items); n > 0 {
			return fmt.Errorf("%d left", n)
		}
		return nil
	})
	var logs testlog.Lines
	startGatehouse(t, app.Options{
		Log:       logs.Logger(t),
		Catalogue: []module.Module{configcheck.New(configcheck.Options{})},
		Modules:   map[string]app.ModuleConfig{"configcheck": {Enabled: true}},
	})
	failOpen := func() []string {
		return logs.Matching(`configcheck/Controllers/HAProxyTemplateConfig`, `"msg"="`+configcheck.FailOpenMessage+`"`)
	}
	want := func(what string, n int) {
		t.Helper()
		eventually(t, what, func() error {
			if got := failOpen(); len(got) != n {
				return fmt.Errorf("%d fail-open lines, want %d: %q", len(got), n, got)
			}
			return nil
		})
	}
	want("the fail-open line is logged at start without any config", 1)

	cfg := exampleConfig(t)
	cfg.Namespace = namespace(t, "lb")
	key := client.ObjectKeyFromObject(cfg)
	eventually(t, "the config is admitted", func() error { return c.Create(ctx, cfg) })
	// observed waits until the leader's status describes the config's
	// current generation with the webhooks in the given state.
	observed := func(what string, active metav1.ConditionStatus) {
		t.Helper()
		eventually(t, what, func() error {
			got := &gatehousev1alpha1.HAProxyTemplateConfig{}
			if err := c.Get(ctx, key, got); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, gatehousev1alpha1.ConditionWebhookActive)
			if got.Status.ObservedGeneration != got.Generation || cond == nil || cond.Status != active || cond.ObservedGeneration != got.Generation {
				return fmt.Errorf("status %+v", got.Status)
			}
			return nil
		})
	}
	observed("the config's webhooks are registered", metav1.ConditionTrue)
	if got := failOpen(); len(got) != 1 {
		t.Fatalf("a config with webhooks logged fail-open: %q", got)
	}

	update := func(change func(*gatehousev1alpha1.HAProxyTemplateConfig)) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := &gatehousev1alpha1.HAProxyTemplateConfig{}
			if err := c.Get(ctx, key, got); err != nil {
				return err
			}
			change(got)
			return c.Update(ctx, got)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	update(func(cfg *gatehousev1alpha1.HAProxyTemplateConfig) {
		for name, w := range cfg.Spec.WatchedResources {
			w.EnableValidationWebhook = false
			cfg.Spec.WatchedResources[name] = w
		}
	})
	observed("the config's webhooks are withdrawn", metav1.ConditionFalse)
	want("the fail-open line is logged again when the last webhook goes", 2)
	if got := failOpen()[1]; !strings.Contains(got, fmt.Sprintf(`"config"={"name"=%q "namespace"=%q}`, key.Name, key.Namespace)) {
		t.Errorf("the fail-open line does not name the config whose change caused it: %s", got)
	}

	update(func(cfg *gatehousev1alpha1.HAProxyTemplateConfig) {
		cfg.Spec.WatchedResourcesIgnoreFields = append(cfg.Spec.WatchedResourcesIgnoreFields, "metadata.annotations")
	})
	observed("another change without webhooks is loaded", metav1.ConditionFalse)
	eventually(t, "the change is loaded on the replica", func() error {
		got := &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := c.Get(ctx, key, got); err != nil {
			return err
		}
		if len(logs.Matching(`"msg"="config loaded"`, fmt.Sprintf(`"generation"=%d`, got.Generation))) == 0 {
			return errors.New("not yet")
		}
		return nil
	})
	if got := failOpen(); len(got) != 2 {
		t.Fatalf("the fail-open line was repeated while nothing changed: %q", got)
	}
}
