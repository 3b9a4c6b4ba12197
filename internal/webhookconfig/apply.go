package webhookconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

func (r *Reconciler) reconcile(ctx context.Context) error {
	desired := r.Desired()
	var errs []error
	if err := r.applyConfiguration(ctx, desired.Validating, &admissionregistrationv1.ValidatingWebhookConfiguration{}, len(desired.Validating.Webhooks)); err != nil {
		errs = append(errs, err)
	}
	if err := r.applyConfiguration(ctx, desired.Mutating, &admissionregistrationv1.MutatingWebhookConfiguration{}, len(desired.Mutating.Webhooks)); err != nil {
		errs = append(errs, err)
	}
	crds := make([]string, 0, len(desired.Conversions))
	for name := range desired.Conversions {
		crds = append(crds, name)
	}
	sort.Strings(crds)
	for _, name := range crds {
		if err := r.applyConversion(ctx, name, desired.Conversions[name], logf.FromContext(ctx)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		r.applied.Add(1)
	}
	return errors.Join(errs...)
}

// applyConfiguration applies Gatehouse's entries of one configuration. With
// no entries, it only withdraws Gatehouse's entries from an existing object.
func (r *Reconciler) applyConfiguration(ctx context.Context, desired, existing client.Object, entries int) error {
	err := r.opts.Cache.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) && entries == 0 {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	gvk := admissionregistrationv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration")
	if _, ok := desired.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
		gvk.Kind = "MutatingWebhookConfiguration"
	}
	u, err := toApply(desired, gvk.GroupVersion().String(), gvk.Kind)
	if err != nil {
		return err
	}
	if entries == 0 {
		// An empty list (not an absent one) releases what Gatehouse owned.
		u.Object["webhooks"] = []any{}
	}
	if err := r.opts.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, desired.GetName(), err)
	}
	return nil
}

// applyConversion sets a CRD's conversion stanza, and the annotation that
// says this install wrote it. A CRD that is not installed is left alone: the
// next CRD event brings the reconciler back. So is a CRD whose conversion
// webhook another owner keeps (Owns).
func (r *Reconciler) applyConversion(ctx context.Context, name string, conv *apiextensionsv1.CustomResourceConversion, log logr.Logger) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.opts.Cache.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !OwnsConversion(crd, r.opts.Instance, conv) {
		r.mu.Lock()
		first := !r.foreign[name]
		r.foreign[name] = true
		r.mu.Unlock()
		if first {
			log.Info("a CRD's conversion webhook belongs to another owner: left as it is; to hand its conversion to this install, set its spec.conversion.strategy to None (docs/install.md, \"Configuration\")",
				"crd", name, "owner", crd.Annotations[ConversionOwnerAnnotation], "webhook", describeConversion(crd.Spec.Conversion))
		}
		return nil
	}
	r.mu.Lock()
	delete(r.foreign, name)
	r.mu.Unlock()
	raw, err := json.Marshal(conv)
	if err != nil {
		return err
	}
	var conversion map[string]any
	if err := json.Unmarshal(raw, &conversion); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiextensionsv1.SchemeGroupVersion.String(),
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]any{
			"name":        name,
			"annotations": map[string]any{ConversionOwnerAnnotation: r.opts.Instance},
		},
		"spec": map[string]any{"conversion": conversion},
	}}
	if err := r.opts.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply the conversion stanza of CRD %s: %w", name, err)
	}
	return nil
}

// OwnsConversion says whether instance may write crd's conversion stanza
// (desired is the stanza it would write): when the CRD converts nothing
// yet, when instance wrote it (ConversionOwnerAnnotation), or when it is
// unmarked and already points at instance's own Service or server (an
// install from before the annotation). A webhook another install or
// another owner (Deckhouse's own, on a Deckhouse cluster) keeps is never
// taken over: two converters would fight over every object's
// conversion.
func OwnsConversion(crd *apiextensionsv1.CustomResourceDefinition, instance string, desired *apiextensionsv1.CustomResourceConversion) bool {
	live := crd.Spec.Conversion
	if live == nil || live.Strategy != apiextensionsv1.WebhookConverter || live.Webhook == nil || live.Webhook.ClientConfig == nil {
		return true
	}
	if owner, ok := crd.Annotations[ConversionOwnerAnnotation]; ok {
		return owner == instance
	}
	if desired == nil || desired.Webhook == nil || desired.Webhook.ClientConfig == nil {
		return false
	}
	have, want := live.Webhook.ClientConfig, desired.Webhook.ClientConfig
	switch {
	case have.Service != nil && want.Service != nil:
		return have.Service.Namespace == want.Service.Namespace && have.Service.Name == want.Service.Name
	case have.URL != nil && want.URL != nil:
		return *have.URL == *want.URL
	}
	return false
}

// describeConversion names where a conversion webhook points, for logs.
func describeConversion(c *apiextensionsv1.CustomResourceConversion) string {
	if c == nil || c.Webhook == nil || c.Webhook.ClientConfig == nil {
		return ""
	}
	if s := c.Webhook.ClientConfig.Service; s != nil {
		return "service " + s.Namespace + "/" + s.Name
	}
	if u := c.Webhook.ClientConfig.URL; u != nil {
		return *u
	}
	return ""
}

func toApply(obj client.Object, apiVersion, kind string) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u, nil
}
