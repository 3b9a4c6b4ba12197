package v1alpha1

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HAProxyTemplateConfig renders an HAProxy configuration from templates and
// the cluster's watched resources. Gatehouse's configcheck module refuses a
// change to a watched resource (an Ingress, a Service) whose rendering would
// not render, would fail `haproxy -c`, or would fail the config's own
// embedded tests, and publishes the last accepted rendering for HAProxy to
// run. Its shape follows HAProxy Template IC's resource of the same name, so
// that its users recognise it; docs/configcheck.md gives the differences.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=htplcfg;haptpl,categories=gatehouse
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.validationStatus`
// +kubebuilder:printcolumn:name="Webhook",type=string,JSONPath=`.status.conditions[?(@.type=="WebhookActive")].status`
// +kubebuilder:printcolumn:name="Rendered",type=string,JSONPath=`.status.output.configMapName`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.validationMessage`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HAProxyTemplateConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec HAProxyTemplateConfigSpec `json:"spec"`
	// +optional
	Status HAProxyTemplateConfigStatus `json:"status,omitempty"`
}

// HAProxyTemplateConfigSpec is the templates, the resources they read, and
// the tests a rendering must pass.
type HAProxyTemplateConfigSpec struct {
	// WatchedResources are the cluster resources templates read, by the name
	// templates use: .resources.<name>.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=32
	// +required
	WatchedResources map[string]WatchedResource `json:"watchedResources"`

	// WatchedResourcesIgnoreFields are removed from every watched object
	// before templates see it (paths as in indexBy), to save memory and to
	// make changes to them free: a change that touches only ignored fields
	// leaves what the templates see unchanged, so it is admitted without
	// rendering. metadata.managedFields and metadata.resourceVersion are
	// always removed. Example: [metadata.labels] when no template reads
	// labels.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	WatchedResourcesIgnoreFields []string `json:"watchedResourcesIgnoreFields,omitempty"`

	// TemplateSnippets are named templates, included with render "name" or
	// renderGlob "prefix-*" (name order).
	// +optional
	TemplateSnippets map[string]Template `json:"templateSnippets,omitempty"`

	// HAProxyConfig renders haproxy.cfg.
	// +required
	HAProxyConfig Template `json:"haproxyConfig"`

	// Maps render map files, by file name; haproxy.cfg refers to them as
	// maps/<name>.
	// +optional
	Maps map[string]Template `json:"maps,omitempty"`
	// Files render general files (error pages, ACL lists), by file name;
	// haproxy.cfg refers to them as general/<name>.
	// +optional
	Files map[string]Template `json:"files,omitempty"`
	// SSLCertificates render PEM bundles, by file name; haproxy.cfg refers
	// to them as ssl/<name>. They are published to a Secret, never to the
	// ConfigMap.
	// +optional
	SSLCertificates map[string]Template `json:"sslCertificates,omitempty"`

	// ValidationTests are run when the config changes (a failing test makes
	// the config Invalid) and on every admission of a watched resource
	// (with their fixtures, not the cluster's state). The test named
	// "_global" is not run: its fixtures are merged into every test.
	// +kubebuilder:validation:MaxProperties=200
	// +optional
	ValidationTests map[string]ValidationTest `json:"validationTests,omitempty"`

	// An optional struct carries a default of its own and one on each of
	// its fields, so that the API server defaults it whether it is absent
	// or given in part (operator-implementation-guidelines.md).

	// TemplatingSettings chooses the template engine (default gotemplate)
	// and adds data.
	// +kubebuilder:default={engine: gotemplate}
	// +optional
	TemplatingSettings TemplatingSettings `json:"templatingSettings,omitempty"`

	// ValidationWebhook says how the API server calls Gatehouse for this
	// config's watched resources: failurePolicy Fail and timeoutSeconds 10
	// unless given, so what the API server stores is what Gatehouse
	// registers.
	// +kubebuilder:default={failurePolicy: Fail, timeoutSeconds: 10}
	// +optional
	ValidationWebhook ValidationWebhook `json:"validationWebhook,omitempty"`
}

