package configcheck

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

var _ module.Failer = (*Module)(nil)

// Failed runs when Setup failed (module.Failer): the host serves none of
// configcheck's webhooks, so every config validates nothing and publishes
// nothing, and each config says so and why. It needs nothing Setup
// needed (no haproxy, no render worker, no confinement): a cache of the
// configs started apart from /readyz, and a controller on the leader (the
// replica that writes the webhook configurations, whose view the
// condition states) writing two conditions. When the module starts again,
// its publisher rewrites WebhookActive and removes ModuleReady.
func (m *Module) Failed(ctx context.Context, host module.Host, reason error) error {
	configs, _, err := host.StartCache("failed-configs", cache.Options{ByObject: map[client.Object]cache.ByObject{
		&gatehousev1alpha1.HAProxyTemplateConfig{}: {},
	}})
	if err != nil {
		return err
	}
	message := guard.Bounded(fmt.Sprintf("configcheck could not start: %v. Until it does, this config validates nothing (its webhooks are withdrawn from the webhook configurations) and publishes nothing; the other modules of Gatehouse serve.", reason), 4000)
	w := &failedWriter{host: host, configs: configs, message: message}
	c, err := host.NewController("ModuleFailed", controller.Options{Reconciler: w})
	if err != nil {
		return err
	}
	if err := c.Watch(source.Kind(configs, &gatehousev1alpha1.HAProxyTemplateConfig{},
		&handler.TypedEnqueueRequestForObject[*gatehousev1alpha1.HAProxyTemplateConfig]{})); err != nil {
		return err
	}
	return host.Add(c)
}

// failedWriter writes the conditions of a module that could not start.
type failedWriter struct {
	host    module.Host
	configs cache.Cache
	message string
}

func (w *failedWriter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if err := w.configs.Get(ctx, req.NamespacedName, cfg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	status := cfg.Status.DeepCopy()
	markFailed(status, cfg.Generation, w.message)
	if equality.Semantic.DeepEqual(&cfg.Status, status) {
		return reconcile.Result{}, nil
	}
	patched := cfg.DeepCopy()
	patched.Status = *status
	return reconcile.Result{}, client.IgnoreNotFound(w.host.Client().Status().Patch(ctx, patched, client.MergeFrom(cfg)))
}

// markFailed sets the conditions of a config while configcheck cannot
// start: ModuleReady False with why, and WebhookActive False, since its
// webhooks are not in the configurations (kubectl get's Webhook column).
// What the module found before (Valid, Published) stays as it was: true
// of the config, and the next start rewrites it.
func markFailed(status *gatehousev1alpha1.HAProxyTemplateConfigStatus, generation int64, message string) {
	for _, kind := range []string{gatehousev1alpha1.ConditionModuleReady, gatehousev1alpha1.ConditionWebhookActive} {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: kind, Status: metav1.ConditionFalse, Reason: gatehousev1alpha1.ReasonModuleFailed,
			Message: message, ObservedGeneration: generation,
		})
	}
}
