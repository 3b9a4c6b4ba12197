package e2e

import (
	"context"
	"errors"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testlog"
)

// TestGracefulLeaderReleaseIsLoggedAtInfo: a leader that is stopped gives
// its lease up through kube-apiserver and says so at info. Before, every
// graceful stop of the leader (each rolling update) logged the error
// "error received after stop sequence was engaged": "leader election lost",
// with a stack trace.
func TestGracefulLeaderReleaseIsLoggedAtInfo(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "leader")
	instance := "leader-" + randSuffix()
	var logs testlog.Lines
	g := startGatehouse(t, app.Options{
		Log: logs.Logger(t), Namespace: ns, Instance: instance, LeaderElection: true,
		Catalogue: catalogue.All(), Modules: map[string]app.ModuleConfig{"pvsafe": {Enabled: true}},
	})
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: ns, Name: app.LeaseName(instance)}
	eventually(t, "Gatehouse leads", func() error {
		if err := controlPlane.Client.Get(ctx, key, lease); err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return errors.New("the lease has no holder")
		}
		return nil
	})

	if err := g.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := controlPlane.Client.Get(ctx, key, lease); err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Fatalf("the lease is still held by %q after a graceful stop", *h)
	}
	// The manager reports the release from its own goroutine, which may
	// log after Start returned.
	const released, lost = `"msg"="leader lease released"`, `"error"="leader election lost"`
	eventually(t, "the release is reported", func() error {
		if logs.Has(released) || logs.Has(lost) {
			return nil
		}
		return errors.New("not yet")
	})
	if got := logs.Matching(lost); len(got) > 0 {
		t.Errorf("the graceful release was logged as an error: %q", got)
	}
	if !logs.Has(`"level"=0`, released) {
		t.Errorf("no info line %s", released)
	}
}
