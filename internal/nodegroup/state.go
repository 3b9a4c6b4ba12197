package nodegroup

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// clusterCache follows the few objects the checks and the conversion read,
// each through a field- or label-selected cache the host provides, and keeps
// them parsed: a Secret is parsed once per change, never per request.
type clusterCache struct {
	clusterConfig *followed[clusterConfigState]
	provider      *followed[providerState]
	endpoints     *followed[int]
	tolerations   *moduleConfigReader
	nodes         *nodeReader
}

// singleObject scopes a cache to one named object of obj's type.
func singleObject(obj client.Object, namespace, name string) cache.Options {
	scope := cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", name)}
	if namespace != "" {
		scope.Namespaces = map[string]cache.Config{namespace: {}}
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{obj: scope}}
}

func newClusterCache(ctx context.Context, host module.Host) (*clusterCache, error) {
	c := &clusterCache{}
	var err error
	if c.clusterConfig, err = followSingle(ctx, host, "cluster-configuration", &corev1.Secret{}, configNamespace, clusterConfigSecret, parseClusterConfigSecret); err != nil {
		return nil, err
	}
	if c.provider, err = followSingle(ctx, host, "provider-configuration", &corev1.Secret{}, configNamespace, providerConfigSecret, parseProviderSecret); err != nil {
		return nil, err
	}
	if c.endpoints, err = followSingle(ctx, host, "kubernetes-endpoints", &corev1.Endpoints{}, metav1.NamespaceDefault, "kubernetes", countEndpointAddresses); err != nil { //nolint:staticcheck // the checks count Endpoints default/kubernetes, as Deckhouse does
		return nil, err
	}
	if c.tolerations, err = newModuleConfigReader(ctx, host); err != nil {
		return nil, err
	}
	if c.nodes, err = newNodeReader(ctx, host); err != nil {
		return nil, err
	}
	return c, nil
}

// followSingle builds a cache holding one named object and follows it.
func followSingle[T any](ctx context.Context, host module.Host, cacheName string, obj client.Object, namespace, name string, parse func(obj any) T) (*followed[T], error) {
	c, err := host.NewCache(cacheName, singleObject(obj, namespace, name))
	if err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("%T %s", obj, name)
	switch obj.(type) {
	case *corev1.Secret:
		what = "Secret " + namespace + "/" + name
	case *corev1.Endpoints: //nolint:staticcheck // see above
		what = "Endpoints " + namespace + "/" + name
	}
	return follow(what, inf, parse)
}

// IsCloudPermanent answers from the provider cluster configuration as the
// cache holds it. A missing Secret or key lists no group. Before the cache
// has listed, the answer is unknown and the conversion of that object fails,
// to be retried, rather than storing a guess.
func (c *clusterCache) IsCloudPermanent(name string) (bool, error) {
	p, err := c.provider.get()
	if err != nil {
		return false, err
	}
	return p.IsCloudPermanent(name)
}

// IsCloudPermanent answers from one parsed provider Secret.
func (p providerState) IsCloudPermanent(name string) (bool, error) {
	if p.permanentErr != nil {
		return false, p.permanentErr
	}
	return p.permanent[name], nil
}

// snapshot is the state the checks need for group, or an error naming
// every piece that is not loaded or cannot be parsed.
func (c *clusterCache) snapshot(group string) (ClusterState, error) {
	var problems []error
	var s ClusterState
	if cc, err := c.clusterConfig.get(); err != nil {
		problems = append(problems, err)
	} else if cc.err != nil {
		problems = append(problems, cc.err)
	} else {
		s.ClusterType = cc.config.ClusterType
		s.ClusterPrefix = cc.config.Cloud.Prefix
		s.DefaultCRI = cc.config.DefaultCRI
		s.PodSubnetNodeCIDRPrefix = int(cc.config.PodSubnetNodeCIDRPrefix)
	}
	if p, err := c.provider.get(); err != nil {
		problems = append(problems, err)
	} else if p.zonesErr != nil {
		problems = append(problems, p.zonesErr)
	} else {
		s.Zones = p.zones
	}
	if n, err := c.endpoints.get(); err != nil {
		problems = append(problems, err)
	} else {
		s.APIServerEndpoints = n
	}
	if t, err := c.tolerations.get(); err != nil {
		problems = append(problems, err)
	} else {
		s.CustomTolerationKeys = t
	}
	custom, unsupported, err := c.nodes.inGroup(group)
	if err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return ClusterState{}, errors.Join(problems...)
	}
	s.NodesWithCustomContainerd = custom
	s.NodesWithoutContainerdV2 = unsupported
	return s, nil
}
