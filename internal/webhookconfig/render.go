package webhookconfig

import (
	"context"
	"fmt"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// Names of the configurations Gatehouse owns.
const (
	ValidatingName = "gatehouse-validating"
	MutatingName   = "gatehouse-mutating"
)

// AlwaysExcluded are namespaces no Gatehouse webhook ever intercepts, so that
// an outage can never lock the control plane out.
var AlwaysExcluded = []string{"kube-system", "kube-node-lease"}

// Target says how the API server reaches Gatehouse.
type Target struct {
	// URL is the base URL (for example https://127.0.0.1:9443) when Gatehouse
	// runs outside the cluster; Service is used otherwise.
	URL     string
	Service *admissionregistrationv1.ServiceReference
	// CABundle verifies Gatehouse's serving certificate.
	CABundle []byte
	// Namespace is Gatehouse's own namespace; it is excluded too.
	Namespace string
}

func (t Target) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: t.CABundle}
	if t.URL != "" {
		cc.URL = ptr.To(t.URL + path)
		return cc
	}
	svc := *t.Service
	svc.Path = ptr.To(path)
	cc.Service = &svc
	return cc
}

// NamespaceSelector excludes the always-excluded namespaces and own.
func NamespaceSelector(own string) *metav1.LabelSelector {
	values := append([]string(nil), AlwaysExcluded...)
	if own != "" {
		values = append(values, own)
	}
	sort.Strings(values)
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: values,
	}}}
}

// Rendered is the API server side of a set of webhooks.
type Rendered struct {
	Validating *admissionregistrationv1.ValidatingWebhookConfiguration
	Mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	// Conversions maps a CRD name to the conversion stanza it must carry.
	Conversions map[string]*apiextensionsv1.CustomResourceConversion
}

// Render builds the configurations for hooks. Webhooks without rules (the
// generic /validate path with nothing registered) are left out.
func Render(hooks []module.Webhook, t Target) *Rendered {
	out := &Rendered{
		Validating:  &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ValidatingName, Labels: ownedLabels()}},
		Mutating:    &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: MutatingName, Labels: ownedLabels()}},
		Conversions: map[string]*apiextensionsv1.CustomResourceConversion{},
	}
	for _, h := range hooks {
		matchPolicy := h.MatchPolicy
		if matchPolicy == "" {
			matchPolicy = admissionregistrationv1.Equivalent
		}
		switch h.Type {
		case module.Validating:
			if len(h.Rules) == 0 {
				continue
			}
			out.Validating.Webhooks = append(out.Validating.Webhooks, admissionregistrationv1.ValidatingWebhook{
				Name:                    h.Name,
				ClientConfig:            t.clientConfig(h.Path),
				Rules:                   h.Rules,
				FailurePolicy:           ptr.To(h.FailurePolicy),
				MatchPolicy:             ptr.To(matchPolicy),
				NamespaceSelector:       NamespaceSelector(t.Namespace),
				ObjectSelector:          &metav1.LabelSelector{},
				SideEffects:             ptr.To(h.SideEffects),
				TimeoutSeconds:          ptr.To(h.TimeoutSeconds),
				AdmissionReviewVersions: []string{"v1"},
			})
		case module.Mutating:
			if len(h.Rules) == 0 {
				continue
			}
			out.Mutating.Webhooks = append(out.Mutating.Webhooks, admissionregistrationv1.MutatingWebhook{
				Name:                    h.Name,
				ClientConfig:            t.clientConfig(h.Path),
				Rules:                   h.Rules,
				FailurePolicy:           ptr.To(h.FailurePolicy),
				MatchPolicy:             ptr.To(matchPolicy),
				NamespaceSelector:       NamespaceSelector(t.Namespace),
				ObjectSelector:          &metav1.LabelSelector{},
				SideEffects:             ptr.To(h.SideEffects),
				TimeoutSeconds:          ptr.To(h.TimeoutSeconds),
				AdmissionReviewVersions: []string{"v1"},
				ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
			})
		case module.Conversion:
			cc := t.clientConfig(h.Path)
			conv := &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: cc.URL, CABundle: cc.CABundle},
					ConversionReviewVersions: []string{"v1"},
				},
			}
			if cc.Service != nil {
				conv.Webhook.ClientConfig.Service = &apiextensionsv1.ServiceReference{
					Namespace: cc.Service.Namespace, Name: cc.Service.Name, Path: cc.Service.Path, Port: cc.Service.Port,
				}
			}
			for _, crd := range h.CRDs {
				out.Conversions[crd] = conv
			}
		}
	}
	return out
}

func ownedLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "gatehouse"}
}

// Apply creates or replaces the rendered configurations and patches the CRDs'
// conversion stanzas. An empty configuration is deleted rather than left
// behind with stale webhooks.
func Apply(ctx context.Context, c client.Client, r *Rendered) error {
	if err := upsert(ctx, c, r.Validating, len(r.Validating.Webhooks) == 0); err != nil {
		return err
	}
	if err := upsert(ctx, c, r.Mutating, len(r.Mutating.Webhooks) == 0); err != nil {
		return err
	}
	for name, conv := range r.Conversions {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return fmt.Errorf("conversion webhook for CRD %s: %w", name, err)
		}
		patch := client.MergeFrom(crd.DeepCopy())
		crd.Spec.Conversion = conv
		if err := c.Patch(ctx, crd, patch); err != nil {
			return fmt.Errorf("set conversion webhook on CRD %s: %w", name, err)
		}
	}
	return nil
}

func upsert(ctx context.Context, c client.Client, desired client.Object, empty bool) error {
	existing := desired.DeepCopyObject().(client.Object)
	err := c.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	switch {
	case apierrors.IsNotFound(err):
		if empty {
			return nil
		}
		return c.Create(ctx, desired)
	case err != nil:
		return err
	case empty:
		return client.IgnoreNotFound(c.Delete(ctx, existing))
	}
	desired.SetResourceVersion(existing.GetResourceVersion())
	return c.Update(ctx, desired)
}
