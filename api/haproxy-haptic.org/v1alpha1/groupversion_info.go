package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is haproxy-haptic.org/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "haproxy-haptic.org", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource is the CRD's plural, haproxytemplateconfigs.
const Resource = "haproxytemplateconfigs"

func init() {
	SchemeBuilder.Register(&HAProxyTemplateConfig{}, &HAProxyTemplateConfigList{})
}