// WatchedResource is one kind of object the templates read.
type WatchedResource struct {
	// APIVersion is the resource's group/version, "v1" for the core group.
	// +kubebuilder:validation:MinLength=1
	// +required
	APIVersion string `json:"apiVersion"`
	// Resources is the resource's plural name, e.g. ingresses.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +required
	Resources string `json:"resources"`
	// IndexBy are the key expressions Fetch and GetSingle look objects up
	// by, in order: dotted paths, with \. or ['...'] for keys containing
	// dots. Default: metadata.namespace, metadata.name.
	// +kubebuilder:validation:MaxItems=8
	// +optional
	IndexBy []string `json:"indexBy,omitempty"`
	// LabelSelector selects the objects by label, in the API server.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// FieldSelector keeps only the objects whose fields match:
	// comma-separated path=value or path!=value terms over any field (paths
	// as in indexBy), e.g. spec.ingressClassName=haproxy. A missing field
	// is the empty string.
	// +optional
	FieldSelector string `json:"fieldSelector,omitempty"`
	// NamespaceSelector keeps only the objects in namespaces with these
	// labels.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// EnableValidationWebhook makes Gatehouse validate CREATE, UPDATE and
	// DELETE of this resource against the rendering. Objects the selectors
	// exclude are admitted without rendering.
	// +optional
	EnableValidationWebhook bool `json:"enableValidationWebhook,omitempty"`
	// MaxObjectBytes bounds one object of this resource, as the templates
	// see it (JSON, without managedFields, resourceVersion and
	// watchedResourcesIgnoreFields): a create or update making a selected
	// object larger is refused at admission, saying so, so that one
	// tenant's objects cannot slow every other tenant's renderings.
	// Default 131072 (128 KiB).
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=16777216
	// +optional
	MaxObjectBytes int64 `json:"maxObjectBytes,omitempty"`
	// MaxListLength bounds every list in one object of this resource (an
	// Ingress's rules or paths, a Service's ports), checked with
	// MaxObjectBytes. Default 1000 (an EndpointSlice holds at most 1000
	// endpoints).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxListLength int32 `json:"maxListLength,omitempty"`
}

// Template is a template's source text.
type Template struct {
	// +required
	Template string `json:"template"`
}

// ValidationTest renders from fixtures instead of the cluster's state and
// asserts on the result.
type ValidationTest struct {
	// +optional
	Description string `json:"description,omitempty"`
	// Fixtures are the objects each watched resource holds during the test,
	// by watched name; resources without fixtures are empty.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Fixtures map[string][]apiextensionsv1.JSON `json:"fixtures,omitempty"`
	// Assertions are checked in order; every failing one is reported.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Assertions []Assertion `json:"assertions,omitempty"`
}

// AssertionType is what an assertion checks.
// +kubebuilder:validation:Enum=haproxy_valid;contains;not_contains;equals;match_count;match_order;jsonpath;deterministic
type AssertionType string

// Assertion is one check of a test's rendering.
type Assertion struct {
	// +required
	Type AssertionType `json:"type"`
	// +optional
	Description string `json:"description,omitempty"`
	// Target is what the assertion reads: haproxy.cfg (default),
	// map:<name>, file:<name>, cert:<name>, or rendering_error (the fail
	// text; a test asserting on it is not failed by the render error).
	// +optional
	Target string `json:"target,omitempty"`
	// Pattern is the regular expression of contains, not_contains and
	// match_count.
	// +optional
	Pattern string `json:"pattern,omitempty"`
	// Expected is equals' exact text, match_count's count, and jsonpath's
	// result.
	// +optional
	Expected string `json:"expected,omitempty"`
	// JSONPath is evaluated against the template data, e.g.
	// {.resources.services.List()[0].metadata.name}.
	// +optional
	JSONPath string `json:"jsonpath,omitempty"`
	// Patterns must match in this order (match_order).
	// +optional
	Patterns []string `json:"patterns,omitempty"`
}

