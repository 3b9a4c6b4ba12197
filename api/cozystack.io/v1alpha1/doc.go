// Package v1alpha1 is the cozystack.io/v1alpha1 API: AffinityClass, a named
// placement class an application selects by name, as it selects a
// StorageClass (see docs/placement.md and docs/placement-affinity.md).
//
// +kubebuilder:object:generate=true
// +groupName=cozystack.io
package v1alpha1
