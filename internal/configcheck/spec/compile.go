package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/redact"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/renderproc"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

// Defaults of a config's validation webhook.
const (
	defaultTimeoutSeconds = 10
	defaultFailurePolicy  = admissionregistrationv1.Fail
)

// compiled is an HAProxyTemplateConfig made ready to render: everything
// that can be derived from its spec alone, without the cluster. It is
// immutable once built.
type Compiled struct {
	// words are the config's own (every string of its spec): the
	// author's, kept in what a tenant is shown of a render failure
	// (redact.RenderFailure).
	Words        redact.Words
	Renderer     render.Renderer
	Watched      map[string]*Watched
	Tests        map[string]suite.Test
	ExtraContext map[string]any
	Policy       admissionregistrationv1.FailurePolicyType
	Timeout      int32
	// dialect is whose test semantics the config's tests follow (haptic's
	// for haptic's kind).
	Dialect suite.Dialect
}

// Extras are what a config of another kind (haptic's) carries that
// Gatehouse's spec has no field for.
type Extras struct {
	Dialect suite.Dialect
	// postProcessing is render.Templates.PostProcessing.
	PostProcessing map[string][]render.PostProcessor
	// testExtraContext is each test's extraContext, by test name.
	TestExtraContext map[string]map[string]any
	// testCurrentConfig and testHTTPResources are each test's
	// currentConfig and httpResources (URL to content), by test name.
	testCurrentConfig map[string]string
	testHTTPResources map[string]map[string]string
	// onDemand are the watched resources haptic reads on demand (store:
	// on-demand): its controller fetches a Secret when a template asks
	// for it, rather than caching every Secret. Only the offline run
	// reads haptic's kind, from a test's fixtures, so a Secrets watch
	// named here needs no label selector; a cluster following haptic's
	// kind would need the on-demand fetch first.
	onDemand map[string]bool
}

// Watched is one watched resource as the config declares it.
type Watched struct {
	Name              string
	GVR               schema.GroupVersionResource
	IndexBy           []string
	Indexer           *render.Indexer
	Labels            labels.Selector
	LabelSelector     *metav1.LabelSelector
	fields            FieldSelector
	Namespaces        labels.Selector // nil: every namespace
	NamespaceSelector *metav1.LabelSelector
	Webhook           bool
	// onDemand: haptic's store: on-demand (Extras.onDemand).
	OnDemand bool
	// ignore are the fields removed from every object before it is stored
	// or overlaid (watchedResourcesIgnoreFields and the fields that change
	// on every write).
	Ignore []render.FieldPath
	// bounds bound each object (bounds.go).
	Bounds Bounds
}

// AlwaysIgnored change on every write (resourceVersion) or are large and
// never templated (managedFields): no template sees them, so a change to
// them alone never alters a rendering.
var AlwaysIgnored = []string{"metadata.managedFields", "metadata.resourceVersion"}

// stored is obj as the store holds it: normalized (a copy) and without the
// ignored fields.
func (w *Watched) Stored(obj map[string]any) map[string]any {
	out := render.NormalizeObject(obj)
	for _, p := range w.Ignore {
		p.Delete(out)
	}
	return out
}

// TemplateCompiler turns a config's templates into a Renderer; its error is
// a *render.CompileError. Gatehouse's is its render worker pool's
// (renderproc.Pool.Compile): a template is a program its config's author
// wrote, so it runs only in a confined worker with a memory budget, never
// in the server.
type TemplateCompiler func(templates render.Templates, engine string) (render.Renderer, error)

// Compile validates spec and compiles it with compile. It is pure:
// the webhook for configs, the reconciler and the offline CLI all call it.
func Compile(spec *gatehousev1alpha1.HAProxyTemplateConfigSpec, compile TemplateCompiler) (*Compiled, field.ErrorList) {
	// Gatehouse's kind takes gotemplate alone, as its CRD says; checked
	// here too, since a review posted to the port never met the CRD.
	// Scriggo is haptic's kind's engine (haptic.go).
	if engine := spec.TemplatingSettings.Engine; engine != "" && engine != render.EngineGoTemplate {
		return nil, field.ErrorList{field.NotSupported(field.NewPath("spec", "templatingSettings", "engine"), engine, []string{render.EngineGoTemplate})}
	}
	return compileSpec(spec, Extras{}, compile)
}

