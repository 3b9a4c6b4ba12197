package webhookconfig

import (
	"cmp"
	"fmt"
	"slices"
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
	// MatchConditions are CEL conditions the API server evaluates before it
	// calls one of the module's webhooks, AND-ed with those the webhook
	// declares: a request is sent only when every one is true. They narrow
	// what the webhooks see as an objectSelector does, so a webhook that
	// refuses an objectSelector or namespace exclusions refuses them too.
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`
}

// Empty is true when the settings change nothing.
func (s *Settings) Empty() bool {
	return s == nil || (s.FailurePolicy == nil && s.TimeoutSeconds == nil && len(s.NamespaceExclusions) == 0 &&
		s.ObjectSelector == nil && len(s.MatchConditions) == 0)
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
	errs = append(errs, validateMatchConditions(s.MatchConditions, path.Child("matchConditions"))...)
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

// MaxMatchConditions is the API server's limit of match conditions per
// webhook, the declared ones included.
const MaxMatchConditions = 64

// validateMatchConditions checks each condition as the API server checks
// a webhook configuration's: a qualified name, unique, and an expression
// that compiles to a bool over request, object, oldObject and authorizer.
func validateMatchConditions(conds []admissionregistrationv1.MatchCondition, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conds) > MaxMatchConditions {
		errs = append(errs, field.TooMany(path, len(conds), MaxMatchConditions))
	}
	seen := map[string]bool{}
	for i, c := range conds {
		p := path.Index(i)
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "a condition is named"))
		case seen[c.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
		default:
			for _, msg := range validation.IsQualifiedName(c.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
			}
		}
		seen[c.Name] = true
		if strings.TrimSpace(c.Expression) == "" {
			errs = append(errs, field.Required(p.Child("expression"), "a CEL expression"))
		} else if err := compileMatchCondition(c); err != nil {
			errs = append(errs, field.Invalid(p.Child("expression"), c.Expression, err.Error()))
		}
	}
	return errs
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
	if len(s.MatchConditions) > 0 {
		if why := cmp.Or(hook.Locked.ObjectSelector, hook.Locked.NamespaceExclusions); why != "" {
			errs = append(errs, field.Forbidden(path.Child("matchConditions"),
				fmt.Sprintf("webhook %s takes no matchConditions: %s", hook.Name, why)))
		} else {
			conds, err := appendMatchConditions(hook.Name, hook.MatchConditions, s.MatchConditions)
			if err != nil {
				errs = append(errs, field.Invalid(path.Child("matchConditions"), len(s.MatchConditions), err.Error()))
			}
			hook.MatchConditions = conds
		}
	}
	if len(errs) > 0 {
		return hook, errs.ToAggregate()
	}
	return hook, nil
}

// appendMatchConditions ANDs the operator's conditions with the declared
// ones: a name both use, or more than the API server takes, is an error.
func appendMatchConditions(webhook string, declared, added []admissionregistrationv1.MatchCondition) ([]admissionregistrationv1.MatchCondition, error) {
	out := slices.Clone(declared)
	var clashes []string
	for _, c := range added {
		if slices.ContainsFunc(declared, func(d admissionregistrationv1.MatchCondition) bool { return d.Name == c.Name }) {
			clashes = append(clashes, c.Name)
		}
	}
	out = append(out, added...)
	if len(clashes) > 0 {
		return out, fmt.Errorf("webhook %s declares conditions named %s already", webhook, strings.Join(clashes, ", "))
	}
	if len(out) > MaxMatchConditions {
		return out, fmt.Errorf("webhook %s declares %d conditions: with these, %d, over the API server's %d", webhook, len(declared), len(out), MaxMatchConditions)
	}
	return out, nil
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
