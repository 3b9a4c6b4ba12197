// Package v1alpha1 reads haptic's haproxy-haptic.org/v1alpha1
// HAProxyTemplateConfig, as haptic's CRD
// (haproxytemplateconfigs.haproxy-haptic.org) serves it, so that
// configcheck can check a haptic user's configs unchanged.
//
// Gatehouse neither installs nor writes this kind: haptic's chart owns the
// CRD and haptic's controller the objects and their status. The types hold
// the fields configcheck reads; the controller-only ones
// (credentialsSecretRef, podSelector, dataplane, controller, logging) are
// kept as they are and ignored, except the few a rendering depends on
// (dataplane's directories). Fields are written from haptic's published
// CRD schema (its chart 0.1.0-alpha.11), not from its code.
//
// +kubebuilder:object:generate=true
// +groupName=haproxy-haptic.org
package v1alpha1
