package module

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Module is one admission feature of Gatehouse.
type Module interface {
	// Name is the module's short name, used in flags, metrics and logs.
	Name() string
	// AddToScheme registers the API types the module reads or serves.
	AddToScheme(s *runtime.Scheme) error
	// Webhooks declares the module's static webhooks. It is called without
	// an API server (manifest generation) and before Setup; the declared
	// Admit and Convert functions are called only after Setup returned.
	Webhooks() []Webhook
	// Setup wires the module to its host before the host starts.
	Setup(ctx context.Context, host Host) error
}

// Type is the kind of webhook.
type Type string

const (
	Validating Type = "Validating"
	Mutating   Type = "Mutating"
	Conversion Type = "Conversion"
)

// AdmitFunc decides one admission request. It must be safe for concurrent
// use. The context carries the request's logger (log.FromContext).
type AdmitFunc func(ctx context.Context, req admission.Request) admission.Response

// ConvertFunc converts the objects of one ConversionReview to the desired
// apiVersion. It returns the converted objects in request order, or an error
// that names the failing object.
type ConvertFunc func(ctx context.Context, req *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error)

// Webhook declares one webhook a module serves and how the API server should
// call it. Everything the rendered webhook configuration says comes from
// here; the host adds only the client configuration and the namespaces no
// webhook may ever intercept.
type Webhook struct {
	// Name is the webhook's fully qualified name in the webhook configuration,
	// for example "pvsafe.gatehouse.dev".
	Name string
	Path string
	Type Type

	// Admission webhooks.
	Rules          []admissionregistrationv1.RuleWithOperations
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	MatchPolicy    admissionregistrationv1.MatchPolicyType
	SideEffects    admissionregistrationv1.SideEffectClass
	TimeoutSeconds int32
	// NamespaceSelector narrows the namespaces the webhook sees. Rendering
	// always adds the exclusion of kube-system, kube-node-lease and
	// Gatehouse's own namespace to it.
	NamespaceSelector *metav1.LabelSelector
	// ObjectSelector narrows the objects by their labels.
	ObjectSelector *metav1.LabelSelector
	// MatchConditions are CEL pre-filters the API server evaluates, so that
	// requests the module would allow anyway never reach Gatehouse.
	MatchConditions []admissionregistrationv1.MatchCondition
	// ReinvocationPolicy, for mutating webhooks only. Default Never.
	ReinvocationPolicy admissionregistrationv1.ReinvocationPolicyType
	Admit              AdmitFunc
	// Kinds, when set, are the kinds the webhook judges (the kinds its
	// rules' resources hold): the server allows a review of any other kind
	// without calling Admit, since it is not this webhook's to judge (the
	// API server never sends one; a caller posting straight to the port
	// may), and counts it in gatehouse_webhook_foreign_kind_total. The
	// host sets it for run-time webhooks from their rules.
	Kinds []schema.GroupVersionKind

	// Conversion webhooks.
	CRDs    []string
	Convert ConvertFunc

	// Confirm, when set, makes a policy denial of Admit again from the API
	// server's live state before the server returns it (confirm.go).
	Confirm *Confirmation
	// DenialReasons are the reasons the webhook's denials give (Deny): a
	// bounded set, documented per module, that labels
	// gatehouse_webhook_denials_total. Any other is counted as "other".
	DenialReasons []string

	// Locked says which of the operator's per-module webhook settings
	// (webhookconfig.Settings) this webhook refuses, and why.
	Locked Locked

	// Cost is what one decision of this webhook costs; the server bounds
	// the load by it. The zero value takes the server's defaults.
	Cost Cost
}

// Locked names the per-module webhook settings a webhook refuses, each with
// the reason the operator is told. Empty fields may be set.
type Locked struct {
	// FailurePolicy, when set, keeps the declared failurePolicy: a guard
	// whose outage must not open the boundary it keeps.
	FailurePolicy string
	// ObjectSelector, when set, refuses an objectSelector: whoever sets the
	// object's labels would choose whether the guard sees it.
	ObjectSelector string
	// NamespaceExclusions, when set, refuses namespaceExclusions: what the
	// webhook does not see in a namespace the module must not trust there
	// either, so the exclusions stay the always-excluded ones.
	NamespaceExclusions string
}

