// Package v1alpha2 holds the deckhouse.io/v1alpha2 NodeGroup API, served for
// clients that still use it and converted through the v1 hub.
//
// +kubebuilder:object:generate=true
// +groupName=deckhouse.io
package v1alpha2
