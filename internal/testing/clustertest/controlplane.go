package clustertest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/uninstall"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// Run is a TestMain's body: it starts a control plane, hands it to use
// (which keeps it for the package's tests), runs m and stops the control
// plane. Its result is the exit code. The control plane is shared by the
// package's tests; each starts its own Gatehouse on a free port and works
// in its own namespaces.
func Run(m *testing.M, use func(*testenv.ControlPlane)) int {
	cp, err := testenv.StartControlPlane(testenv.ControlPlaneOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	use(cp)
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop control plane:", err)
	}
	return code
}

// StartGatehouse starts an in-process Gatehouse on the shared control plane
// and, when the test ends, stops it and removes its webhook configuration, so
// that no later test is called into a stopped server.
func StartGatehouse(t testing.TB, cp *testenv.ControlPlane, opts app.Options) *testenv.Gatehouse {
	t.Helper()
	if opts.Log.GetSink() == nil {
		opts.Log = testr.NewWithInterface(t, testr.Options{Verbosity: 0})
	}
	if opts.Namespace == "" {
		opts.Namespace = "gatehouse-e2e"
	}
	g, err := testenv.StartGatehouse(context.Background(), cp, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Stop(); err != nil {
			t.Errorf("stop gatehouse: %v", err)
		}
		_ = cp.Client.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookconfig.ValidatingName}})
		_ = cp.Client.Delete(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookconfig.MutatingName}})
		// Its configurations and the conversions it took go with it, as
		// `gatehouse uninstall` removes them: a later test must never be
		// called into this stopped server, and an install of another name
		// never takes over a conversion this one left (a NodeGroup
		// conversion pointing here failed a later install's test).
		if err := uninstall.Run(context.Background(), uninstall.Options{Client: cp.Client, Instance: opts.Instance}); err != nil {
			t.Errorf("uninstall %s: %v", opts.Instance, err)
		}
	})
	return g
}