// Cost declares what a webhook's decision costs, measured on the worst
// input shapes (docs/reliability.md, "Hostile load"), so that the server
// admits no more decisions at once than fit in its memory.
type Cost struct {
	// BytesPerToken is the most memory the decision allocates per
	// structural token of the review (',', ':', '[' and '{' outside
	// strings; about one per value or member a decoder builds). What a
	// hostile body costs grows with its values, not its bytes: 2.9 MB of
	// "1," is 1.45 million numbers. The server charges len(body) +
	// tokens × BytesPerToken to its budget of decisions in flight. 0: the
	// server's default, measured for decoding into maps.
	BytesPerToken int64
	// Concurrency bounds the decisions of the module's webhooks declaring
	// it that run at once, all of them together (a module's expensive
	// stages share its workers); more wait briefly, then get 503. Every
	// webhook of a module that declares it declares the same number. 0: no
	// bound beyond the memory budget.
	Concurrency int
}

// ValidateWebhooks reports the first of hooks the server cannot serve:
// every host checks a module's declarations with it.
func ValidateWebhooks(hooks []Webhook) error {
	for _, w := range hooks {
		if err := w.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Validate reports a declaration the server cannot serve.
func (w Webhook) Validate() error {
	if w.Name == "" || w.Path == "" || w.Path[0] != '/' {
		return fmt.Errorf("webhook %q: name and an absolute path are required", w.Name)
	}
	switch w.Type {
	case Validating, Mutating:
		if w.Admit == nil {
			return fmt.Errorf("webhook %q: %s webhook without an Admit function", w.Name, w.Type)
		}
		if w.FailurePolicy == "" || w.SideEffects == "" {
			return fmt.Errorf("webhook %q: failurePolicy and sideEffects must be chosen deliberately", w.Name)
		}
		if w.TimeoutSeconds < 1 || w.TimeoutSeconds > 30 {
			return fmt.Errorf("webhook %q: timeoutSeconds %d is outside 1..30", w.Name, w.TimeoutSeconds)
		}
		if w.ReinvocationPolicy != "" && w.Type != Mutating {
			return fmt.Errorf("webhook %q: reinvocationPolicy applies to mutating webhooks only", w.Name)
		}
		if w.CRDs != nil || w.Convert != nil {
			return fmt.Errorf("webhook %q: an admission webhook converts no CRDs", w.Name)
		}
		if c := w.Confirm; c != nil && (c.Decide == nil || c.Timeout < 0 || c.Timeout >= time.Duration(w.TimeoutSeconds)*time.Second) {
			return fmt.Errorf("webhook %q: a confirmation needs a Decide function and a timeout under timeoutSeconds", w.Name)
		}
		for _, r := range w.DenialReasons {
			if errs := validation.IsDNS1123Label(r); len(errs) > 0 || r == ReasonOther || r == ReasonNotPermittedLabel {
				return fmt.Errorf("webhook %q: denial reason %q: a short lower-case word, not %q or %q", w.Name, r, ReasonOther, ReasonNotPermittedLabel)
			}
		}
	case Conversion:
		if w.Convert == nil || len(w.CRDs) == 0 {
			return fmt.Errorf("webhook %q: conversion webhook needs a Convert function and CRDs", w.Name)
		}
		if len(w.Rules) > 0 || w.Admit != nil || len(w.Kinds) > 0 || w.Confirm != nil || len(w.DenialReasons) > 0 {
			return fmt.Errorf("webhook %q: a conversion webhook has no admission rules", w.Name)
		}
	default:
		return fmt.Errorf("webhook %q: unknown type %q", w.Name, w.Type)
	}
	if w.Cost.BytesPerToken < 0 || w.Cost.Concurrency < 0 {
		return fmt.Errorf("webhook %q: a negative cost", w.Name)
	}
	return nil
}
