package spec

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation/field"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

// hapticDefaultEngine is the engine a haptic config without
// templatingSettings.engine uses: haptic renders Scriggo.
const HapticDefaultEngine = "scriggo"

// CompileHaptic compiles a haptic config as it is: its spec in
// Gatehouse's terms (FromHaptic), its tests under haptic's dialect.
func CompileHaptic(in *hapticv1alpha1.HAProxyTemplateConfigSpec, compile TemplateCompiler) (*Compiled, field.ErrorList) {
	spec, extras, errs := FromHaptic(in)
	if len(errs) > 0 {
		return nil, errs
	}
	return compileSpec(spec, extras, compile)
}

// FromHaptic reads haptic's spec as Gatehouse's: the same fields where
// both have them, selectors parsed from kubectl's syntax, and the rest in
// Extras. Its errors name haptic's fields. The controller's own
// fields (credentialsSecretRef, podSelector, dataplane's deployment
// settings, controller, logging) are not read.
func FromHaptic(in *hapticv1alpha1.HAProxyTemplateConfigSpec) (*gatehousev1alpha1.HAProxyTemplateConfigSpec, Extras, field.ErrorList) {
	root := field.NewPath("spec")
	var errs field.ErrorList
	extras := Extras{Dialect: suite.DialectHaptic, PostProcessing: map[string][]render.PostProcessor{}, TestExtraContext: map[string]map[string]any{}, onDemand: map[string]bool{},
		testCurrentConfig: map[string]string{}, testHTTPResources: map[string]map[string]string{}}
	out := &gatehousev1alpha1.HAProxyTemplateConfigSpec{
		WatchedResources:             make(map[string]gatehousev1alpha1.WatchedResource, len(in.WatchedResources)),
		WatchedResourcesIgnoreFields: in.WatchedResourcesIgnoreFields,
		TemplatingSettings: gatehousev1alpha1.TemplatingSettings{
			Engine:       in.TemplatingSettings.Engine,
			ExtraContext: in.TemplatingSettings.ExtraContext,
		},
	}
	if out.TemplatingSettings.Engine == "" {
		out.TemplatingSettings.Engine = HapticDefaultEngine
	}
	for name, w := range in.WatchedResources {
		path := root.Child("watchedResources").Key(name)
		converted := gatehousev1alpha1.WatchedResource{
			APIVersion:              w.APIVersion,
			Resources:               w.Resources,
			IndexBy:                 w.IndexBy,
			FieldSelector:           w.FieldSelector,
			EnableValidationWebhook: w.EnableValidationWebhook,
		}
		var err error
		if converted.LabelSelector, err = SelectorOf(w.LabelSelector); err != nil {
			errs = append(errs, field.Invalid(path.Child("labelSelector"), w.LabelSelector, err.Error()))
		}
		if converted.NamespaceSelector, err = SelectorOf(w.NamespaceSelector); err != nil {
			errs = append(errs, field.Invalid(path.Child("namespaceSelector"), w.NamespaceSelector, err.Error()))
		}
		switch w.Store {
		case "", "full":
		case "on-demand":
			extras.onDemand[name] = true
		default:
			errs = append(errs, field.NotSupported(path.Child("store"), w.Store, []string{"full", "on-demand"}))
		}
		out.WatchedResources[name] = converted
	}

	if len(in.TemplateSnippets) > 0 {
		out.TemplateSnippets = make(map[string]gatehousev1alpha1.Template, len(in.TemplateSnippets))
		for name, s := range in.TemplateSnippets {
			out.TemplateSnippets[name] = gatehousev1alpha1.Template{Template: s.Template}
		}
	}
	out.HAProxyConfig = gatehousev1alpha1.Template{Template: in.HAProxyConfig.Template}
	errs = append(errs, postProcessingOf(root.Child("haproxyConfig"), "haproxyConfig", "", in.HAProxyConfig, extras.PostProcessing)...)
	for _, outputs := range []struct {
		kind string
		in   map[string]hapticv1alpha1.Template
		out  *map[string]gatehousev1alpha1.Template
	}{{"maps", in.Maps, &out.Maps}, {"files", in.Files, &out.Files}, {"sslCertificates", in.SSLCertificates, &out.SSLCertificates}} {
		if len(outputs.in) == 0 {
			continue
		}
		*outputs.out = make(map[string]gatehousev1alpha1.Template, len(outputs.in))
		for name, t := range outputs.in {
			(*outputs.out)[name] = gatehousev1alpha1.Template{Template: t.Template}
			errs = append(errs, postProcessingOf(root.Child(outputs.kind).Key(name), outputs.kind, name, t, extras.PostProcessing)...)
		}
	}

	if len(in.ValidationTests) > 0 {
		out.ValidationTests = make(map[string]gatehousev1alpha1.ValidationTest, len(in.ValidationTests))
	}
	for name, t := range in.ValidationTests {
		path := root.Child("validationTests").Key(name)
		test := gatehousev1alpha1.ValidationTest{Description: t.Description, Fixtures: t.Fixtures}
		for _, a := range t.Assertions {
			test.Assertions = append(test.Assertions, gatehousev1alpha1.Assertion{
				Type: gatehousev1alpha1.AssertionType(a.Type), Description: a.Description, Target: a.Target,
				Pattern: a.Pattern, Expected: a.Expected, JSONPath: a.JSONPath, Patterns: a.Patterns,
			})
		}
		out.ValidationTests[name] = test
		if t.ExtraContext != nil {
			extra, err := objectOf(t.ExtraContext)
			if err != nil {
				errs = append(errs, field.Invalid(path.Child("extraContext"), "", err.Error()))
			}
			extras.TestExtraContext[name] = extra
		}
		if t.CurrentConfig != "" {
			extras.testCurrentConfig[name] = t.CurrentConfig
		}
		if len(t.HTTPResources) > 0 {
			resources := make(map[string]string, len(t.HTTPResources))
			for i, r := range t.HTTPResources {
				if _, dup := resources[r.URL]; dup {
					errs = append(errs, field.Duplicate(path.Child("httpResources").Index(i).Child("url"), r.URL))
				}
				resources[r.URL] = r.Content
			}
			extras.testHTTPResources[name] = resources
		}
	}
	return out, extras, errs
}

