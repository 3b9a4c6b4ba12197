package policytest

import (
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// apiServerGroups are the groups kube-apiserver serves itself that
// client-go's scheme does not hold: no CRD serves their kinds.
var apiServerGroups = map[string]bool{
	apiextensionsv1.GroupName: true, "apiregistration.k8s.io": true, "meta.k8s.io": true,
}

// customKind says whether a CRD serves gvk in a cluster: a kind neither
// client-go's scheme (what the kinds tracker counts as built in) nor
// kube-apiserver itself serves.
func customKind(gvk schema.GroupVersionKind) bool {
	return gvk.Group != "" && !apiServerGroups[gvk.Group] && !clientgoscheme.Scheme.Recognizes(gvk)
}

// customResourceDefinitions are the CRDs the suite's API server serves:
// one per custom kind the mapper maps (the scheme's, and those only the
// suite's objects name), established, serving every version the mapper
// knows, as a cluster where they are installed serves them. The kinds
// tracker (internal/kinds) reads them as it reads a cluster's, so that a
// module follows its optional kinds offline as on the server: a custom
// kind the suite neither registers nor names has no CRD, and is not
// served. The schemas preserve unknown fields: the suite's objects are
// stored as given.
func customResourceDefinitions(scheme *runtime.Scheme, objs []*unstructured.Unstructured, mapper meta.RESTMapper) []*unstructured.Unstructured {
	type definition struct {
		resource   schema.GroupVersionResource
		namespaced bool
		versions   []string
	}
	defs := map[schema.GroupKind]*definition{}
	var order []schema.GroupKind
	add := func(gvk schema.GroupVersionKind) {
		if !customKind(gvk) {
			return
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return
		}
		d := defs[gvk.GroupKind()]
		if d == nil {
			d = &definition{resource: mapping.Resource, namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace}
			defs[gvk.GroupKind()] = d
			order = append(order, gvk.GroupKind())
		}
		if !slices.Contains(d.versions, gvk.Version) {
			d.versions = append(d.versions, gvk.Version)
		}
	}
	for gvk := range scheme.AllKnownTypes() {
		if mappedSchemeKind(gvk) {
			add(gvk)
		}
	}
	for _, o := range objs {
		add(o.GroupVersionKind())
	}
	slices.SortFunc(order, func(a, b schema.GroupKind) int { return strings.Compare(a.String(), b.String()) })
	out := make([]*unstructured.Unstructured, 0, len(order))
	for _, gk := range order {
		d := defs[gk]
		// The version kube would prefer stores the objects.
		slices.SortFunc(d.versions, func(a, b string) int { return -version.CompareKubeAwareVersionStrings(a, b) })
		scope := "Cluster"
		if d.namespaced {
			scope = "Namespaced"
		}
		versions := make([]any, len(d.versions))
		for i, v := range d.versions {
			versions[i] = map[string]any{
				"name": v, "served": true, "storage": i == 0,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}
		}
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiextensionsv1.SchemeGroupVersion.String(), "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": d.resource.Resource + "." + gk.Group},
			"spec": map[string]any{
				"group": gk.Group, "scope": scope, "versions": versions,
				"names": map[string]any{
					"kind": gk.Kind, "listKind": gk.Kind + "List",
					"plural": d.resource.Resource, "singular": strings.ToLower(gk.Kind),
				},
			},
			"status": map[string]any{
				"acceptedNames": map[string]any{"kind": gk.Kind, "plural": d.resource.Resource},
				"conditions": []any{
					map[string]any{"type": string(apiextensionsv1.NamesAccepted), "status": "True", "reason": "NoConflicts"},
					map[string]any{"type": string(apiextensionsv1.Established), "status": "True", "reason": "InitialNamesAccepted"},
				},
				"storedVersions": []any{d.versions[0]},
			},
		}})
	}
	return out
}
