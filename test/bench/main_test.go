package bench

import (
	"flag"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/testing/clustertest"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// controlPlane is shared by the package's benchmarks; each starts its own
// Gatehouse and fills namespaces of its own, which later runs (-count)
// reuse.
var controlPlane *testenv.ControlPlane

// TestMain starts the control plane only for a run that asks for
// benchmarks: make test runs this package without -bench, to keep the
// benchmarks compiling, and then there is nothing to start.
func TestMain(m *testing.M) {
	flag.Parse()
	if flag.Lookup("test.bench").Value.String() == "" {
		os.Exit(m.Run())
	}
	// controller-runtime's global logger, never set, prints a stack trace
	// into a benchmark's result line once the process is 30 seconds old;
	// each Gatehouse logs through its own.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(clustertest.Run(m, func(cp *testenv.ControlPlane) { controlPlane = cp }))
}

// eventually and randSuffix are clustertest's, under the names the e2e
// tests use.
var (
	eventually = clustertest.Eventually
	randSuffix = clustertest.RandSuffix
)
