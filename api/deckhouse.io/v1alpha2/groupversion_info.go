package v1alpha2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is deckhouse.io/v1alpha2.
	GroupVersion = schema.GroupVersion{Group: "deckhouse.io", Version: "v1alpha2"}

	// SchemeBuilder registers the types of this version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	// localSchemeBuilder registers the generated conversion functions
	// (zz_generated.conversion.go) with SchemeBuilder.
	localSchemeBuilder = &SchemeBuilder.SchemeBuilder
)
