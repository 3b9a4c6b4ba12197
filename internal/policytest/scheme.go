package policytest

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// clusterScoped are the cluster-scoped built-in kinds (the modules'
// own custom kinds are theirs to declare: module.ClusterScoper). Offline
// there is no discovery to ask; every other kind of the scheme is
// namespaced, and a kind only the suite's objects name is namespaced when
// its objects have a namespace.
var clusterScoped = map[schema.GroupKind]bool{}

func init() {
	for _, gk := range []string{
		"Namespace", "Node", "PersistentVolume", "ComponentStatus",
		"ClusterRole.rbac.authorization.k8s.io", "ClusterRoleBinding.rbac.authorization.k8s.io",
		"StorageClass.storage.k8s.io", "CSIDriver.storage.k8s.io", "CSINode.storage.k8s.io", "VolumeAttachment.storage.k8s.io",
		"VolumeAttributesClass.storage.k8s.io",
		"PriorityClass.scheduling.k8s.io", "RuntimeClass.node.k8s.io", "IngressClass.networking.k8s.io",
		"IPAddress.networking.k8s.io", "ServiceCIDR.networking.k8s.io",
		"CustomResourceDefinition.apiextensions.k8s.io", "APIService.apiregistration.k8s.io",
		"MutatingWebhookConfiguration.admissionregistration.k8s.io", "ValidatingWebhookConfiguration.admissionregistration.k8s.io",
		"ValidatingAdmissionPolicy.admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io",
		"MutatingAdmissionPolicy.admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding.admissionregistration.k8s.io",
		"CertificateSigningRequest.certificates.k8s.io", "ClusterTrustBundle.certificates.k8s.io",
		"FlowSchema.flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io",
		"TokenReview.authentication.k8s.io", "SelfSubjectReview.authentication.k8s.io",
		"SubjectAccessReview.authorization.k8s.io", "SelfSubjectAccessReview.authorization.k8s.io", "SelfSubjectRulesReview.authorization.k8s.io",
		"DeviceClass.resource.k8s.io", "ResourceSlice.resource.k8s.io",
		"VolumeSnapshotClass.snapshot.storage.k8s.io", "VolumeSnapshotContent.snapshot.storage.k8s.io",
	} {
		clusterScoped[schema.ParseGroupKind(gk)] = true
	}
}

// irregularPlurals are the resources whose names the mapper's guess gets
// wrong.
var irregularPlurals = map[schema.GroupKind]string{
	{Kind: "Endpoints"}: "endpoints",
}

// newMapper maps every kind of the scheme and of the suite's objects to its
// resource and scope.
func newMapper(scheme *runtime.Scheme, modulesClusterScoped map[schema.GroupKind]bool, objs []*unstructured.Unstructured) meta.RESTMapper {
	cluster := func(gk schema.GroupKind) bool { return clusterScoped[gk] || modulesClusterScoped[gk] }
	mapper := meta.NewDefaultRESTMapper(scheme.PrioritizedVersionsAllGroups())
	add := func(gvk schema.GroupVersionKind, namespaced bool) {
		scope := meta.RESTScopeNamespace
		if !namespaced {
			scope = meta.RESTScopeRoot
		}
		if plural, ok := irregularPlurals[gvk.GroupKind()]; ok {
			mapper.AddSpecific(gvk, gvk.GroupVersion().WithResource(plural), gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind)), scope)
			return
		}
		mapper.Add(gvk, scope)
	}
	for gvk := range scheme.AllKnownTypes() {
		if mappedSchemeKind(gvk) {
			add(gvk, !cluster(gvk.GroupKind()))
		}
	}
	// A CustomResourceDefinition among the suite's objects defines its
	// kind as discovery would: its plural and scope, in the versions it
	// serves.
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() != crdKind {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		plural, _, _ := unstructured.NestedString(o.Object, "spec", "names", "plural")
		singular, _, _ := unstructured.NestedString(o.Object, "spec", "names", "singular")
		scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		if kind == "" || plural == "" {
			continue
		}
		if singular == "" {
			singular = strings.ToLower(kind)
		}
		for _, v := range versions {
			v, _ := v.(map[string]any)
			name, _, _ := unstructured.NestedString(v, "name")
			served, _, _ := unstructured.NestedBool(v, "served")
			gvk := schema.GroupVersionKind{Group: group, Version: name, Kind: kind}
			if name == "" || !served {
				continue
			}
			if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
				continue
			}
			restScope := meta.RESTScopeNamespace
			if scope == "Cluster" {
				restScope = meta.RESTScopeRoot
			}
			gv := gvk.GroupVersion()
			mapper.AddSpecific(gvk, gv.WithResource(plural), gv.WithResource(singular), restScope)
		}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			continue
		}
		add(gvk, !cluster(gvk.GroupKind()) && o.GetNamespace() != "")
	}
	return mapper
}

var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// mappedSchemeKind says whether the mapper maps a kind of the scheme: not
// an internal version, a list, options or a watch event.
func mappedSchemeKind(gvk schema.GroupVersionKind) bool {
	return gvk.Version != runtime.APIVersionInternal && !strings.HasSuffix(gvk.Kind, "List") && !strings.HasSuffix(gvk.Kind, "Options") && gvk.Kind != "WatchEvent"
}
