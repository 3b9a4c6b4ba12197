package v1alpha1

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/fuzztest"
)

// FuzzNodeGroupJSONToHubAndBack decodes random JSON as a v1alpha1 NodeGroup,
// converts it to v1 and back, and checks the result encodes and converts
// to the same v1 object again (fuzztest.JSONToHubAndBack).
//
//	go test ./api/deckhouse.io/v1alpha1 -run '^$' -fuzz '^FuzzNodeGroupJSONToHubAndBack$' -fuzztime 30s
func FuzzNodeGroupJSONToHubAndBack(f *testing.F) {
	for _, s := range fuzztest.JSONSeeds(GroupVersion.String()) {
		f.Add([]byte(s))
	}
	for _, s := range versionSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fuzztest.JSONToHubAndBack[NodeGroup](t, raw)
	})
}

// versionSeeds use what v1alpha1 alone has.
var versionSeeds = []string{
	`{"apiVersion":"deckhouse.io/v1alpha1","kind":"NodeGroup","metadata":{"name":"old"},"spec":{"nodeType":"Cloud","kubernetesVersion":"1.33","static":{"internalNetworkCIDRs":["10.0.0.0/8"]},"docker":{"maxConcurrentDownloads":3,"manage":true},"cri":{"type":"Docker"}}}`,
	`{"apiVersion":"deckhouse.io/v1alpha1","kind":"NodeGroup","metadata":{"name":"nm"},"spec":{"nodeType":"Static","cri":{"type":"NotManaged"}}}`,
	// docker beside another type, or none, rides in the conversion data.
	`{"apiVersion":"deckhouse.io/v1alpha1","kind":"NodeGroup","metadata":{"name":"moved"},"spec":{"nodeType":"Static","cri":{"type":"Containerd"},"docker":{"maxConcurrentDownloads":2}}}`,
	`{"apiVersion":"deckhouse.io/v1alpha1","kind":"NodeGroup","metadata":{"name":"legacy"},"spec":{"nodeType":"Static","cri":{},"docker":{"manage":false}}}`,
	// A cri.docker an older conversion stored without a type, read back.
	`{"apiVersion":"deckhouse.io/v1alpha1","kind":"NodeGroup","metadata":{"name":"stored","annotations":{"gatehouse.dev/nodegroup-conversion-data":"{\"v1\":{\"spec\":{\"cri\":{\"docker\":{\"manage\":false}}}}}"}},"spec":{"nodeType":"Static","docker":{"manage":false}}}`,
}
