package app

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gatehouse-dev/gatehouse/internal/testing/testlog"
)

// A module's controller carries the module's logger and a name of the
// module's, needs leader election unless it says otherwise, and a name is
// the module's once: two Gatehouses in one process (the e2e tests) may
// each have it.
func TestNewControllerIsTheModules(t *testing.T) {
	mgr, err := manager.New(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs testlog.Lines
	noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	for range 2 {
		h := &host{g: &Gatehouse{Manager: mgr}, name: "mod", log: logs.Logger(t).WithName("mod")}
		leader, err := h.NewController("Thing", controller.Options{Reconciler: noop})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.NewController("Thing", controller.Options{Reconciler: noop}); err == nil {
			t.Fatal("a module's controller name was accepted twice")
		}
		everyReplica, err := h.NewController("Other", controller.Options{Reconciler: noop, NeedLeaderElection: ptr.To(false)})
		if err != nil {
			t.Fatal(err)
		}
		if !leader.(manager.LeaderElectionRunnable).NeedLeaderElection() || everyReplica.(manager.LeaderElectionRunnable).NeedLeaderElection() {
			t.Fatal("NeedLeaderElection: want the option's choice, true by default")
		}
		leader.GetLogger().Info("hello")
	}
	if got := logs.Matching(`mod/Controllers/Thing "level"`, `"msg"="hello"`, `"controller"="mod-thing"`); len(got) != 2 {
		t.Fatalf("want the line of each controller named mod/Controllers/Thing, controller mod-thing; got %q", got)
	}
}
