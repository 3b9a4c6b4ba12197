package webhookconfig

import (
	"context"
	"fmt"
	"sort"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// writtenCheckTimeout bounds Written's reads of the cache; a synced cache
// answers in microseconds.
const writtenCheckTimeout = 250 * time.Millisecond

// Written is the readiness check: this replica's cache shows every static
// webhook in its configuration and every converted CRD pointing at a
// webhook. The leader writes them; the other replicas see them.
func (r *Reconciler) Written() error {
	// A readiness check must answer, not wait: a cache that cannot sync
	// (its list forbidden, the API server away) would otherwise hold
	// /readyz, and every probe after it, until it does.
	ctx, cancel := context.WithTimeout(context.Background(), writtenCheckTimeout)
	defer cancel()
	// Only the names matter here: the target may not be known yet.
	// A withdrawn module's webhooks are not waited for: the leader
	// removes them.
	r.mu.Lock()
	static := r.staticLocked()
	r.mu.Unlock()
	desired := Render(static, Target{URL: "https://unknown"})
	validating, mutating := ConfigurationNames(r.opts.Instance)
	var missing []string
	if len(desired.Validating.Webhooks) > 0 {
		live := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		names := map[string]bool{}
		if err := r.opts.Cache.Get(ctx, client.ObjectKey{Name: validating}, live); err == nil {
			for _, w := range live.Webhooks {
				names[w.Name] = true
			}
		}
		for _, w := range desired.Validating.Webhooks {
			if !names[w.Name] {
				missing = append(missing, validating+"/"+w.Name)
			}
		}
	}
	if len(desired.Mutating.Webhooks) > 0 {
		live := &admissionregistrationv1.MutatingWebhookConfiguration{}
		names := map[string]bool{}
		if err := r.opts.Cache.Get(ctx, client.ObjectKey{Name: mutating}, live); err == nil {
			for _, w := range live.Webhooks {
				names[w.Name] = true
			}
		}
		for _, w := range desired.Mutating.Webhooks {
			if !names[w.Name] {
				missing = append(missing, mutating+"/"+w.Name)
			}
		}
	}
	for name := range desired.Conversions {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := r.opts.Cache.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue // nothing to convert until it is installed
			}
			missing = append(missing, "crd/"+name)
			continue
		}
		if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
			missing = append(missing, "crd/"+name+" conversion")
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("not written yet: %v", missing)
	}
	return nil
}
