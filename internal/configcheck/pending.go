package configcheck

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// admissions serializes the admissions of one config and remembers the
// changes it admitted that its stores do not show yet.
//
// The turn is fair (package fair): the waiting admissions of each
// namespace take turns with the other namespaces' (a tenant's burst waits
// behind its own earlier admissions, never in front of another tenant's),
// dry runs after real changes, and a namespace with maxTenantWaiting
// admissions waiting has one more refused at once.
//
// Each admission is judged against a state; judged apart, two changes can
// each be fine and together break the rendering (three Ingresses created
// at once, each claiming the same backend name: each store lacks the other
// two). So one config's admissions take turns (turn), and each is judged
// against the stores plus the changes admitted before it that the stores
// do not show yet (pending). A config's turn is its own: other configs'
// admissions never wait for it.
//
// An admitted change may never be stored (another webhook or a quota
// refuses it after Gatehouse, etcd refuses its size, a dry run), so a
// pending change is kept until the stores show it or for ttl at most (the
// API server's request timeout, after which the write has landed or
// failed). While it is pending, a change is also judged without the
// pending changes of other objects: it must not need one that may never
// be stored (an Ingress naming a Service admitted a moment ago but not yet
// stored is refused: try again once it is).
type admissions struct {
	// turn is the lock, a fair queue of one slot, so that waiting for it
	// ends with the request's deadline.
	turn    *fair.Queue
	ttl     time.Duration
	now     func() time.Time
	pending []*pendingChange
}

// pendingChange is one admitted change to one watched resource's store:
// the object as stored, or nil for a removal.
type pendingChange struct {
	watched         string
	namespace, name string
	obj             map[string]any
	admitted        time.Time
}

// pendingTTL is how long an admitted change the stores do not show is kept:
// kube-apiserver's default request timeout, which bounds the write.
const pendingTTL = time.Minute

// maxTenantWaiting bounds the admissions of one namespace waiting for one
// config's turn: more than kubectl, Helm or a GitOps tool sends at once
// (they write objects one by one), few enough that a flood fails at once
// instead of holding connections and memory until its deadline.
const maxTenantWaiting = 8

func newAdmissions(ttl time.Duration, now func() time.Time) *admissions {
	turn, err := fair.New(fair.Options{Slots: 1, MaxWaiting: maxTenantWaiting})
	if err != nil {
		panic(err) // constant options
	}
	return &admissions{turn: turn, ttl: ttl, now: now}
}

// acquire waits for the config's turn, in party's turn among the waiting
// parties and with class's urgency (fair), until ctx ends; release ends it.
func (a *admissions) acquire(ctx context.Context, party string, class fair.Class) (release func(), err error) {
	release, err = a.turn.Acquire(ctx, party, class)
	switch {
	case errors.Is(err, fair.ErrFull):
		return nil, fmt.Errorf("this change was not judged: %w; try again once they are decided", err)
	case err != nil:
		return nil, fmt.Errorf("waiting for this config's earlier admissions to be decided: %w", err)
	}
	return release, nil
}

// Parties of the fair queues, as a refusal names them to the user who
// was refused: their own namespace, or the config they wrote to.
func tenantParty(namespace string) string {
	if namespace == "" {
		return "cluster-scoped objects"
	}
	return "namespace " + namespace
}

func configParty(key types.NamespacedName) string { return "HAProxyTemplateConfig " + key.String() }

func authorParty(namespace string) string {
	return "the HAProxyTemplateConfigs of namespace " + namespace
}

// classOf is a watched object's admission's urgency: a dry run stores
// nothing, so it waits behind every change to be stored.
func classOf(req admission.Request) fair.Class {
	if dryRun(req) {
		return fair.DryRun
	}
	return fair.Real
}

// getter reads one object of a watched resource's store.
type getter func(watched, namespace, name string) (map[string]any, bool)

// prune drops the changes the stores show (the object stored as admitted,
// or gone for a removal) and those older than ttl. The turn is held.
func (a *admissions) prune(get getter) {
	now := a.now()
	kept := a.pending[:0]
	for _, p := range a.pending {
		if now.Sub(p.admitted) >= a.ttl {
			continue
		}
		stored, ok := get(p.watched, p.namespace, p.name)
		if p.obj == nil && !ok || p.obj != nil && ok && equality.Semantic.DeepEqual(stored, p.obj) {
			continue
		}
		kept = append(kept, p)
	}
	clear(a.pending[len(kept):])
	a.pending = kept
}

// overlay shows stores with the pending changes applied. The turn is held.
func (a *admissions) overlay(stores map[string]render.IndexedStore) (map[string]render.IndexedStore, error) {
	if len(a.pending) == 0 {
		return stores, nil
	}
	out := make(map[string]render.IndexedStore, len(stores))
	for name, s := range stores {
		out[name] = s
	}
	for _, p := range a.pending {
		base, ok := out[p.watched]
		if !ok {
			continue
		}
		op, obj := render.OperationUpdate, p.obj
		if obj == nil {
			op, obj = render.OperationDelete, map[string]any{"metadata": map[string]any{"namespace": p.namespace, "name": p.name}}
		}
		o, err := render.Overlay(base, op, obj)
		if err != nil {
			return nil, err
		}
		out[p.watched] = o
	}
	return out, nil
}

// find returns the pending change of one object, or nil.
func (a *admissions) find(watched, namespace, name string) *pendingChange {
	for _, p := range a.pending {
		if p.watched == watched && p.namespace == namespace && p.name == name {
			return p
		}
	}
	return nil
}

// othersPending says whether a change of another object than this one is
// pending. The turn is held.
func (a *admissions) othersPending(watched, namespace, name string) bool {
	for _, p := range a.pending {
		if p.watched != watched || p.namespace != namespace || p.name != name {
			return true
		}
	}
	return false
}

// record remembers an admitted change (op on obj, as stored), replacing the
// pending change of the same object: of two writes to one object the API
// server stores the later admitted (the earlier, if still unwritten, fails
// its resourceVersion precondition and is admitted again). The turn is
// held.
func (a *admissions) record(watched string, op render.Operation, obj map[string]any) {
	meta, _ := obj["metadata"].(map[string]any)
	namespace, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	if name == "" {
		return
	}
	p := &pendingChange{watched: watched, namespace: namespace, name: name, admitted: a.now()}
	if op != render.OperationDelete {
		p.obj = obj
	}
	for i, q := range a.pending {
		if q.watched == watched && q.namespace == namespace && q.name == name {
			a.pending = append(a.pending[:i], a.pending[i+1:]...)
			break
		}
	}
	a.pending = append(a.pending, p)
}

// admissionsOf returns the admissions of the config key, made on first use.
func (m *Module) admissionsOf(key types.NamespacedName) *admissions {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.admitted == nil {
		m.admitted = map[types.NamespacedName]*admissions{}
	}
	a, ok := m.admitted[key]
	if !ok {
		a = newAdmissions(pendingTTL, time.Now)
		m.admitted[key] = a
	}
	return a
}

// forgetAdmissions drops a deleted config's admissions.
func (m *Module) forgetAdmissions(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.admitted, key)
}

// cachedGetter reads st's stores.
func (st *configState) cachedGetter() getter {
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
