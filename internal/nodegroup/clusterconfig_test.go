package nodegroup

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/gatehouse-dev/gatehouse/internal/module/moduletest"
)

func TestParseClusterConfiguration(t *testing.T) {
	cases := []struct {
		name, yaml   string
		clusterType  string
		prefix       string
		defaultCRI   string
		prefixLength int
	}{
		{"cloud cluster with a quoted prefix", "apiVersion: deckhouse.io/v1\nkind: ClusterConfiguration\nclusterType: Cloud\ncloud:\n  provider: OpenStack\n  prefix: \"demo\"\ndefaultCRI: ContainerdV2\npodSubnetNodeCIDRPrefix: \"22\"\n",
			"Cloud", "demo", "ContainerdV2", 22},
		{"numeric node subnet prefix", "clusterType: Static\npodSubnetNodeCIDRPrefix: 23\n", "Static", "", "", 23},
		{"values the regexes of the shell hook missed", "clusterType: Static\n", "Static", "", "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseClusterConfiguration([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if c.ClusterType != tc.clusterType || c.Cloud.Prefix != tc.prefix || c.DefaultCRI != tc.defaultCRI || int(c.PodSubnetNodeCIDRPrefix) != tc.prefixLength {
				t.Fatalf("parsed %+v", c)
			}
		})
	}
	for _, broken := range []string{"clusterType: [", "podSubnetNodeCIDRPrefix: \"/24\"", "podSubnetNodeCIDRPrefix: 33"} {
		_, err := parseClusterConfiguration([]byte(broken))
		if err == nil || !strings.Contains(err.Error(), "Secret kube-system/d8-cluster-configuration key cluster-configuration.yaml") {
			t.Errorf("%q: error %v, want one naming the Secret and key", broken, err)
		}
	}
}

func TestParseProviderSecret(t *testing.T) {
	p := providerWith(map[string]string{
		providerConfigKey:    openStackConfig,
		providerDiscoveryKey: `{"zones":["nova","az-2"],"flavors":[]}`,
	})
	if p.permanentErr != nil || p.zonesErr != nil {
		t.Fatal(p.permanentErr, p.zonesErr)
	}
	if !p.permanent["front-nm"] || p.permanent["another"] || !slices.Equal(p.zones, []string{"nova", "az-2"}) {
		t.Fatalf("parsed %+v", p)
	}

	empty := providerWith(nil)
	if empty.permanentErr != nil || empty.zonesErr != nil || len(empty.permanent) != 0 || empty.zones != nil {
		t.Fatalf("a Secret without the keys parsed as %+v", empty)
	}

	broken := providerWith(map[string]string{providerDiscoveryKey: "{zones"})
	if broken.zonesErr == nil || !strings.Contains(broken.zonesErr.Error(), "key cloud-provider-discovery-data.json") {
		t.Fatalf("zones error %v", broken.zonesErr)
	}
}

func TestCountEndpointAddresses(t *testing.T) {
	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{ //nolint:staticcheck // the module reads v1 Endpoints
		{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}}},
		{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.3"}}},
	}}
	if n := countEndpointAddresses(ep); n != 3 {
		t.Fatalf("%d addresses, want 3", n)
	}
	if n := countEndpointAddresses(nil); n != 0 {
		t.Fatalf("%d addresses without the object", n)
	}
}

// Before the caches list, nothing is guessed: the conversion of a group
// that needs the provider configuration and every check say what is missing.
func TestNothingIsGuessedBeforeTheCachesList(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	host := moduletest.New(scheme, "Node")
	c, err := newClusterCache(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.IsCloudPermanent("edge"); !errors.Is(err, errNotLoaded) {
		t.Fatalf("lookup error %v, want errNotLoaded", err)
	}
	_, err = c.snapshot("edge")
	for _, want := range []string{"Secret kube-system/d8-cluster-configuration", "Secret kube-system/d8-provider-cluster-configuration",
		"Endpoints default/kubernetes", "Nodes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("snapshot error %v does not name %s", err, want)
		}
	}
	// ModuleConfig is optional: its kind is followed, never cached blindly.
	if len(host.Followed) != 1 || host.Followed[0].GetObjectKind().GroupVersionKind() != moduleConfigGVK {
		t.Errorf("followed kinds %v, want ModuleConfig only", host.Followed)
	}
	if keys, err := c.tolerations.get(); err != nil || keys != nil {
		t.Errorf("ModuleConfig while its CRD is not served: %v %v, want no keys", keys, err)
	}
}