// compileSpec is Compile with what another kind adds (haptic.go).
func compileSpec(spec *gatehousev1alpha1.HAProxyTemplateConfigSpec, extras Extras, compile TemplateCompiler) (*Compiled, field.ErrorList) {
	root := field.NewPath("spec")
	c := &Compiled{Policy: defaultFailurePolicy, Timeout: defaultTimeoutSeconds, Dialect: extras.Dialect}
	var errs field.ErrorList
	watched, werrs := compileWatched(root.Child("watchedResources"), spec.WatchedResources, extras.onDemand)
	errs = append(errs, werrs...)
	ignore, ierrs := compileIgnoreFields(root.Child("watchedResourcesIgnoreFields"), spec.WatchedResourcesIgnoreFields)
	errs = append(errs, ierrs...)
	for _, w := range watched {
		w.Ignore = ignore
	}
	c.Watched = watched
	errs = append(errs, validateOutputNames(root, spec)...)
	errs = append(errs, validateWebhookSettings(root.Child("validationWebhook"), spec.ValidationWebhook)...)
	if p := spec.ValidationWebhook.FailurePolicy; p != "" {
		c.Policy = p
	}
	if t := spec.ValidationWebhook.TimeoutSeconds; t != 0 {
		c.Timeout = t
	}
	extra, err := decodeExtraContext(spec.TemplatingSettings.ExtraContext)
	if err != nil {
		errs = append(errs, field.Invalid(root.Child("templatingSettings", "extraContext"), "", err.Error()))
	}
	c.ExtraContext = extra
	renderer, rerr := compileTemplates(root, spec, extras.PostProcessing, compile)
	errs = append(errs, rerr...)
	c.Renderer = renderer
	tests, terrs := convertTests(root.Child("validationTests"), spec.ValidationTests)
	errs = append(errs, terrs...)
	for name, test := range tests {
		test.ExtraContext = extras.TestExtraContext[name]
		test.CurrentConfig = extras.testCurrentConfig[name]
		test.HTTPResources = extras.testHTTPResources[name]
		tests[name] = test
	}
	if len(werrs) == 0 {
		indexBy := make(map[string][]string, len(watched))
		for name, w := range watched {
			indexBy[name] = w.IndexBy
		}
		errs = append(errs, suite.ValidateDialect(tests, indexBy, extras.Dialect)...)
	}
	c.Tests = tests
	if len(errs) > 0 {
		return nil, errs
	}
	c.Words = specWords(spec)
	return c, nil
}

func compileWatched(path *field.Path, specs map[string]gatehousev1alpha1.WatchedResource, onDemand map[string]bool) (map[string]*Watched, field.ErrorList) {
	var errs field.ErrorList
	if len(specs) == 0 {
		errs = append(errs, field.Required(path, "at least one watched resource"))
	}
	out := make(map[string]*Watched, len(specs))
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		w, werrs := CompileWatched(path.Key(name), name, specs[name], onDemand[name])
		errs = append(errs, werrs...)
		if w != nil {
			out[name] = w
		}
	}
	return out, errs
}

func compileIgnoreFields(path *field.Path, fields []string) ([]render.FieldPath, field.ErrorList) {
	var errs field.ErrorList
	var out []render.FieldPath
	for i, f := range append(append([]string(nil), AlwaysIgnored...), fields...) {
		p, err := render.ParseFieldPath(f)
		if err != nil {
			errs = append(errs, field.Invalid(path.Index(i-len(AlwaysIgnored)), f, err.Error()))
			continue
		}
		out = append(out, p)
	}
	return out, errs
}

