package webhookconfig

import (
	"slices"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// DefaultInstance names the configurations of an install that chose no
// name of its own (config/, a process started by hand).
const DefaultInstance = "gatehouse"

// Names of the configurations of the DefaultInstance.
const (
	ValidatingName = DefaultInstance + "-validating"
	MutatingName   = DefaultInstance + "-mutating"
)

// InstanceLabel carries the install's name on everything Gatehouse writes at
// run time, so that `gatehouse uninstall` (and a person) finds exactly one
// install's objects among several installs' in one cluster.
const InstanceLabel = "gatehouse.dev/instance"

// ConversionOwnerAnnotation names the install whose webhook a CRD's
// conversion stanza points at. Gatehouse writes it with the stanza; a
// stanza another install or another owner wrote is never taken over
// (Reconciler), and `gatehouse uninstall` resets only its own.
const ConversionOwnerAnnotation = "gatehouse.dev/conversion-owner"

// ConfigurationNames are the names of an install's validating and mutating
// webhook configurations: <instance>-validating and <instance>-mutating.
func ConfigurationNames(instance string) (validating, mutating string) {
	if instance == "" {
		instance = DefaultInstance
	}
	return instance + "-validating", instance + "-mutating"
}

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
	// Instance names the configurations (ConfigurationNames) and labels
	// them (InstanceLabel). Empty: DefaultInstance.
	Instance string
	// Labels and Annotations are added to both configurations (Argo CD's
	// tracking, a platform's admission enforcer exclusions, say); the
	// labels Gatehouse finds its configurations by win over a namesake.
	// Being applied, they are repaired with the rest.
	Labels, Annotations map[string]string
}

// meta is the configurations' metadata named name.
func (t Target) meta(name string) metav1.ObjectMeta {
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	for k, v := range ownedLabels(t.Instance) {
		labels[k] = v
	}
	m := metav1.ObjectMeta{Name: name, Labels: labels}
	if len(t.Annotations) > 0 {
		m.Annotations = map[string]string{}
		for k, v := range t.Annotations {
			m.Annotations[k] = v
		}
	}
	return m
}

func (t Target) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: t.CABundle}
	if t.URL != "" {
		cc.URL = ptr.To(t.URL + path)
		return cc
	}
	svc := *t.Service
	svc.Path = ptr.To(path)
	if svc.Port == nil {
		svc.Port = ptr.To[int32](443)
	}
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

// Render builds the configurations for hooks. Admission webhooks without
// rules are left out. Everything but the client configuration and the
// always-excluded namespaces comes from the declaration; the fields the API
// server would default are set explicitly, so that a rendered entry equals
// what the API server stores.
func Render(hooks []module.Webhook, t Target) *Rendered {
	validating, mutating := ConfigurationNames(t.Instance)
	out := &Rendered{
		Validating:  &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: t.meta(validating)},
		Mutating:    &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: t.meta(mutating)},
		Conversions: map[string]*apiextensionsv1.CustomResourceConversion{},
	}
	for _, h := range hooks {
		switch h.Type {
		case module.Validating:
			if len(h.Rules) == 0 {
				continue
			}
			out.Validating.Webhooks = append(out.Validating.Webhooks, admissionregistrationv1.ValidatingWebhook{
				Name:                    h.Name,
				ClientConfig:            t.clientConfig(h.Path),
				Rules:                   rules(h.Rules),
				FailurePolicy:           ptr.To(h.FailurePolicy),
				MatchPolicy:             ptr.To(matchPolicy(h)),
				NamespaceSelector:       namespaceSelector(h.NamespaceSelector, t.Namespace),
				ObjectSelector:          objectSelector(h.ObjectSelector),
				SideEffects:             ptr.To(h.SideEffects),
				TimeoutSeconds:          ptr.To(h.TimeoutSeconds),
				AdmissionReviewVersions: []string{"v1"},
				MatchConditions:         h.MatchConditions,
			})
		case module.Mutating:
			if len(h.Rules) == 0 {
				continue
			}
			reinvocation := h.ReinvocationPolicy
			if reinvocation == "" {
				reinvocation = admissionregistrationv1.NeverReinvocationPolicy
			}
			out.Mutating.Webhooks = append(out.Mutating.Webhooks, admissionregistrationv1.MutatingWebhook{
				Name:                    h.Name,
				ClientConfig:            t.clientConfig(h.Path),
				Rules:                   rules(h.Rules),
				FailurePolicy:           ptr.To(h.FailurePolicy),
				MatchPolicy:             ptr.To(matchPolicy(h)),
				NamespaceSelector:       namespaceSelector(h.NamespaceSelector, t.Namespace),
				ObjectSelector:          objectSelector(h.ObjectSelector),
				SideEffects:             ptr.To(h.SideEffects),
				TimeoutSeconds:          ptr.To(h.TimeoutSeconds),
				AdmissionReviewVersions: []string{"v1"},
				ReinvocationPolicy:      ptr.To(reinvocation),
				MatchConditions:         h.MatchConditions,
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

func matchPolicy(h module.Webhook) admissionregistrationv1.MatchPolicyType {
	if h.MatchPolicy == "" {
		return admissionregistrationv1.Equivalent
	}
	return h.MatchPolicy
}

// rules copies the declared rules with the scope the API server defaults.
func rules(in []admissionregistrationv1.RuleWithOperations) []admissionregistrationv1.RuleWithOperations {
	out := make([]admissionregistrationv1.RuleWithOperations, len(in))
	for i, r := range in {
		out[i] = *r.DeepCopy()
		if out[i].Scope == nil {
			out[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
		}
	}
	return out
}

// namespaceSelector adds the exclusion of the always-excluded namespaces and
// own to what the module declared. Both must match, so a module can narrow
// its scope but never widen it to the excluded namespaces. Every exclusion
// by name (kubernetes.io/metadata.name NotIn, the module's own and the
// operator's namespaceExclusions among them) is folded into one last
// expression, sorted: NotIn A and NotIn B is NotIn A∪B, and one list is what
// a person reads, and what the chart's static mode renders alike.
func namespaceSelector(declared *metav1.LabelSelector, own string) *metav1.LabelSelector {
	out := &metav1.LabelSelector{}
	if declared != nil {
		out = declared.DeepCopy()
	}
	excluded := NamespaceSelector(own).MatchExpressions[0]
	kept := out.MatchExpressions[:0]
	for _, e := range out.MatchExpressions {
		if e.Key == excluded.Key && e.Operator == metav1.LabelSelectorOpNotIn {
			excluded.Values = append(excluded.Values, e.Values...)
			continue
		}
		kept = append(kept, e)
	}
	slices.Sort(excluded.Values)
	excluded.Values = slices.Compact(excluded.Values)
	out.MatchExpressions = append(kept, excluded)
	return out
}

func objectSelector(declared *metav1.LabelSelector) *metav1.LabelSelector {
	if declared == nil {
		return &metav1.LabelSelector{}
	}
	return declared.DeepCopy()
}

func ownedLabels(instance string) map[string]string {
	if instance == "" {
		instance = DefaultInstance
	}
	return map[string]string{"app.kubernetes.io/managed-by": "gatehouse", InstanceLabel: instance}
}
