package nodegroup

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// The Secrets in kube-system the module reads, and their keys.
const (
	configNamespace = "kube-system"

	clusterConfigSecret = "d8-cluster-configuration"
	clusterConfigKey    = "cluster-configuration.yaml"

	providerConfigSecret = "d8-provider-cluster-configuration"
	providerConfigKey    = "cloud-provider-cluster-configuration.yaml"
	providerDiscoveryKey = "cloud-provider-discovery-data.json"
)

// defaultPodSubnetNodeCIDRPrefix is Deckhouse's default node pod subnet size.
const defaultPodSubnetNodeCIDRPrefix = 24

// clusterConfiguration is what the checks use from cluster-configuration.yaml.
type clusterConfiguration struct {
	ClusterType string `json:"clusterType"`
	Cloud       struct {
		Prefix string `json:"prefix"`
	} `json:"cloud"`
	DefaultCRI              string        `json:"defaultCRI"`
	PodSubnetNodeCIDRPrefix cidrPrefixLen `json:"podSubnetNodeCIDRPrefix"`
}

// cidrPrefixLen accepts the prefix length as a number or, as Deckhouse's
// schema writes it, a string.
type cidrPrefixLen int

func (p *cidrPrefixLen) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*p = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 32 {
		return fmt.Errorf("podSubnetNodeCIDRPrefix %s is not a prefix length between 0 and 32", b)
	}
	*p = cidrPrefixLen(n)
	return nil
}

// parseClusterConfiguration parses the YAML as YAML: the shell hook's regexes
// counted quotes into the prefix length and dropped every value when one of
// them was missing.
func parseClusterConfiguration(data []byte) (clusterConfiguration, error) {
	var c clusterConfiguration
	if err := yaml.Unmarshal(data, &c); err != nil {
		return clusterConfiguration{}, fmt.Errorf("Secret %s/%s key %s: %w", configNamespace, clusterConfigSecret, clusterConfigKey, err)
	}
	return c, nil
}

// parsePermanentGroups returns the names under nodeGroups[] of the provider
// cluster configuration; these groups are CloudPermanent. Missing data means
// none.
func parsePermanentGroups(data []byte) (map[string]bool, error) {
	var c struct {
		NodeGroups []struct {
			Name string `json:"name"`
		} `json:"nodeGroups"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("Secret %s/%s key %s: %w", configNamespace, providerConfigSecret, providerConfigKey, err)
	}
	names := make(map[string]bool, len(c.NodeGroups))
	for _, g := range c.NodeGroups {
		names[g.Name] = true
	}
	return names, nil
}

// parseZones returns the zones of the provider discovery data. Missing data
// means no zones, which turns the zone check off.
func parseZones(data []byte) ([]string, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, nil
	}
	var d struct {
		Zones []string `json:"zones"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("Secret %s/%s key %s: %w", configNamespace, providerConfigSecret, providerDiscoveryKey, err)
	}
	return d.Zones, nil
}

// errNotLoaded is returned while a cache has not delivered its first list.
var errNotLoaded = errors.New("not loaded yet: Gatehouse is starting or cannot list it; retry shortly")
