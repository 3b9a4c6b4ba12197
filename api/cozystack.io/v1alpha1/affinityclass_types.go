package v1alpha1

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AffinityClass is a named placement class, cluster-wide like a
// StorageClass: the platform defines where a class's Pods may run, tenants
// pick a class by name from their allow-list, and Gatehouse refuses every Pod
// of an application using the class that does not honour it. It has no
// status because no controller acts on it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ac,categories=cozystack
// +kubebuilder:printcolumn:name="NodeSelector",type=string,JSONPath=`.spec.nodeSelector`
// +kubebuilder:printcolumn:name="NodeAffinity",type=string,JSONPath=`.spec.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AffinityClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AffinityClassSpec `json:"spec"`
}

// AffinityClassSpec says where the Pods of an application using the class
// may run. A class with both fields requires both of every Pod; a class with
// neither would admit everything, so it is refused.
//
// +kubebuilder:validation:XValidation:rule="(has(self.nodeSelector) && size(self.nodeSelector) > 0) || has(self.nodeAffinity)",message="an AffinityClass needs spec.nodeSelector, spec.nodeAffinity, or both"
type AffinityClassSpec struct {
	// NodeSelector lists key=value pairs every Pod of an application using
	// the class must carry in its own spec.nodeSelector. This is a contract
	// on the Pod's spec, checked literally: the chart sets these pairs, the
	// webhook verifies them.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// NodeAffinity is a placement the Pods must guarantee rather than copy:
	// a Pod satisfies it when every node it could be scheduled on, as its
	// nodeSelector and required node affinity allow, matches one of the
	// class's terms ("dc1 OR dc2").
	// +optional
	NodeAffinity *ClassNodeAffinity `json:"nodeAffinity,omitempty"`
}

// ClassNodeAffinity has only the required part of a Pod's node affinity:
// preferences do not bound where a Pod runs, so a class cannot demand them.
type ClassNodeAffinity struct {
	// +required
	RequiredDuringSchedulingIgnoredDuringExecution ClassNodeSelector `json:"requiredDuringSchedulingIgnoredDuringExecution"`
}

// ClassNodeSelector is an OR of terms, as in a Pod's node affinity.
type ClassNodeSelector struct {
	// NodeSelectorTerms are alternatives: every node a Pod could be
	// scheduled on must match at least one. At most 16, which keeps the
	// admission check and the validation cost small.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	NodeSelectorTerms []ClassNodeSelectorTerm `json:"nodeSelectorTerms"`
}

// ClassNodeSelectorTerm is an AND of node label requirements. It has no
// matchFields: a node name is not a placement class, and the scheduler would
// read an empty term as matching no node, so a term needs one expression.
type ClassNodeSelectorTerm struct {
	// MatchExpressions must all hold on a node.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	MatchExpressions []ClassNodeSelectorRequirement `json:"matchExpressions"`
}

// ClassNodeSelectorRequirement is corev1.NodeSelectorRequirement with the
// same fields and meaning, plus the bounds the API server needs to run the
// validation rules: on the core type's unbounded strings the Gt/Lt rule
// exceeds the CRD's CEL cost budget 32 times over, and without the rules a
// class the scheduler reads as "matches no node" would be accepted and then
// refuse every Pod. Required converts it back to the core type.
//
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",message="In and NotIn need at least one value"
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0",message="Exists and DoesNotExist take no values"
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['Gt', 'Lt']) || (has(self.values) && size(self.values) == 1 && self.values[0].matches('^[0-9]{1,18}$'))",message="Gt and Lt take exactly one non-negative integer of at most 18 digits"
type ClassNodeSelectorRequirement struct {
	// Key is the node label key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Key string `json:"key"`

	// Operator relates the node's label to the values: In, NotIn, Exists,
	// DoesNotExist, Gt or Lt, as in a Pod's node affinity. Gt and Lt compare
	// the label read as an integer (one non-negative integer of at most 18
	// digits, so that it fits the int64 the scheduler parses).
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Gt;Lt
	Operator corev1.NodeSelectorOperator `json:"operator"`

	// Values are label values: In and NotIn need at least one, Exists and
	// DoesNotExist none, Gt and Lt exactly one.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`
	// +listType=atomic
	Values []string `json:"values,omitempty"`
}

// AffinityClassList lists AffinityClasses.
//
// +kubebuilder:object:root=true
type AffinityClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AffinityClass `json:"items"`
}

// Required is the class's node affinity in the shape a Pod spec states it,
// which is what the implication check compares, or nil when the class has
// none. The result shares nothing with the class, so callers may keep it.
func (s *AffinityClassSpec) Required() *corev1.NodeSelector {
	if s.NodeAffinity == nil {
		return nil
	}
	terms := s.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	out := &corev1.NodeSelector{NodeSelectorTerms: make([]corev1.NodeSelectorTerm, 0, len(terms))}
	for _, term := range terms {
		t := corev1.NodeSelectorTerm{MatchExpressions: make([]corev1.NodeSelectorRequirement, 0, len(term.MatchExpressions))}
		for _, e := range term.MatchExpressions {
			t.MatchExpressions = append(t.MatchExpressions, corev1.NodeSelectorRequirement{Key: e.Key, Operator: e.Operator, Values: slices.Clone(e.Values)})
		}
		out.NodeSelectorTerms = append(out.NodeSelectorTerms, t)
	}
	return out
}