// templateName is what a watched resource may be called: templates reach it
// as .resources.<name>, so it must be a Go template field name.
var TemplateName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func CompileWatched(path *field.Path, name string, spec gatehousev1alpha1.WatchedResource, onDemand bool) (*Watched, field.ErrorList) {
	var errs field.ErrorList
	if !TemplateName.MatchString(name) {
		errs = append(errs, field.Invalid(path, name, "a watched resource's name is used as .resources.<name> in templates: letters, digits and _ only, not starting with a digit"))
	}
	gv, err := schema.ParseGroupVersion(spec.APIVersion)
	if err != nil || gv.Version == "" {
		errs = append(errs, field.Invalid(path.Child("apiVersion"), spec.APIVersion, "want group/version, or v1 for the core group"))
	}
	w := &Watched{Name: name, GVR: gv.WithResource(spec.Resources), Webhook: spec.EnableValidationWebhook,
		LabelSelector: spec.LabelSelector, NamespaceSelector: spec.NamespaceSelector, Bounds: CompileBounds(spec)}
	w.IndexBy = spec.IndexBy
	if len(w.IndexBy) == 0 {
		w.IndexBy = []string{"metadata.namespace", "metadata.name"}
	}
	if w.Indexer, err = render.NewIndexer(w.IndexBy); err != nil {
		errs = append(errs, field.Invalid(path.Child("indexBy"), spec.IndexBy, err.Error()))
	}
	w.Labels = labels.Everything()
	if spec.LabelSelector != nil {
		if w.Labels, err = metav1.LabelSelectorAsSelector(spec.LabelSelector); err != nil {
			errs = append(errs, field.Invalid(path.Child("labelSelector"), spec.LabelSelector, err.Error()))
		}
	}
	if spec.NamespaceSelector != nil {
		if w.Namespaces, err = metav1.LabelSelectorAsSelector(spec.NamespaceSelector); err != nil {
			errs = append(errs, field.Invalid(path.Child("namespaceSelector"), spec.NamespaceSelector, err.Error()))
		}
	}
	if w.fields, err = ParseFieldSelector(spec.FieldSelector); err != nil {
		errs = append(errs, field.Invalid(path.Child("fieldSelector"), spec.FieldSelector, err.Error()))
	}
	w.OnDemand = onDemand
	if onDemand {
		errs = append(errs, validateOnDemand(path, w)...)
	} else {
		errs = append(errs, validateSecretsSelected(path, w)...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return w, nil
}

// validateOnDemand checks a watched resource of haptic's store: on-demand
// (ondemand.go): its objects are fetched one at a time, by the namespace
// and name a template asks for, so it is indexed by exactly those, and it
// has no webhook (Gatehouse does not hold its objects to judge them by).
func validateOnDemand(path *field.Path, w *Watched) field.ErrorList {
	var errs field.ErrorList
	if !slices.Equal(w.IndexBy, []string{"metadata.namespace", "metadata.name"}) {
		errs = append(errs, field.Invalid(path.Child("indexBy"), w.IndexBy, "store: on-demand fetches one object by namespace and name: indexBy must be [metadata.namespace, metadata.name]"))
	}
	if w.Webhook {
		errs = append(errs, field.Invalid(path.Child("enableValidationWebhook"), true, "store: on-demand holds only the objects templates asked for, so its changes cannot be judged: set enableValidationWebhook to false"))
	}
	return errs
}

// validateSecretsSelected refuses to watch every Secret of a cluster: a
// Secret watched resource needs a label selector with a positive
// requirement, which scopes its cache in the API server. A namespaceSelector
// is not enough: it filters objects after they are cached. A selector of
// NotIn, != or DoesNotExist alone is met by every unlabelled Secret, so it
// is no narrowing (see Narrows).
func validateSecretsSelected(path *field.Path, w *Watched) field.ErrorList {
	if w.GVR.Group != "" || !isSecrets(w.GVR.Resource) {
		return nil
	}
	if w.Labels == nil {
		return nil // the labelSelector does not parse, which is reported
	}
	if !Narrows(w.Labels) {
		return field.ErrorList{field.Required(path.Child("labelSelector"),
			"watching Secrets needs a labelSelector with a positive requirement (matchLabels, or an In or Exists expression; NotIn and DoesNotExist alone match every unlabelled Secret): Gatehouse never caches every Secret of a cluster (a namespaceSelector filters only after caching)")}
	}
	return nil
}

// isSecrets says whether a core-group resource name means Secrets: the API
// server's discovery resolves the singular and any case too, so "Secret"
// must not slip past the Secrets rule.
func isSecrets(resource string) bool {
	r := strings.ToLower(resource)
	return r == "secrets" || r == "secret"
}

// outputName is what a map, file or certificate may be called: its name is
// part of a ConfigMap or Secret key when the rendering is published.
var outputName = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

func validateOutputNames(root *field.Path, spec *gatehousev1alpha1.HAProxyTemplateConfigSpec) field.ErrorList {
	var errs field.ErrorList
	for kind, templates := range map[string]map[string]gatehousev1alpha1.Template{
		"maps": spec.Maps, "files": spec.Files, "sslCertificates": spec.SSLCertificates,
	} {
		for name := range templates {
			if !outputName.MatchString(name) || name == "." || name == ".." || len(name) > 200 {
				errs = append(errs, field.Invalid(root.Child(kind).Key(name), name,
					"a file name of letters, digits, '-', '_' and '.', at most 200 characters (it becomes a ConfigMap or Secret key)"))
			}
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

func validateWebhookSettings(path *field.Path, w gatehousev1alpha1.ValidationWebhook) field.ErrorList {
	var errs field.ErrorList
	switch w.FailurePolicy {
	case "", admissionregistrationv1.Fail, admissionregistrationv1.Ignore:
	default:
		errs = append(errs, field.NotSupported(path.Child("failurePolicy"), w.FailurePolicy, []string{"Fail", "Ignore"}))
	}
	if w.TimeoutSeconds != 0 && (w.TimeoutSeconds < 2 || w.TimeoutSeconds > 30) {
		errs = append(errs, field.Invalid(path.Child("timeoutSeconds"), w.TimeoutSeconds, "between 2 and 30"))
	}
	return errs
}

func compileTemplates(root *field.Path, spec *gatehousev1alpha1.HAProxyTemplateConfigSpec, postProcessing map[string][]render.PostProcessor, compile TemplateCompiler) (render.Renderer, field.ErrorList) {
	if _, err := render.NewEngine(spec.TemplatingSettings.Engine); err != nil {
		return nil, field.ErrorList{field.NotSupported(root.Child("templatingSettings", "engine"), spec.TemplatingSettings.Engine, render.Engines())}
	}
	if strings.TrimSpace(spec.HAProxyConfig.Template) == "" {
		return nil, field.ErrorList{field.Required(root.Child("haproxyConfig", "template"), "the haproxy.cfg template")}
	}
	renderer, err := compile(TemplatesOf(spec, postProcessing), spec.TemplatingSettings.Engine)
	var notCompiled *renderproc.NotCompiledError
	switch {
	case errors.As(err, &notCompiled):
		// Nothing said of the templates: a caller may try again.
		return nil, field.ErrorList{field.InternalError(root, err)}
	case err != nil:
		return nil, field.ErrorList{field.Invalid(root, "", err.Error())}
	}
	return renderer, nil
}

// NotCompiled is the error of a compile that did not run to its end for a
// reason other than the templates (field.InternalError), or nil.
func NotCompiled(errs field.ErrorList) error {
	for _, e := range errs {
		if e.Type == field.ErrorTypeInternal {
			return e
		}
	}
	return nil
}

// TemplatesOf are spec's template sources with their post-processing.
func TemplatesOf(spec *gatehousev1alpha1.HAProxyTemplateConfigSpec, postProcessing map[string][]render.PostProcessor) render.Templates {
	return render.Templates{
		Snippets:        templateTexts(spec.TemplateSnippets),
		HAProxyConfig:   spec.HAProxyConfig.Template,
		Maps:            templateTexts(spec.Maps),
		Files:           templateTexts(spec.Files),
		SSLCertificates: templateTexts(spec.SSLCertificates),
		PostProcessing:  postProcessing,
	}
}

func templateTexts(in map[string]gatehousev1alpha1.Template) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for name, t := range in {
		out[name] = t.Template
	}
	return out
}

func decodeExtraContext(raw *apiextensionsv1.JSON) (map[string]any, error) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, nil
	}
	var out map[string]any
	if err := json.Unmarshal(raw.Raw, &out); err != nil {
		return nil, fmt.Errorf("extraContext must be an object: %w", err)
	}
	return out, nil
}

func convertTests(path *field.Path, in map[string]gatehousev1alpha1.ValidationTest) (map[string]suite.Test, field.ErrorList) {
	var errs field.ErrorList
	out := make(map[string]suite.Test, len(in))
	for name, t := range in {
		test := suite.Test{Name: name, Description: t.Description, Fixtures: map[string][]map[string]any{}}
		for watched, objs := range t.Fixtures {
			for i, raw := range objs {
				var obj map[string]any
				if err := json.Unmarshal(raw.Raw, &obj); err != nil || obj == nil {
					errs = append(errs, field.Invalid(path.Key(name).Child("fixtures").Key(watched).Index(i), "", "a fixture must be an object"))
					continue
				}
				test.Fixtures[watched] = append(test.Fixtures[watched], obj)
			}
		}
		for _, a := range t.Assertions {
			test.Assertions = append(test.Assertions, suite.Assertion{
				Type: string(a.Type), Description: a.Description, Target: a.Target, Pattern: a.Pattern,
				Expected: a.Expected, JSONPath: a.JSONPath, Patterns: a.Patterns,
			})
		}
		out[name] = test
	}
	return out, errs
}

// specWords are the words of every string of the spec (Compiled.Words).
func specWords(spec *gatehousev1alpha1.HAProxyTemplateConfigSpec) redact.Words {
	w := redact.Words{}
	var tree map[string]any
	if raw, err := json.Marshal(spec); err == nil && json.Unmarshal(raw, &tree) == nil {
		w.AddWordsOf(tree)
	}
	return w
}
