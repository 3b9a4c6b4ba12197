package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
	"github.com/gatehouse-dev/gatehouse/internal/testing/admissionload"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// TestAModuleThatCannotStartFailsAlone: configcheck cannot start (a
// kernel without Landlock, simulated) beside pvsafe and nodegroup. Through
// kube-apiserver, pvsafe and nodegroup deny and convert as usual; no
// configcheck webhook is in the configurations, so what configcheck would
// deny is admitted rather than refused by a webhook nobody decides; every
// HAProxyTemplateConfig says why (ModuleReady False, ModuleFailed); the
// replica is ready and /readyz names the module and the reason;
// gatehouse_module_ready is 0 for configcheck, 1 for the others.
func TestAModuleThatCannotStartFailsAlone(t *testing.T) {
	ctx := context.Background()
	if err := gatehousev1alpha1.AddToScheme(controlPlane.Client.Scheme()); err != nil {
		t.Fatal(err)
	}
	mods := []string{"pvsafe", "nodegroup", "configcheck"}
	modules := map[string]app.ModuleConfig{}
	for _, m := range mods {
		modules[m] = app.ModuleConfig{Enabled: true}
	}
	// Registered before Gatehouse starts, so run after it stopped.
	t.Cleanup(func() {
		if err := admissionload.Teardown(context.Background(), controlPlane.Client); err != nil {
			t.Errorf("removing the fixtures: %v", err)
		}
	})
	noLandlock := func() sandbox.Capabilities {
		return sandbox.Capabilities{LandlockReason: "simulated by TestAModuleThatCannotStartFailsAlone", Seccomp: true}
	}
	built := catalogue.All()
	for i, m := range built {
		if m.Name() == "configcheck" {
			built[i] = configcheck.New(configcheck.Options{Kernel: noLandlock})
		}
	}
	metricsAddr := "127.0.0.1:" + freePort(t)
	// startGatehouse waits for /readyz: a module that could not start
	// does not hold the replica back.
	g := startGatehouse(t, app.Options{
		Namespace:   namespace(t, "e2e-module-failure"),
		Catalogue:   built,
		Modules:     modules,
		MetricsAddr: metricsAddr,
	})
	if failed := g.FailedModules(); len(failed) != 1 || !strings.Contains(failed["configcheck"], "simulated by") {
		t.Fatalf("failed modules %v, want configcheck alone with the simulated kernel's reason", failed)
	}

	// The configurations: pvsafe's and nodegroup's webhooks, no
	// configcheck webhook.
	settle(t, "the webhook configurations name pvsafe and nodegroup, not configcheck", func(ctx context.Context) error {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: webhookconfig.ValidatingName}, vwc); err != nil {
			return err
		}
		var names []string
		for _, w := range vwc.Webhooks {
			names = append(names, w.Name)
			if strings.Contains(w.Name, "configcheck") || strings.Contains(w.ClientConfig.String(), "configcheck") {
				return fmt.Errorf("configcheck's webhook %s is in %s", w.Name, vwc.Name)
			}
		}
		joined := strings.Join(names, " ")
		if !strings.Contains(joined, "pvsafe") || !strings.Contains(joined, "nodegroup") {
			return fmt.Errorf("%s holds %v, want pvsafe's and nodegroup's webhooks", vwc.Name, names)
		}
		return nil
	})

	// The fixtures: configcheck's config is stored unchecked (its webhook
	// is not written).
	if err := admissionload.Setup(ctx, controlPlane.Client, mods...); err != nil {
		t.Fatal(err)
	}
	for _, op := range admissionload.Operations(mods...) {
		want := op.Denial
		if op.Module == "configcheck" {
			want = "" // nobody decides: admitted, not refused
		}
		settle(t, op.Name, func(ctx context.Context) error {
			err := op.Do(ctx, controlPlane.Client)
			switch {
			case want == "" && err != nil:
				return fmt.Errorf("want admitted: %w", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				return fmt.Errorf("want denied with %q, got %v", want, err)
			}
			return nil
		})
	}

	// Every config says why.
	settle(t, "every HAProxyTemplateConfig carries ModuleReady False, ModuleFailed", func(ctx context.Context) error {
		var configs gatehousev1alpha1.HAProxyTemplateConfigList
		if err := controlPlane.Client.List(ctx, &configs); err != nil {
			return err
		}
		if len(configs.Items) == 0 {
			return fmt.Errorf("no config")
		}
		for _, cfg := range configs.Items {
			for _, kind := range []string{gatehousev1alpha1.ConditionModuleReady, gatehousev1alpha1.ConditionWebhookActive} {
				c := meta.FindStatusCondition(cfg.Status.Conditions, kind)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != gatehousev1alpha1.ReasonModuleFailed || !strings.Contains(c.Message, "simulated by") {
					return fmt.Errorf("config %s/%s: %s = %+v", cfg.Namespace, cfg.Name, kind, c)
				}
			}
		}
		return nil
	})

	// /readyz: ready, naming the module and why.
	resp, err := g.HTTPClient.Get(g.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "module/configcheck: not started: ") ||
		!strings.Contains(string(body), "simulated by") || strings.Contains(string(body), "module/pvsafe") {
		t.Fatalf("/readyz = %d %q, want ready, naming configcheck alone and its reason", resp.StatusCode, body)
	}

	// The gauge.
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(scrapeGatehouse(t, "http://"+metricsAddr+"/metrics")))
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]float64{}
	for _, m := range families["gatehouse_module_ready"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "module" {
				ready[l.GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	for m, want := range map[string]float64{"pvsafe": 1, "nodegroup": 1, "configcheck": 0} {
		if got, ok := ready[m]; !ok || got != want {
			t.Errorf("gatehouse_module_ready{module=%q} = %v (served: %v), want %v", m, got, ok, want)
		}
	}
}
