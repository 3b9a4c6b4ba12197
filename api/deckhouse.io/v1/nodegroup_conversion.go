package v1

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// PermanentNodeGroupAnnotation, set to "true" or "false", decides whether
	// a group other than master that an older version calls Hybrid is
	// CloudPermanent or CloudStatic, overriding the provider cluster
	// configuration.
	PermanentNodeGroupAnnotation = "node.deckhouse.io/permanent-node-group"

	// ConversionDataAnnotation carries, as JSON, what one version of a
	// NodeGroup holds that the version it was converted to cannot, so that
	// converting back restores it. Conversions own it; it is removed once
	// nothing is left to restore.
	ConversionDataAnnotation = "gatehouse.dev/nodegroup-conversion-data"

	// MasterNodeGroup is the control-plane group, always CloudPermanent when Hybrid.
	MasterNodeGroup = "master"
)

// Hub marks v1 as the version every other version converts through.
func (*NodeGroup) Hub() {}

// CloudPermanentLookup answers whether a Hybrid group is listed as
// permanent in the provider cluster configuration. It returns an error when
// it cannot tell, for example before that configuration has been read.
//
// +kubebuilder:object:generate=false
type CloudPermanentLookup interface {
	IsCloudPermanent(name string) (bool, error)
}

// MasterOnly knows no provider configuration: only master is permanent.
//
// +kubebuilder:object:generate=false
type MasterOnly struct{}

// IsCloudPermanent reports false: master is handled before the lookup.
func (MasterOnly) IsCloudPermanent(string) (bool, error) { return false, nil }

type lookupKey struct{}

// WithCloudPermanentLookup returns ctx carrying lookup for the conversions
// to the hub. The conversion interfaces pass a context and nothing else, so
// the one thing a conversion needs from the cluster travels in it.
func WithCloudPermanentLookup(ctx context.Context, lookup CloudPermanentLookup) context.Context {
	return context.WithValue(ctx, lookupKey{}, lookup)
}

// errNoLookup fails a conversion that needs the provider configuration
// when the caller passed none: guessing CloudStatic would store a type the
// nodeType immutability check then locks in.
var errNoLookup = errors.New("no CloudPermanentLookup in the context (v1.WithCloudPermanentLookup)")

// HybridNodeType is the v1 type of a group an older version calls Hybrid:
// master is always CloudPermanent; for other groups the
// permanent-node-group annotation decides when it says "true" or "false",
// and otherwise the CloudPermanentLookup ctx carries.
func HybridNodeType(ctx context.Context, obj metav1.Object) (NodeType, error) {
	if obj.GetName() == MasterNodeGroup {
		return NodeTypeCloudPermanent, nil
	}
	switch obj.GetAnnotations()[PermanentNodeGroupAnnotation] {
	case "true":
		return NodeTypeCloudPermanent, nil
	case "false":
		return NodeTypeCloudStatic, nil
	}
	lookup, _ := ctx.Value(lookupKey{}).(CloudPermanentLookup)
	if lookup == nil {
		return "", fmt.Errorf("decide whether Hybrid NodeGroup %q is CloudPermanent or CloudStatic: %w", obj.GetName(), errNoLookup)
	}
	permanent, err := lookup.IsCloudPermanent(obj.GetName())
	if err != nil {
		return "", fmt.Errorf("decide whether Hybrid NodeGroup %q is CloudPermanent or CloudStatic: %w", obj.GetName(), err)
	}
	if permanent {
		return NodeTypeCloudPermanent, nil
	}
	return NodeTypeCloudStatic, nil
}
