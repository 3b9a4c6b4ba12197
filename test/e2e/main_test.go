package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/testenv"
)

// controlPlane is shared by the package's tests; each test starts its own
// Gatehouse on a free port and works in its own namespaces.
var controlPlane *testenv.ControlPlane

func TestMain(m *testing.M) {
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	controlPlane = cp
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stop control plane:", err)
	}
	os.Exit(code)
}
