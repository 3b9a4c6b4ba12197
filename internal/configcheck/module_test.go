package configcheck

import (
	"context"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// TestConfinementIsRequired: the module refuses to start where the kernel
// cannot confine checks and renderings, unless the administrator accepts it.
func TestConfinementIsRequired(t *testing.T) {
	complete := sandbox.Capabilities{LandlockABI: 6, Seccomp: true}
	if err := checkConfinement(complete, false); err != nil {
		t.Fatalf("complete confinement refused: %v", err)
	}
	lacking := sandbox.Capabilities{LandlockABI: 0, LandlockReason: "not enabled", Seccomp: true}
	err := checkConfinement(lacking, false)
	if err == nil || !strings.Contains(err.Error(), "--configcheck-confinement=bestEffort") || !strings.Contains(err.Error(), "not enabled") {
		t.Fatalf("checkConfinement without Landlock = %v; want a refusal naming what is missing and the flag", err)
	}
	if err := checkConfinement(lacking, true); err != nil {
		t.Fatalf("allowed unconfined but refused: %v", err)
	}
	for _, o := range []Options{{Confinement: ConfinementBestEffort}, {AllowUnconfined: true}} {
		if !o.bestEffort() {
			t.Errorf("%+v is not best effort", o)
		}
	}
	if (Options{}).bestEffort() || (Options{Confinement: ConfinementRequired}).bestEffort() {
		t.Error("the default is not required")
	}
	recordConfinement(lacking)
	for layer, want := range map[string]float64{"landlock_abi": 0, "seccomp": 1, "separate_identity": 0} {
		if got := testutil.ToFloat64(confinement.WithLabelValues(layer)); got != want {
			t.Errorf("gatehouse_configcheck_confinement{layer=%q} = %v, want %v", layer, got, want)
		}
	}
	// This machine (and CI's) has the whole confinement.
	if caps := sandbox.Available(); !caps.Complete() {
		t.Errorf("this kernel lacks %v: the confinement tests of internal/sandbox fail here too", caps.Missing())
	}
}

// TestRenderWorkersCloseOnEveryReplica: the render pool is closed when the
// host stops on followers too, not only on the leader.
func TestRenderWorkersCloseOnEveryReplica(t *testing.T) {
	closed := make(chan struct{})
	var r manager.Runnable = closeOnStop(func() { close(closed) })
	le, ok := r.(manager.LeaderElectionRunnable)
	if !ok || le.NeedLeaderElection() {
		t.Fatal("the render pool's closer waits for leadership: a follower never closes its workers")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Start(ctx) }()
	select {
	case <-closed:
		t.Fatal("closed before the host stopped")
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-closed
}

// TestLuaNeedsLandlock: where files are confined by nothing but their
// permissions, the one layer that lets a config load code is refused, with
// the reason; the checks themselves still run.
func TestLuaNeedsLandlock(t *testing.T) {
	t.Cleanup(func() { sandbox.LimitLandlockABI(-1) })
	sandbox.LimitLandlockABI(0)
	_, err := newChecker("", true, 0)
	if err == nil || !strings.Contains(err.Error(), "this kernel has no Landlock") || !strings.Contains(err.Error(), "simulated") {
		t.Fatalf("Lua allowed without Landlock: %v; want a refusal saying why", err)
	}
	if _, err := newChecker("", false, 0); err != nil {
		t.Fatalf("checks without Lua, without Landlock: %v", err)
	}
	sandbox.LimitLandlockABI(1)
	if _, err := newChecker("", true, 0); err != nil {
		t.Fatalf("Lua with Landlock ABI 1 (files confined): %v", err)
	}
}
