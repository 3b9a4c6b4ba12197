// Package v1alpha1 holds the deckhouse.io/v1alpha1 NodeGroup API, served for
// clients that still use it and converted through the v1 hub.
//
// +kubebuilder:object:generate=true
// +k8s:conversion-gen=github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1
// +groupName=deckhouse.io
package v1alpha1
