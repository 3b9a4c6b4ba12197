package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
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
