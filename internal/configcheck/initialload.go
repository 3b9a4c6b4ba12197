package configcheck

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// A replica that starts (a rollout, a rescheduled Pod) loads each config
// and starts its watched resources' informers at run time, after the
// host's caches have synced. Until a config's stores hold what the API
// server has, its admissions can only answer "still loading"; a replica in
// the Service before then turns a routine upgrade into refused changes.
// So /readyz waits for the configs that existed when the replica started
// (configcheck/configs-loaded). Configs created later do not hold it: a
// replica already serving must not leave the Service because an author
// created a config.
//
// The wait is bounded. A watched resource whose informer never syncs (a
// CRD whose conversion webhook fails, a list that times out) is the
// author's or the cluster's problem, not a reason to keep every replica
// out of the Service, which would refuse what every other module guards.
// After initialLoadBound the replica becomes ready, says which configs were
// still loading, and those answer "still loading" until they have.
const initialLoadBound = 2 * time.Minute

// initialLoad is the configs-loaded readiness check.
type initialLoad struct {
	clock clock.PassiveClock
	// settled says whether the config is loaded as far as it can be; gone
	// whether it was deleted since.
	settled func(key spec.Key) (settled, gone bool)

	mu       sync.Mutex
	keys     []spec.Key // nil until the configs are listed
	listedAt time.Time
	done     bool
	log      func(pending []string)
}

// listed records the configs that existed when the replica started.
func (l *initialLoad) listed(keys []spec.Key) {
	keys = append([]spec.Key{}, keys...) // never nil: nil is "not listed yet"
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys, l.listedAt = keys, l.clock.Now()
}

// check is the readiness condition: nil once every config listed at start
// is loaded (or gone), or once the bound has passed; latched from then on.
func (l *initialLoad) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	if l.keys == nil {
		return fmt.Errorf("the HAProxyTemplateConfigs are not listed yet")
	}
	var pending []string
	for _, key := range l.keys {
		if settled, gone := l.settled(key); !settled && !gone {
			pending = append(pending, key.String())
		}
	}
	if len(pending) == 0 {
		l.done = true
		return nil
	}
	if l.clock.Since(l.listedAt) >= initialLoadBound {
		l.done = true
		if l.log != nil {
			l.log(pending)
		}
		return nil
	}
	shown := pending
	if len(shown) > 3 {
		shown = shown[:3]
	}
	more := ""
	if len(pending) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(pending)-len(shown))
	}
	return fmt.Errorf("the watched resources of %d of %d HAProxyTemplateConfigs are still loading (%s%s)",
		len(pending), len(l.keys), strings.Join(shown, ", "), more)
}

// settledState says whether key's config is loaded as far as it can be:
// its state is built (a config that does not compile has nothing more to
// load), its author's access checked, and each watched resource's store is synced, or its kind is known
// to be unreadable (not served, or forbidden to Gatehouse), which no wait
// changes. gone: the config is no longer in the cache.
func (m *Module) settledState(key spec.Key) (settled, gone bool) {
	cfg, err := m.storedConfig(context.Background(), key)
	if err != nil {
		return false, true
	}
	st := m.state(key)
	if st == nil || st.uid != cfg.GetUID() {
		return false, false
	}
	if st.compiled == nil {
		return true, false
	}
	if st.access.Load() == nil {
		// The author's access is checked after the stores start (for a
		// config recording no author, found empty): until then its
		// admissions cannot be judged either.
		return false, false
	}
	for _, f := range st.feeds {
		if f.synced() {
			continue
		}
		if k := f.kind; k.State() == module.KindPending || k.State() == module.KindServed {
			// Served but not handed to this feed yet counts as loading.
			return false, false
		}
	}
	return true, false
}

// addInitialLoadCheck registers configs-loaded with the host.
func (m *Module) addInitialLoadCheck(ctx context.Context) {
	log := logf.FromContext(ctx)
	m.initialLoad = &initialLoad{
		clock:   clock.RealClock{},
		settled: m.settledState,
		log: func(pending []string) {
			log.Info("ready while some configs' watched resources are still loading; their admissions answer \"still loading\" until they have",
				"bound", initialLoadBound, "configs", pending)
		},
	}
	m.host.AddReadyCheck("configs-loaded", m.initialLoad.check)
}
