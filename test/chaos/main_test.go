package chaos

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestMain sets controller-runtime's global logger, which envtest's control
// plane logs through: never set, it prints a stack trace into the test's
// output once the process is 30 seconds old, which reads like a failure
// and buries the real one. Gatehouse runs as a process and logs into the
// test's log directory (logDir).
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
