package v1alpha2

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/fuzztest"
)

// FuzzNodeGroupJSONToHubAndBack decodes random JSON as a v1alpha2 NodeGroup,
// converts it to v1 and back, and checks the result encodes and converts
// to the same v1 object again (fuzztest.JSONToHubAndBack).
//
//	go test ./api/deckhouse.io/v1alpha2 -run '^$' -fuzz '^FuzzNodeGroupJSONToHubAndBack$' -fuzztime 30s
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

// versionSeeds use what v1alpha2 alone has.
var versionSeeds = []string{
	`{"apiVersion":"deckhouse.io/v1alpha2","kind":"NodeGroup","metadata":{"name":"d"},"spec":{"nodeType":"Static","cri":{"type":"Docker","docker":{"maxConcurrentDownloads":3,"manage":true}}}}`,
	`{"apiVersion":"deckhouse.io/v1alpha2","kind":"NodeGroup","metadata":{"name":"nm"},"spec":{"nodeType":"Static","cri":{"type":"NotManaged","notManaged":{"criSocketPath":"/run/x.sock"}}}}`,
}
