package module

import "k8s.io/apimachinery/pkg/runtime/schema"

// GVKString formats a GVK the way run-time webhooks name kinds:
// "group/version.Kind", or "version.Kind" for the core group.
func GVKString(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version + "." + gvk.Kind
	}
	return gvk.Group + "/" + gvk.Version + "." + gvk.Kind
}
