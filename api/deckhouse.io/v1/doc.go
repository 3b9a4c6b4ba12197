// Package v1 holds the deckhouse.io/v1 NodeGroup API: the served storage
// version and the hub every other version converts through.
//
// +kubebuilder:object:generate=true
// +groupName=deckhouse.io
package v1
