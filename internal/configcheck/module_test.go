package configcheck

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// TestConfinementIsRequired: the module refuses to start where the kernel
// cannot confine checks and renderings, unless the administrator accepts it.
func TestConfinementIsRequired(t *testing.T) {
	complete := sandbox.Capabilities{LandlockABI: 6, Seccomp: true}
	if err := checkConfinement(complete, false, false, nil); err != nil {
		t.Fatalf("complete confinement refused: %v", err)
	}
	lacking := sandbox.Capabilities{LandlockABI: 0, LandlockReason: "not enabled", Seccomp: true}
	err := checkConfinement(lacking, false, false, nil)
	if err == nil || !strings.Contains(err.Error(), "--configcheck-confinement=bestEffort") || !strings.Contains(err.Error(), "not enabled") {
		t.Fatalf("checkConfinement without Landlock = %v; want a refusal naming what is missing and the flag", err)
	}
	if err := checkConfinement(lacking, true, false, nil); err != nil {
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
	// A runner asked for but not reached: refused under required, with
	// the reason; started under bestEffort.
	unreachable := errors.New("sandbox: reaching the sandbox runner: connection refused")
	err = checkConfinement(complete, false, true, unreachable)
	if err == nil || !strings.Contains(err.Error(), "the separate identity") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("checkConfinement without the runner asked for = %v; want a refusal naming the separate identity and why", err)
	}
	if err := checkConfinement(complete, true, true, unreachable); err != nil {
		t.Fatalf("bestEffort without the runner refused: %v", err)
	}
	separate := complete
	separate.SeparateIdentity, separate.RunnerUID, separate.RunnerGID = true, 65533, 65533
	if err := checkConfinement(separate, false, true, nil); err != nil {
		t.Fatalf("complete confinement with the runner refused: %v", err)
	}
	metrics.RecordConfinement(separate, true)
	if got := testutil.ToFloat64(metrics.Confinement.WithLabelValues("separate_identity")); got != 1 {
		t.Errorf("gatehouse_configcheck_confinement{layer=\"separate_identity\"} = %v under a runner, want 1", got)
	}
	metrics.RecordConfinement(lacking, false)
	for layer, want := range map[string]float64{"landlock_abi": 0, "seccomp": 1, "separate_identity": 0} {
		if got := testutil.ToFloat64(metrics.Confinement.WithLabelValues(layer)); got != want {
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
	_, err := newChecker("", "", true, 0)
	if err == nil || !strings.Contains(err.Error(), "this kernel has no Landlock") || !strings.Contains(err.Error(), "simulated") {
		t.Fatalf("Lua allowed without Landlock: %v; want a refusal saying why", err)
	}
	if _, err := newChecker("", "", false, 0); err != nil {
		t.Fatalf("checks without Lua, without Landlock: %v", err)
	}
	sandbox.LimitLandlockABI(1)
	if _, err := newChecker("", "", true, 0); err != nil {
		t.Fatalf("Lua with Landlock ABI 1 (files confined): %v", err)
	}
}

// TestChecksRunUnderTheRunner runs haproxy -c and a rendering through a
// runner under 65534:65534 (make run's --sandbox-runner-user), as root
// does here and in CI: the check directory and the workers' directory are
// shared with the runner's group, and verdicts come back as without it.
func TestChecksRunUnderTheRunner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test starts a sandbox runner under user 65534, which needs root (CI runs the tests as root)")
	}
	runner, err := startRunner(t.Context(), Options{RunnerUser: "65534:65534"})
	if err != nil {
		t.Fatal(err)
	}
	sandbox.UseRunner(runner)
	t.Cleanup(func() { sandbox.UseRunner(nil); _ = runner.Close() })
	checker, err := newChecker("", "", false, 1)
	if err != nil {
		t.Fatal(err)
	}
	valid := "global\n  maxconn 10\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind :8080\n  default_backend b\nbackend b\n  server s 127.0.0.1:80\n"
	v, err := checker.Check(t.Context(), render.Output{HAProxyConfig: valid})
	if err != nil || !v.Valid {
		t.Fatalf("a valid configuration under the runner: %+v, %v", v, err)
	}
	v, err = checker.Check(t.Context(), render.Output{HAProxyConfig: valid + "backend b2\n  server s2 no-such-host.invalid:80 nonsense-keyword\n"})
	if err != nil || v.Valid {
		t.Fatalf("an invalid configuration under the runner: %+v, %v", v, err)
	}
	pool, err := newRenderPool(Options{RenderWorkers: 1}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	r, err := pool.Compile(t.Context(), render.Templates{HAProxyConfig: "global # {{ 1 }}\n"}, "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Render(t.Context(), render.Data{})
	if err != nil || out.HAProxyConfig != "global # 1\n" {
		t.Fatalf("a rendering under the runner: %q, %v", out.HAProxyConfig, err)
	}
}
