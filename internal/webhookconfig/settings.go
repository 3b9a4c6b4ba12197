package webhookconfig

import (
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// Settings are an operator's changes to every admission webhook of one
// module (the --config file's modules.<name>.webhook, the chart's values of
// the same path). Unset fields keep what the module declares. They apply
// alike in managed mode (the reconciler renders them, and its drift repair
// keeps them) and in the chart's static mode (templates/webhooks.yaml).
type Settings struct {
	// FailurePolicy replaces the declared failurePolicy: Fail or Ignore.
	FailurePolicy *admissionregistrationv1.FailurePolicyType `json:"failurePolicy,omitempty"`
	// TimeoutSeconds replaces the declared timeout, 1 to 30.
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
	// NamespaceExclusions are namespaces the module's webhooks never see,
	// beyond kube-system, kube-node-lease and Gatehouse's own.
	NamespaceExclusions []string `json:"namespaceExclusions,omitempty"`
	// ObjectSelector narrows the objects the module's webhooks see by their
	// labels, AND-ed with what a webhook declares. Whoever may set a label
	// on an object decides whether the webhook sees it.
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
}

// Empty is true when the settings change nothing.
func (s *Settings) Empty() bool {
	return s == nil || (s.FailurePolicy == nil && s.TimeoutSeconds == nil && len(s.NamespaceExclusions) == 0 && s.ObjectSelector == nil)
}

// Validate checks the settings on their own, each rule a function of its
// own; path is where they were read (modules.<name>.webhook).
func (s *Settings) Validate(path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, validateFailurePolicy(s.FailurePolicy, path.Child("failurePolicy"))...)
	errs = append(errs, validateTimeout(s.TimeoutSeconds, path.Child("timeoutSeconds"))...)
	errs = append(errs, validateNamespaceExclusions(s.NamespaceExclusions, path.Child("namespaceExclusions"))...)
	errs = append(errs, validateObjectSelector(s.ObjectSelector, path.Child("objectSelector"))...)
	return errs
}

func validateFailurePolicy(p *admissionregistrationv1.FailurePolicyType, path *field.Path) field.ErrorList {
	if p == nil || *p == admissionregistrationv1.Fail || *p == admissionregistrationv1.Ignore {
		return nil
	}
	return field.ErrorList{field.NotSupported(path, *p, []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)})}
}

// validateTimeout: the API server's own bounds for a webhook's timeout.
func validateTimeout(t *int32, path *field.Path) field.ErrorList {
	if t == nil || (*t >= 1 && *t <= 30) {
		return nil
	}
	return field.ErrorList{field.Invalid(path, *t, "must be between 1 and 30 seconds")}
}

func validateNamespaceExclusions(names []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, name := range names {
		for _, msg := range validation.IsDNS1123Label(name) {
			errs = append(errs, field.Invalid(path.Index(i), name, "not a namespace name: "+msg))
		}
	}
	return errs
}

func validateObjectSelector(sel *metav1.LabelSelector, path *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path)
}

// Apply returns hook with the settings applied, or an error when the
// webhook locks a setting (module.Webhook.Locked) or the object selectors
// contradict each other. Conversion webhooks are returned unchanged. The
// namespace exclusions are added as a NotIn expression, which Render folds
// into the exclusion of the always-excluded namespaces.
func (s *Settings) Apply(hook module.Webhook, path *field.Path) (module.Webhook, error) {
	if s.Empty() || hook.Type == module.Conversion {
		return hook, nil
	}
	var errs field.ErrorList
	if s.FailurePolicy != nil && *s.FailurePolicy != hook.FailurePolicy {
		if why := hook.Locked.FailurePolicy; why != "" {
			errs = append(errs, field.Forbidden(path.Child("failurePolicy"),
				fmt.Sprintf("webhook %s must stay %s: %s", hook.Name, hook.FailurePolicy, why)))
		} else {
			hook.FailurePolicy = *s.FailurePolicy
		}
	}
	if s.TimeoutSeconds != nil {
		hook.TimeoutSeconds = *s.TimeoutSeconds
	}
	if len(s.NamespaceExclusions) > 0 && hook.Locked.NamespaceExclusions != "" {
		errs = append(errs, field.Forbidden(path.Child("namespaceExclusions"),
			fmt.Sprintf("webhook %s excludes only kube-system, kube-node-lease and Gatehouse's namespace: %s", hook.Name, hook.Locked.NamespaceExclusions)))
	} else if len(s.NamespaceExclusions) > 0 {
		sel := &metav1.LabelSelector{}
		if hook.NamespaceSelector != nil {
			sel = hook.NamespaceSelector.DeepCopy()
		}
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: append([]string(nil), s.NamespaceExclusions...),
		})
		hook.NamespaceSelector = sel
	}
	if s.ObjectSelector != nil {
		if why := hook.Locked.ObjectSelector; why != "" {
			errs = append(errs, field.Forbidden(path.Child("objectSelector"),
				fmt.Sprintf("webhook %s takes no objectSelector: %s", hook.Name, why)))
		} else {
			merged, err := mergeSelectors(hook.ObjectSelector, s.ObjectSelector)
			if err != nil {
				errs = append(errs, field.Invalid(path.Child("objectSelector"), s.ObjectSelector,
					fmt.Sprintf("webhook %s: %v", hook.Name, err)))
			}
			hook.ObjectSelector = merged
		}
	}
	if len(errs) > 0 {
		return hook, errs.ToAggregate()
	}
	return hook, nil
}

// NamespaceNameLabel is the label the API server sets on every namespace to
// its name; users cannot remove it.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// mergeSelectors ANDs two selectors; the same label required with two
// values would match nothing, silently switching the webhook off.
func mergeSelectors(declared, added *metav1.LabelSelector) (*metav1.LabelSelector, error) {
	out := added.DeepCopy()
	if declared == nil {
		return out, nil
	}
	var conflicts []string
	for k, v := range declared.MatchLabels {
		if have, ok := out.MatchLabels[k]; ok && have != v {
			conflicts = append(conflicts, fmt.Sprintf("%s=%s (declared %s=%s)", k, have, k, v))
			continue
		}
		if out.MatchLabels == nil {
			out.MatchLabels = map[string]string{}
		}
		out.MatchLabels[k] = v
	}
	out.MatchExpressions = append(declared.DeepCopy().MatchExpressions, out.MatchExpressions...)
	if len(conflicts) > 0 {
		sort.Strings(conflicts)
		return out, fmt.Errorf("contradicts the webhook's own selector, it would match nothing: %s", strings.Join(conflicts, ", "))
	}
	return out, nil
}
