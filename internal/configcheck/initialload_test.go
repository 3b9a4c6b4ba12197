package configcheck

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

func configsNamed(names ...string) []spec.Key {
	out := make([]spec.Key, len(names))
	for i, n := range names {
		ns, name, _ := strings.Cut(n, "/")
		out[i] = spec.GatehouseKey(types.NamespacedName{Namespace: ns, Name: name})
	}
	return out
}

// TestReadyOnceTheConfigsAtStartAreLoaded: a starting replica joins the
// Service only when the configs that existed at its start can be judged,
// stays in it whatever happens to configs afterwards, and does not wait for
// a config that never loads longer than the bound.
func TestReadyOnceTheConfigsAtStartAreLoaded(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0))
	state := map[string]string{} // key -> "settled", "gone", or loading
	var logged []string
	l := &initialLoad{
		clock: clk,
		settled: func(key spec.Key) (bool, bool) {
			return state[key.String()] == "settled", state[key.String()] == "gone"
		},
		log: func(pending []string) { logged = pending },
	}
	if err := l.check(); err == nil || !strings.Contains(err.Error(), "not listed") {
		t.Fatalf("before the configs are listed: %v; want not ready", err)
	}
	l.listed(configsNamed("a/one", "b/two", "c/three", "d/four", "e/five"))
	err := l.check()
	if err == nil || !strings.Contains(err.Error(), "5 of 5") || !strings.Contains(err.Error(), "a/one, b/two, c/three and 2 more") {
		t.Fatalf("nothing loaded: %v; want not ready, naming three configs and how many more", err)
	}
	state["a/one"], state["b/two"], state["c/three"], state["d/four"] = "settled", "gone", "settled", "settled"
	if err := l.check(); err == nil || !strings.Contains(err.Error(), "1 of 5") || !strings.Contains(err.Error(), "e/five") {
		t.Fatalf("one still loading: %v; want not ready naming e/five", err)
	}
	state["e/five"] = "settled"
	if err := l.check(); err != nil {
		t.Fatalf("all loaded or gone: %v; want ready", err)
	}
	state["a/one"] = "" // reloading after an edit, say
	if err := l.check(); err != nil {
		t.Fatalf("a config reloading after the replica became ready: %v; want it to stay ready", err)
	}
	if logged != nil {
		t.Errorf("logged %v although everything loaded in time", logged)
	}
}

func TestReadinessWaitsForAConfigThatNeverLoadsOnlySoLong(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0))
	var logged []string
	l := &initialLoad{
		clock:   clk,
		settled: func(spec.Key) (bool, bool) { return false, false },
		log:     func(pending []string) { logged = pending },
	}
	l.listed(configsNamed("tenant/broken"))
	clk.SetTime(clk.Now().Add(initialLoadBound - time.Second))
	if err := l.check(); err == nil {
		t.Fatal("ready before the bound while a config is loading")
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if err := l.check(); err != nil {
		t.Fatalf("at the bound: %v; want ready: one config must not keep every replica out of the Service", err)
	}
	if len(logged) != 1 || logged[0] != "tenant/broken" {
		t.Errorf("logged %v; want the config still loading named", logged)
	}
}

func TestNoConfigsMeansReadyAtOnce(t *testing.T) {
	l := &initialLoad{clock: clocktesting.NewFakePassiveClock(time.Now()),
		settled: func(spec.Key) (bool, bool) { return false, false }}
	l.listed(nil)
	if err := l.check(); err != nil {
		t.Fatalf("no configs: %v; want ready", err)
	}
}
