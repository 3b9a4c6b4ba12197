package v1alpha1

import (
	"testing"

	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/internal/fuzztest"
)

func TestFuzzSpokeHubSpoke(t *testing.T) {
	fuzztest.SpokeHubSpoke[NodeGroup](t, fuzzFuncs, fuzztest.DockerOnlyWithTypeDocker)
}

func TestFuzzHubSpokeHub(t *testing.T) { fuzztest.HubSpokeHub[NodeGroup](t, fuzzFuncs) }

// fuzzFuncs steer the enums and patterns of this version that the
// conversion treats specially towards their real values.
func fuzzFuncs(runtimeserializer.CodecFactory) []any {
	return []any{
		func(t *NodeType, c randfill.Continue) {
			*t = fuzztest.Pick(c, NodeTypeCloud, NodeTypeStatic, NodeTypeHybrid)
		},
		func(t *CRIType, c randfill.Continue) {
			*t = fuzztest.Pick(c, "", CRITypeDocker, CRITypeContainerd, CRITypeNotManaged)
		},
		func(s *ChaosSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Period = fuzztest.Pick(c, "", "30m", "6h", c.String(0))
		},
	}
}
