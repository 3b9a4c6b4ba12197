package nodegroup

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// Node labels the checks read.
const (
	groupLabel = "node.deckhouse.io/group"
	// customContainerdLabel is what bashible sets today; the legacy label is
	// what older nodes may still carry.
	customContainerdLabel       = "node.deckhouse.io/containerd-config"
	legacyCustomContainerdLabel = "node.deckhouse.io/containerd"
	containerdV2UnsupportedKey  = "node.deckhouse.io/containerd-v2-unsupported"

	groupIndex = "group"
)

// nodeReader holds the metadata of the Nodes that belong to a NodeGroup,
// indexed by group: the checks read names and labels only.
type nodeReader struct {
	cache  cache.Cache
	synced func() bool
}

func nodeMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return m
}

func newNodeReader(ctx context.Context, host module.Host) (*nodeReader, error) {
	inGroup, err := labels.Parse(groupLabel)
	if err != nil {
		return nil, err
	}
	c, err := host.NewCache("nodes", cache.Options{ByObject: map[client.Object]cache.ByObject{
		nodeMetadata(): {Label: inGroup},
	}})
	if err != nil {
		return nil, err
	}
	if err := c.IndexField(ctx, nodeMetadata(), groupIndex, func(o client.Object) []string {
		if g, ok := o.GetLabels()[groupLabel]; ok {
			return []string{g}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, nodeMetadata())
	if err != nil {
		return nil, err
	}
	return &nodeReader{cache: c, synced: inf.HasSynced}, nil
}

// inGroup lists the group's nodes with a custom containerd configuration
// (either label) and those that cannot run containerd v2.
func (r *nodeReader) inGroup(group string) (custom, unsupported []string, err error) {
	if !r.synced() {
		return nil, nil, fmt.Errorf("Nodes: %w", errNotLoaded)
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.cache.List(context.Background(), list, client.MatchingFields{groupIndex: group}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("Nodes: %w", err)
	}
	for i := range list.Items {
		l := list.Items[i].Labels
		if l[customContainerdLabel] == "custom" || l[legacyCustomContainerdLabel] == "custom" {
			custom = append(custom, list.Items[i].Name)
		}
		if _, ok := l[containerdV2UnsupportedKey]; ok {
			unsupported = append(unsupported, list.Items[i].Name)
		}
	}
	slices.Sort(custom)
	slices.Sort(unsupported)
	return custom, unsupported, nil
}