// SelectorOf parses a label selector in kubectl's syntax, as haptic's
// controller does (labels.Parse), into the API's form ("" selects
// everything: nil). "!=" is NotIn one value; gt and lt, which the API form
// cannot say, are refused.
func SelectorOf(s string) (*metav1.LabelSelector, error) {
	if s == "" {
		return nil, nil
	}
	parsed, err := labels.Parse(s)
	if err != nil {
		return nil, err
	}
	requirements, _ := parsed.Requirements()
	out := &metav1.LabelSelector{}
	for _, r := range requirements {
		values := r.Values().List()
		var op metav1.LabelSelectorOperator
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			op = metav1.LabelSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			op = metav1.LabelSelectorOpNotIn
		case selection.Exists:
			op = metav1.LabelSelectorOpExists
		case selection.DoesNotExist:
			op = metav1.LabelSelectorOpDoesNotExist
		default:
			return nil, fmt.Errorf("%q: the operator %s cannot be watched (a label selector's API form has In, NotIn, Exists and DoesNotExist)", r.String(), r.Operator())
		}
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op, Values: values})
	}
	return out, nil
}

// postProcessingOf adds t's post-processors to into, under the output's
// template name; haptic's regex_replace takes params pattern and replace.
func postProcessingOf(path *field.Path, kind, name string, t hapticv1alpha1.Template, into map[string][]render.PostProcessor) field.ErrorList {
	var errs field.ErrorList
	for i, p := range t.PostProcessing {
		pp := path.Child("postProcessing").Index(i)
		if p.Type != render.PostProcessorRegexReplace {
			errs = append(errs, field.NotSupported(pp.Child("type"), p.Type, []string{render.PostProcessorRegexReplace}))
			continue
		}
		pattern, ok := p.Params["pattern"]
		if !ok {
			errs = append(errs, field.Required(pp.Child("params", "pattern"), "regex_replace needs a pattern"))
			continue
		}
		output := render.OutputTemplateName(kind, name)
		into[output] = append(into[output], render.PostProcessor{Type: p.Type, Pattern: pattern, Replace: p.Params["replace"]})
	}
	return errs
}

func objectOf(raw *apiextensionsv1.JSON) (map[string]any, error) {
	var out map[string]any
	if err := json.Unmarshal(raw.Raw, &out); err != nil {
		return nil, fmt.Errorf("must be an object: %w", err)
	}
	return out, nil
}
