package module

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Module is one admission feature of Gatehouse.
type Module interface {
	// Name is the module's short name, used in flags, metrics and logs.
	Name() string
	// AddToScheme registers the API types the module reads or serves.
	AddToScheme(s *runtime.Scheme) error
	// CacheObjects scopes the shared informer cache for the types this module
	// reads. It is consulted before the manager is built, because the cache is
	// configured once. Two modules asking for the same type must agree.
	CacheObjects() map[client.Object]cache.ByObject
	// Setup wires the module to a manager that has not started yet and returns
	// the webhooks it serves.
	Setup(ctx context.Context, host Host) ([]Webhook, error)
}

// Host is what the server offers a module during Setup.
type Host struct {
	Manager manager.Manager
	Log     logr.Logger
	// Enforcement is the mode configured for this module. The server applies
	// it to validating webhooks; a module only needs it to word its messages.
	Enforcement Enforcement
	// Namespace is the namespace Gatehouse runs in.
	Namespace string
	// Validators is the GVK dispatch table behind the generic /validate path.
	Validators *ValidatorRegistry
	// AddSyncCheck registers a check that /readyz requires to pass. Caches a
	// module starts outside the manager's cache report their sync state here.
	AddSyncCheck func(name string, synced func() bool)
}

// Type is the kind of webhook.
type Type string

const (
	Validating Type = "Validating"
	Mutating   Type = "Mutating"
	Conversion Type = "Conversion"
)

// AdmitFunc decides one admission request. It must be safe for concurrent use.
type AdmitFunc func(ctx context.Context, req admission.Request) admission.Response

// ConvertFunc converts the objects of one ConversionReview to the desired
// apiVersion. It returns the converted objects in request order, or an error
// that names the failing object.
type ConvertFunc func(ctx context.Context, req *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error)

// Webhook declares one webhook a module serves and how the API server should
// call it.
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
	Admit          AdmitFunc

	// Conversion webhooks.
	CRDs    []string
	Convert ConvertFunc
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
	case Conversion:
		if w.Convert == nil || len(w.CRDs) == 0 {
			return fmt.Errorf("webhook %q: conversion webhook needs a Convert function and CRDs", w.Name)
		}
	default:
		return fmt.Errorf("webhook %q: unknown type %q", w.Name, w.Type)
	}
	return nil
}
