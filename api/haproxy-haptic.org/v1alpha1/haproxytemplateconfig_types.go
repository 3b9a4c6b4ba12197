package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true

// HAProxyTemplateConfig is haptic's config: the resources its controller
// watches, the Scriggo templates rendering haproxy.cfg and its files from
// them, and validation tests.
type HAProxyTemplateConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HAProxyTemplateConfigSpec `json:"spec"`
	// Status is haptic's controller's; Gatehouse never reads or writes it.
	Status *apiextensionsv1.JSON `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// HAProxyTemplateConfigList is a list of configs.
type HAProxyTemplateConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HAProxyTemplateConfig `json:"items"`
}

// HAProxyTemplateConfigSpec is haptic's spec. Fields Gatehouse does not
// use keep their raw value (RawFields) and are ignored.
type HAProxyTemplateConfigSpec struct {
	WatchedResources             map[string]WatchedResource `json:"watchedResources"`
	WatchedResourcesIgnoreFields []string                   `json:"watchedResourcesIgnoreFields,omitempty"`
	TemplateSnippets             map[string]Snippet         `json:"templateSnippets,omitempty"`
	HAProxyConfig                Template                   `json:"haproxyConfig"`
	Maps                         map[string]Template        `json:"maps,omitempty"`
	Files                        map[string]Template        `json:"files,omitempty"`
	SSLCertificates              map[string]Template        `json:"sslCertificates,omitempty"`
	ValidationTests              map[string]ValidationTest  `json:"validationTests,omitempty"`
	TemplatingSettings           TemplatingSettings         `json:"templatingSettings,omitempty"`
	// Dataplane's directories decide the paths templates print
	// (pathResolver); the rest of it is the controller's.
	Dataplane *Dataplane `json:"dataplane,omitempty"`

	// The controller's own fields, accepted and ignored.
	CredentialsSecretRef *apiextensionsv1.JSON `json:"credentialsSecretRef,omitempty"`
	PodSelector          *apiextensionsv1.JSON `json:"podSelector,omitempty"`
	Controller           *apiextensionsv1.JSON `json:"controller,omitempty"`
	Logging              *apiextensionsv1.JSON `json:"logging,omitempty"`
}

// WatchedResource is one kind haptic watches. Unlike Gatehouse's, its
// selectors are strings in kubectl's syntax.
type WatchedResource struct {
	APIVersion              string   `json:"apiVersion"`
	Resources               string   `json:"resources"`
	IndexBy                 []string `json:"indexBy,omitempty"`
	LabelSelector           string   `json:"labelSelector,omitempty"`
	FieldSelector           string   `json:"fieldSelector,omitempty"`
	NamespaceSelector       string   `json:"namespaceSelector,omitempty"`
	EnableValidationWebhook bool     `json:"enableValidationWebhook,omitempty"`
	// Store is full or on-demand: how haptic's controller caches. Gatehouse
	// reads haptic's kind offline only, where on-demand lets a Secrets
	// watch go without the label selector Gatehouse otherwise requires
	// (its objects come from a test's fixtures).
	Store string `json:"store,omitempty"`
}

// Snippet is a template included by others.
type Snippet struct {
	Template string `json:"template"`
}

// Template is an output's template with its post-processing.
type Template struct {
	Template       string          `json:"template"`
	PostProcessing []PostProcessor `json:"postProcessing,omitempty"`
}

// PostProcessor rewrites a rendered output; haptic knows regex_replace
// (params pattern and replace, applied line by line).
type PostProcessor struct {
	Type   string            `json:"type"`
	Params map[string]string `json:"params"`
}

// ValidationTest is one of haptic's tests.
type ValidationTest struct {
	Description string                            `json:"description,omitempty"`
	Fixtures    map[string][]apiextensionsv1.JSON `json:"fixtures,omitempty"`
	Assertions  []Assertion                       `json:"assertions,omitempty"`
	// HTTPResources answer the templates' http.Fetch during the test.
	HTTPResources []HTTPResource `json:"httpResources,omitempty"`
	// CurrentConfig is an haproxy.cfg the templates see as the one
	// running (currentConfig).
	CurrentConfig string `json:"currentConfig,omitempty"`
	// ExtraContext is merged over templatingSettings.extraContext.
	ExtraContext *apiextensionsv1.JSON `json:"extraContext,omitempty"`
}

// HTTPResource is a URL's content in a test.
type HTTPResource struct {
	URL     string `json:"url"`
	Content string `json:"content"`
}

// Assertion is one check of a test.
type Assertion struct {
	Type        string   `json:"type"`
	Description string   `json:"description,omitempty"`
	Target      string   `json:"target,omitempty"`
	Pattern     string   `json:"pattern,omitempty"`
	Expected    string   `json:"expected,omitempty"`
	JSONPath    string   `json:"jsonpath,omitempty"`
	Patterns    []string `json:"patterns,omitempty"`
}

// TemplatingSettings chooses the engine (scriggo) and adds data.
type TemplatingSettings struct {
	Engine       string                `json:"engine,omitempty"`
	ExtraContext *apiextensionsv1.JSON `json:"extraContext,omitempty"`
}

// Dataplane holds the directories haptic's HAProxy reads its files from,
// which decide the paths templates print; the rest is how haptic's
// controller deploys, ignored.
type Dataplane struct {
	MapsDir           string `json:"mapsDir,omitempty"`
	SSLCertsDir       string `json:"sslCertsDir,omitempty"`
	GeneralStorageDir string `json:"generalStorageDir,omitempty"`
	ConfigFile        string `json:"configFile,omitempty"`

	Port                    int32  `json:"port,omitempty"`
	MaxParallel             int32  `json:"maxParallel,omitempty"`
	RawPushThreshold        int64  `json:"rawPushThreshold,omitempty"`
	DeploymentTimeout       string `json:"deploymentTimeout,omitempty"`
	DriftPreventionInterval string `json:"driftPreventionInterval,omitempty"`
	MinDeploymentInterval   string `json:"minDeploymentInterval,omitempty"`
}
