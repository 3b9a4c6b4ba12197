package module

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// GVKString formats a GVK the way run-time webhooks name kinds:
// "group/version.Kind", or "version.Kind" for the core group.
func GVKString(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version + "." + gvk.Kind
	}
	return gvk.Group + "/" + gvk.Version + "." + gvk.Kind
}

// ParseGVK reads "group/version.Kind" or "version.Kind".
func ParseGVK(s string) (schema.GroupVersionKind, error) {
	gv, kind, ok := cutLast(s, ".")
	if !ok || kind == "" || gv == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("kind %q: want group/version.Kind, or version.Kind for the core group", s)
	}
	group, version, hasGroup := strings.Cut(gv, "/")
	if !hasGroup {
		group, version = "", gv
	}
	if version == "" || (hasGroup && group == "") {
		return schema.GroupVersionKind{}, fmt.Errorf("kind %q: want group/version.Kind, or version.Kind for the core group", s)
	}
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, nil
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// KindValidator judges one kind inside a run-time webhook.
type KindValidator struct {
	// Kind is "group/version.Kind", or "version.Kind" for the core group.
	Kind       string
	Operations []admissionregistrationv1.OperationType
	Admit      AdmitFunc
}

// DispatchByKind resolves the validators' kinds to resources through
// discovery and returns the webhook rules for them and an Admit function
// that routes a request by its kind. A request of a kind without a validator
// is allowed: it is not this webhook's to judge.
func DispatchByKind(mapper meta.RESTMapper, validators []KindValidator) ([]admissionregistrationv1.RuleWithOperations, AdmitFunc, error) {
	byKind := make(map[schema.GroupVersionKind]AdmitFunc, len(validators))
	var rules []admissionregistrationv1.RuleWithOperations
	for _, v := range validators {
		gvk, err := ParseGVK(v.Kind)
		if err != nil {
			return nil, nil, err
		}
		if _, dup := byKind[gvk]; dup {
			return nil, nil, fmt.Errorf("kind %s has two validators", v.Kind)
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, nil, fmt.Errorf("resolve %s: %w", v.Kind, err)
		}
		scope := admissionregistrationv1.NamespacedScope
		if mapping.Scope.Name() == meta.RESTScopeNameRoot {
			scope = admissionregistrationv1.ClusterScope
		}
		byKind[gvk] = v.Admit
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: v.Operations,
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{gvk.Group}, APIVersions: []string{gvk.Version},
				Resources: []string{mapping.Resource.Resource}, Scope: ptr.To(scope),
			},
		})
	}
	admit := func(ctx context.Context, req admission.Request) admission.Response {
		gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
		fn, ok := byKind[gvk]
		if !ok {
			return admission.Allowed("no validator for " + GVKString(gvk))
		}
		return fn(ctx, req)
	}
	return rules, admit, nil
}
