// Package v1alpha1 holds the gatehouse.dev/v1alpha1 API: the
// HAProxyTemplateConfig the configcheck module validates watched resources
// against.
//
// +kubebuilder:object:generate=true
// +groupName=gatehouse.dev
package v1alpha1
