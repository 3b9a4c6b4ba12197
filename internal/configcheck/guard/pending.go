package guard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// Admissions serializes the admissions of one config and remembers the
// changes it admitted that its stores do not show yet.
//
// The turns are fair (package fair): the waiting admissions of each party
// (a namespace) take turns with the other parties' (a tenant's burst waits
// behind its own earlier admissions, never in front of another tenant's),
// and a party with maxTenantWaiting admissions waiting has one more
// refused at once. A deletion goes ahead of its own party's waiters, and
// takes the place of the newest when the party is full: a tenant's burst
// never refuses its own deletion (fair.Queue.AcquireFirst).
//
// Each admission is judged against a state; judged apart, two changes can
// each be fine and together break the rendering (three Ingresses created
// at once, each claiming the same backend name: each store lacks the other
// two). So one config's recorded admissions take turns (turn), and each is
// judged against the stores plus the changes admitted before it that the
// stores do not show yet (pending). A config's turn is its own: other
// configs' admissions never wait for it.
//
// Only a change the API server will store is recorded: not a dry run, and
// not a review whose caller Gatehouse could not verify (module.
// VerifiedCaller): anyone reaching the port may post one, claiming any
// namespace, and a ghost recorded from it would be judged against every
// tenant's changes for pendingTTL (one ghost Ingress refused tenant B's
// backend name for 60 s; twelve of 1,000 paths each made B's admissions
// twice as slow). Unrecorded admissions are judged against the pending
// changes too, but never hold the turn a recorded one waits for: they take
// turns of their own (unrecorded), so that a flood of dry runs or of
// forged reviews delays the changes to be stored by nothing but their
// renderings' share of the workers (where the workers' reserve keeps one
// for real changes).
//
// An admitted change may never be stored (another webhook or a quota
// refuses it after Gatehouse, etcd refuses its size), so a pending change
// is kept until the stores show it or for ttl at most (the API server's
// request timeout, after which the write has landed or failed). While it
// is pending, a change is also judged without the pending changes of other
// objects: it must not need one that may never be stored (an Ingress
// naming a Service admitted a moment ago but not yet stored is refused:
// try again once it is).
type Admissions struct {
	// turn is the lock of recorded admissions, a fair queue of one slot,
	// so that waiting for it ends with the request's deadline;
	// unrecorded is the same for the others.
	turn, unrecorded *fair.Queue
	ttl              time.Duration
	now              func() time.Time

	// mu guards pending: a recorded and an unrecorded admission read it
	// at once.
	mu      sync.Mutex
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

// PendingTTL is how long an admitted change the stores do not show is kept:
// kube-apiserver's default request timeout, which bounds the write.
const PendingTTL = time.Minute

// MaxTenantWaiting bounds the admissions of one party waiting for one
// config's turn: more than kubectl, Helm or a GitOps tool sends at once
// (they write objects one by one), few enough that a flood fails at once
// instead of holding connections and memory until its deadline.
const MaxTenantWaiting = 8

func NewAdmissions(ttl time.Duration, now func() time.Time) *Admissions {
	turn, err := fair.New(fair.Options{Slots: 1, MaxWaiting: MaxTenantWaiting})
	if err != nil {
		panic(err) // constant options
	}
	unrecorded, err := fair.New(fair.Options{Slots: 1, MaxWaiting: MaxTenantWaiting})
	if err != nil {
		panic(err)
	}
	return &Admissions{turn: turn, unrecorded: unrecorded, ttl: ttl, now: now}
}

// Acquire waits for req's turn among the config's admissions until ctx
// ends: the recorded admissions' turn when req is recorded, the others'
// otherwise, in its party's turn among the waiting parties (partyOf) and
// with its class's urgency (classOf). release ends it.
func (a *Admissions) Acquire(ctx context.Context, req admission.Request) (release func(), err error) {
	q := a.unrecorded
	if Recorded(ctx, req) {
		q = a.turn
	}
	acquire := q.Acquire
	if req.Operation == admissionv1.Delete {
		acquire = q.AcquireFirst
	}
	release, err = acquire(ctx, partyOf(ctx, req), ClassOf(ctx, req))
	switch {
	case errors.Is(err, fair.ErrFull):
		return nil, fmt.Errorf("this change was not judged: %w; try again once they are decided", err)
	case err != nil:
		return nil, fmt.Errorf("waiting for this config's earlier admissions to be decided: %w", err)
	}
	return release, nil
}

// Recorded says whether req's admission is recorded as a pending change:
// only a change the API server will store, which a dry run is not and a
// review from a caller Gatehouse did not verify need not be.
func Recorded(ctx context.Context, req admission.Request) bool {
	return !DryRun(req) && module.VerifiedCaller(ctx)
}

// Parties of the fair queues, as a refusal names them to the user who
// was refused: their own namespace, or the config they wrote to.
func tenantParty(namespace string) string {
	if namespace == "" {
		return "cluster-scoped objects"
	}
	return "namespace " + namespace
}

// partyOf is the party of req's admission: its namespace, which the API
// server wrote. A review from a caller Gatehouse could not verify may
// claim any namespace, so its party is also the user it claims (bounded):
// a flood posted straight to the port claiming tenant B's namespace waits
// in a party of its own, not in front of B's changes, unless it also
// names B's user.
func partyOf(ctx context.Context, req admission.Request) string {
	party := tenantParty(req.Namespace)
	if module.VerifiedCaller(ctx) {
		return party
	}
	return fmt.Sprintf("%s as user %q", party, Bounded(req.UserInfo.Username, 256))
}

func ConfigParty(key spec.Key) string { return "HAProxyTemplateConfig " + key.String() }

func AuthorParty(namespace string) string {
	return "the HAProxyTemplateConfigs of namespace " + namespace
}

// ClassOf is a watched object's admission's urgency: a dry run stores
// nothing, and a review Gatehouse cannot tell came from the API server may
// store nothing either, so both wait behind every change to be stored, in
// the config's turns and for the render workers (whose reserve is for
// real changes).
func ClassOf(ctx context.Context, req admission.Request) fair.Class {
	if DryRun(req) || !module.VerifiedCaller(ctx) {
		return fair.DryRun
	}
	return fair.Real
}

// Getter reads one object of a watched resource's store.
type Getter func(watched, namespace, name string) (map[string]any, bool)

// Prune drops the changes the stores show (the object stored as admitted,
// or gone for a removal) and those older than ttl. A turn is held.
func (a *Admissions) Prune(get Getter) {
	a.mu.Lock()
	defer a.mu.Unlock()
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

// Overlay shows stores with the pending changes applied. A turn is held.
func (a *Admissions) Overlay(stores map[string]render.IndexedStore) (map[string]render.IndexedStore, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
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

// PendingObject returns the pending change of one object: the object as
// it will be stored, nil for a removal; ok is false when none is pending.
func (a *Admissions) PendingObject(watched, namespace, name string) (obj map[string]any, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pending {
		if p.watched == watched && p.namespace == namespace && p.name == name {
			return p.obj, true
		}
	}
	return nil, false
}

// PendingChanges counts the changes pending.
func (a *Admissions) PendingChanges() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pending)
}

// Waiting counts the admissions waiting for the recorded admissions' turn
// (recorded), or for the others'.
func (a *Admissions) Waiting(recorded bool) int {
	if recorded {
		return a.turn.Waiting()
	}
	return a.unrecorded.Waiting()
}

// OthersPending says whether a change of another object than this one is
// pending. A turn is held.
func (a *Admissions) OthersPending(watched, namespace, name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pending {
		if p.watched != watched || p.namespace != namespace || p.name != name {
			return true
		}
	}
	return false
}

// Record remembers an admitted change (op on obj, as stored), replacing the
// pending change of the same object: of two writes to one object the API
// server stores the later admitted (the earlier, if still unwritten, fails
// its resourceVersion precondition and is admitted again). The turn is
// held, by a recorded admission only (recorded).
func (a *Admissions) Record(watched string, op render.Operation, obj map[string]any) {
	meta, _ := obj["metadata"].(map[string]any)
	namespace, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	if name == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
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
