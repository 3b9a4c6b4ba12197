package e2e

import (
	"os"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/testing/clustertest"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// controlPlane is shared by the package's tests; each test starts its own
// Gatehouse on a free port and works in its own namespaces.
var controlPlane *testenv.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(clustertest.Run(m, func(cp *testenv.ControlPlane) { controlPlane = cp }))
}

// startGatehouse is clustertest.StartGatehouse on the shared control plane.
func startGatehouse(t testing.TB, opts app.Options) *testenv.Gatehouse {
	t.Helper()
	return clustertest.StartGatehouse(t, controlPlane, opts)
}
