package nodegroup

import corev1 "k8s.io/api/core/v1"

type clusterConfigState struct {
	config clusterConfiguration
	err    error
}

type providerState struct {
	permanent    map[string]bool
	permanentErr error
	zones        []string
	zonesErr     error
}

func parseClusterConfigSecret(obj any) clusterConfigState {
	secret, ok := obj.(*corev1.Secret)
	if !ok || len(secret.Data[clusterConfigKey]) == 0 {
		return clusterConfigState{}
	}
	config, err := parseClusterConfiguration(secret.Data[clusterConfigKey])
	return clusterConfigState{config: config, err: err}
}

func parseProviderSecret(obj any) providerState {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return providerState{}
	}
	var s providerState
	s.permanent, s.permanentErr = parsePermanentGroups(secret.Data[providerConfigKey])
	s.zones, s.zonesErr = parseZones(secret.Data[providerDiscoveryKey])
	return s
}

func countEndpointAddresses(obj any) int {
	ep, ok := obj.(*corev1.Endpoints) //nolint:staticcheck // the checks count Endpoints default/kubernetes, as Deckhouse does
	if !ok {
		return 0
	}
	n := 0
	for _, subset := range ep.Subsets {
		n += len(subset.Addresses)
	}
	return n
}