// TemplatingSettings chooses the template engine and adds data.
type TemplatingSettings struct {
	// Engine is the template language: gotemplate (Go text/template with
	// sprig's functions) is the only one.
	// +kubebuilder:validation:Enum=gotemplate
	// +kubebuilder:default=gotemplate
	// +optional
	Engine string `json:"engine,omitempty"`
	// ExtraContext is seen by templates as .extraContext.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	ExtraContext *apiextensionsv1.JSON `json:"extraContext,omitempty"`
}

// ValidationWebhook says how the API server calls Gatehouse for this
// config's watched resources.
type ValidationWebhook struct {
	// FailurePolicy is what the API server does when Gatehouse cannot
	// answer in time: Fail (default) refuses the change, so nothing
	// unchecked reaches HAProxy; Ignore admits it.
	// +kubebuilder:validation:Enum=Fail;Ignore
	// +kubebuilder:default=Fail
	// +optional
	FailurePolicy admissionregistrationv1.FailurePolicyType `json:"failurePolicy,omitempty"`
	// TimeoutSeconds is the webhook's timeout (default 10). Gatehouse
	// answers within it, less a margin, whatever the queue of checks.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=30
	// +kubebuilder:default=10
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// ValidationStatus summarises the last validation of a config.
// +kubebuilder:validation:Enum=Valid;Invalid;Unknown
type ValidationStatus string

const (
	ValidationValid   ValidationStatus = "Valid"
	ValidationInvalid ValidationStatus = "Invalid"
	ValidationUnknown ValidationStatus = "Unknown"
)

// Condition types of an HAProxyTemplateConfig.
const (
	// ConditionValid: the templates compile and the embedded tests pass.
	ConditionValid = "Valid"
	// ConditionWebhookActive: the config's watched resources are validated
	// at admission.
	ConditionWebhookActive = "WebhookActive"
	// ConditionPublished: the current state of the cluster renders and
	// checks, and the rendering is published.
	ConditionPublished = "Published"
	// ConditionReady: Valid and Published.
	ConditionReady = "Ready"
	// ConditionAuthorized: what the config's author may have Gatehouse
	// read and publish, as last checked: False when a watched resource
	// reads nothing, a namespace the spec names is left out, or nothing
	// may be published.
	ConditionAuthorized = "Authorized"
	// ConditionFailing: the current state of the cluster does not render
	// or check; the message names the watched objects that cause it.
	ConditionFailing = "Failing"
	// ConditionModuleReady is written False (reason ModuleFailed) on every
	// config while configcheck cannot start (the leader's): the config
	// validates nothing and publishes nothing until it does. The module
	// removes it once it runs.
	ConditionModuleReady = "ModuleReady"
)

// ReasonModuleFailed is the reason of ConditionModuleReady, and of
// ConditionWebhookActive, while configcheck cannot start.
const ReasonModuleFailed = "ModuleFailed"

// HAProxyTemplateConfigStatus is what Gatehouse last found.
type HAProxyTemplateConfigStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	ValidationStatus ValidationStatus `json:"validationStatus,omitempty"`
	// ValidationMessage is why the config is Invalid, or a summary.
	// +optional
	ValidationMessage string `json:"validationMessage,omitempty"`
	// Pointers, so that a real 0 (every test failed, or a config without
	// tests) is written and read back rather than dropped as empty.

	// TestsPassed of TestsTotal embedded tests passed at the last
	// validation; both are absent when the tests did not run (the templates
	// do not compile, or the tests could not finish).
	// +optional
	TestsPassed *int32 `json:"testsPassed,omitempty"`
	// +optional
	TestsTotal *int32 `json:"testsTotal,omitempty"`
	// Output is the last accepted rendering, published for HAProxy.
	// +optional
	Output *RenderedOutput `json:"output,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RenderedOutput names where the accepted rendering is.
type RenderedOutput struct {
	// ConfigMapName holds haproxy.cfg, maps (map.<name>) and general files
	// (file.<name>).
	ConfigMapName string `json:"configMapName"`
	// SecretName holds the certificates, when there are any.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// Checksum identifies the rendering (sha256 of every file).
	Checksum string `json:"checksum"`
}

// +kubebuilder:object:root=true

// HAProxyTemplateConfigList is a list of HAProxyTemplateConfigs.
type HAProxyTemplateConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HAProxyTemplateConfig `json:"items"`
}
