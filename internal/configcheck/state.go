package configcheck

import (
	"context"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/ondemand"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

// configState is what Gatehouse holds for one HAProxyTemplateConfig at one
// generation: its compilation, its embedded tests' report, and a store per
// watched resource fed by the shared informers. It is replaced whole when
// the config changes.
type configState struct {
	key        spec.Key
	uid        types.UID
	generation int64

	// compiled is nil when the config is invalid; invalid says why.
	compiled *spec.Compiled
	invalid  string
	// report is the embedded tests' result at this generation: the tests
	// read fixtures only, so they are run once per generation, not once per
	// admission request.
	report *suite.Report

	// watched resources by name: a feed, or for a kind no API serves (yet),
	// an empty store.
	feeds  map[string]*feed
	empty  map[string]*render.MemoryStore
	gvks   map[string]schema.GroupVersionKind
	scoped map[string]bool // cluster-scoped kinds
	// unresolved names the watched resources discovery does not know.
	unresolved []string
	// onDemand holds the objects of haptic's store: on-demand fetched for
	// the config's author (package ondemand); nil without such a resource.
	onDemand *ondemand.Set

	// author is who the config reads and publishes for (authz's record);
	// hasAuthor is false when its record is missing or not honoured, and
	// noAuthor then says why. record is the record as stored: a new one
	// (a claim) builds a new state. certs: it publishes a Secret too.
	author    authenticationv1.UserInfo
	hasAuthor bool
	noAuthor  string
	record    string
	certs     bool
	// access is where the author may have it read, as the access
	// controller last found (authz.Access); nil until the first check.
	access atomic.Pointer[authz.Access]
}

// permits says whether the objects of namespace may be in watched's store.
func (st *configState) permits(watched, namespace string) bool {
	return st.access.Load().Permits(watched, namespace)
}

// setAccess installs a and returns the access it replaces.
func (st *configState) setAccess(a *authz.Access) *authz.Access {
	return st.access.Swap(a)
}

// needsNamespaceChecks says whether a namespace created or relabelled may
// change what the config reads: a watched resource is read namespace by
// namespace, or the config was not checked yet.
func (st *configState) needsNamespaceChecks() bool {
	a := st.access.Load()
	if a == nil {
		return true
	}
	for _, w := range a.Watched {
		if w.PerNamespace {
			return true
		}
	}
	return false
}

// synced says whether every store holds what the API server has, for
// the namespaces the author's access was checked for.
func (st *configState) synced() bool {
	if st.access.Load() == nil {
		return false
	}
	for _, f := range st.feeds {
		if !f.synced() {
			return false
		}
	}
	return true
}

// loadWait bounds how long an admission waits for its config to load.
const loadWait = 5 * time.Second

// waitSynced waits, while ctx allows and at most loadWait, until synced.
// A config just created or changed loads on each replica at its own pace
// (its informers, then the access check's SubjectAccessReviews): a change
// that reaches a replica a moment behind the others is judged once it has
// caught up, not answered "still loading" (which the config's failure
// policy would turn into a refusal). It polls: the wait is rare (a config
// loading), short, and bounded.
func (st *configState) waitSynced(ctx context.Context) bool {
	if st.synced() {
		return true
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(loadWait)
	defer limit.Stop()
	for {
		select {
		case <-ctx.Done():
			return st.synced()
		case <-limit.C:
			return st.synced()
		case <-tick.C:
			if st.synced() {
				return true
			}
		}
	}
}

// stores are the data's resources: the real stores, by watched name.
func (st *configState) stores() map[string]render.IndexedStore {
	out := make(map[string]render.IndexedStore, len(st.feeds)+len(st.empty))
	for name, f := range st.feeds {
		out[name] = f.store
	}
	for name, s := range st.empty {
		out[name] = s
	}
	st.onDemand.AddStores(out)
	return out
}

// unchanged says whether a CREATE or UPDATE of obj would leave w's store,
// with the changes adm admitted before it, as it is: the same object is
// already there (a re-apply, or a change to ignored fields only). A DELETE
// always renders: an object missing from the store may only be late to
// arrive in it.
func (st *configState) unchanged(w *spec.Watched, op render.Operation, obj map[string]any, adm *guard.Admissions) bool {
	f := st.feeds[w.Name]
	if f == nil || !f.synced() || op == render.OperationDelete {
		return false
	}
	namespace, name := judge.IdentityOf(obj)
	if pending, ok := adm.PendingObject(w.Name, namespace, name); ok {
		return pending != nil && equality.Semantic.DeepEqual(pending, obj)
	}
	stored, ok := f.store.Get(namespace, name)
	return ok && equality.Semantic.DeepEqual(stored, obj)
}

// failedTests is the embedded tests' denial, or "" when they passed.
func (st *configState) failedTests() string {
	if st.report == nil || st.report.Failed == 0 {
		return ""
	}
	return st.report.Message()
}

func (m *Module) state(key spec.Key) *configState {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.states[key]
}

// allConfigRequests are reconcile requests for every config: what a
// controller over configs starts with.
func (m *Module) allConfigRequests() []reconcile.Request {
	var out []reconcile.Request
	for _, st := range m.allStates() {
		out = append(out, st.key.Request())
	}
	return out
}

func (m *Module) allStates() []*configState {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*configState, 0, len(m.states))
	for _, st := range m.states {
		out = append(out, st)
	}
	return out
}

// admissionsOf returns the admissions of the config key, made on first use.
func (m *Module) admissionsOf(key spec.Key) *guard.Admissions {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.admitted == nil {
		m.admitted = map[spec.Key]*guard.Admissions{}
	}
	a, ok := m.admitted[key]
	if !ok {
		a = guard.NewAdmissions(guard.PendingTTL, time.Now)
		m.admitted[key] = a
	}
	return a
}

// forgetAdmissions drops a deleted config's admissions.
func (m *Module) forgetAdmissions(key spec.Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.admitted, key)
}

// cachedGetter reads st's stores.
func (st *configState) cachedGetter() guard.Getter {
	return func(watched, namespace, name string) (map[string]any, bool) {
		if f := st.feeds[watched]; f != nil {
			return f.store.Get(namespace, name)
		}
		if s := st.empty[watched]; s != nil {
			return s.Get(namespace, name)
		}
		return nil, false
	}
}
