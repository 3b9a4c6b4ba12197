package judge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/haproxy"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// Attribute names the objects that make a config's current state fail, for
// the Failing condition: the config's readers (its author, the platform
// team) see what to fix or whom to ask, while the last accepted rendering
// stays published.
//
// A failure is attributed by what it is, not by its text: each object
// changed since the last rendering that passed is put back as it was
// (removed when it is new, restored when it changed or was deleted), and
// it is part of the failure when the state then passes, or fails with
// fewer of haproxy's alerts and none new, or a render stops at another
// place. Three Ingresses claiming one backend name are each part of it:
// without any one of them, one of the two duplicate name alerts is gone.

// maxAttributed bounds the objects put back to attribute one failure:
// each costs a rendering and a haproxy -c run, on the leader.
const maxAttributed = 16

// GoodState is what each watched resource's store held at the last
// rendering that passed: its objects, in the store's order. It shares the
// objects with the stores (read-only); objects changed since are kept alive
// by it until the next rendering that passes.
type GoodState map[string][]map[string]any

func SnapshotOf(stores map[string]render.IndexedStore) GoodState {
	out := make(GoodState, len(stores))
	for name, s := range stores {
		out[name] = s.List()
	}
	return out
}

// suspect is an object changed since the last good state.
type suspect struct {
	watched, namespace, Name string
	// before is the object in the good state, nil when added since;
	// after is the object now, nil when deleted since.
	before, after map[string]any
}

func (s suspect) String() string {
	id := s.Name
	if s.namespace != "" {
		id = s.namespace + "/" + s.Name
	}
	switch {
	case s.before == nil:
		return s.watched + " " + id + " (new)"
	case s.after == nil:
		return s.watched + " " + id + " (deleted)"
	}
	return s.watched + " " + id + " (changed)"
}

// ChangedSince lists the objects of stores added, changed or deleted since
// good, by watched resource name, then namespace and name. Without a good
// state (none passed since Gatehouse started) every object is new.
func ChangedSince(good GoodState, stores map[string]render.IndexedStore) []suspect {
	var out []suspect
	for _, watched := range slices.Sorted(maps.Keys(stores)) {
		now := stores[watched].List()
		before := good[watched]
		i, j := 0, 0
		for i < len(before) || j < len(now) {
			var cmp int
			switch {
			case i == len(before):
				cmp = 1
			case j == len(now):
				cmp = -1
			default:
				cmp = compareIdentity(before[i], now[j])
			}
			switch {
			case cmp < 0:
				ns, name := IdentityOf(before[i])
				out = append(out, suspect{watched: watched, namespace: ns, Name: name, before: before[i]})
				i++
			case cmp > 0:
				ns, name := IdentityOf(now[j])
				out = append(out, suspect{watched: watched, namespace: ns, Name: name, after: now[j]})
				j++
			default:
				if !sameObject(before[i], now[j]) {
					ns, name := IdentityOf(now[j])
					out = append(out, suspect{watched: watched, namespace: ns, Name: name, before: before[i], after: now[j]})
				}
				i++
				j++
			}
		}
	}
	return out
}

func compareIdentity(a, b map[string]any) int {
	ans, an := IdentityOf(a)
	bns, bn := IdentityOf(b)
	if c := strings.Compare(ans, bns); c != 0 {
		return c
	}
	return strings.Compare(an, bn)
}

// sameObject compares two stored objects: the same map when the store did
// not replace it (the common case, and cheap), else by content.
func sameObject(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() || equality.Semantic.DeepEqual(a, b)
}

// putBack shows stores with s as it was in the good state.
func putBack(stores map[string]render.IndexedStore, s suspect) (map[string]render.IndexedStore, error) {
	out := make(map[string]render.IndexedStore, len(stores))
	for name, st := range stores {
		out[name] = st
	}
	op, obj := render.OperationUpdate, s.before
	if obj == nil {
		op, obj = render.OperationDelete, s.after
	}
	o, err := render.Overlay(stores[s.watched], op, obj)
	if err != nil {
		return nil, err
	}
	out[s.watched] = o
	return out, nil
}

// partOf says whether v, the state with one object put back, fails less
// than current: it passes; haproxy -c says fewer alerts and none new; a
// render or the policy stops elsewhere or not at all.
func partOf(v, current Verdict) bool {
	switch {
	case v.Denial == "":
		return true
	case current.Phase == PhaseHAProxy && len(current.Alerts.Keys) > 0:
		return v.Phase == PhaseHAProxy && v.Alerts.Fewer(current.Alerts)
	case current.Phase == PhaseHAProxy:
		return false
	}
	return v.Phase == current.Phase && v.Denial != current.Denial
}

// Attribution is the Failing condition's message for one failure.
type Attribution struct {
	// fingerprint identifies the failure and the suspects as they were,
	// so that an unchanged failure is not attributed again.
	Fingerprint string
	Culprits    []suspect
	examined    int
	suspects    int
	Fresh       bool // no good state: every object is a suspect
	Incomplete  string
}

// Attribute puts back each suspect (up to maxAttributed) and keeps those
// that are part of current's failure.
func Attribute(ctx context.Context, checker *haproxy.Checker, c *spec.Compiled, stores map[string]render.IndexedStore, current Verdict, suspects []suspect) Attribution {
	a := Attribution{suspects: len(suspects)}
	for _, s := range suspects[:min(len(suspects), maxAttributed)] {
		back, err := putBack(stores, s)
		if err != nil {
			a.Incomplete = err.Error()
			break
		}
		v := Judge(ctx, checker, c, DataOf(back), "")
		if v.Undecided != "" {
			a.Incomplete = v.Undecided
			break
		}
		a.examined++
		if partOf(v, current) {
			a.Culprits = append(a.Culprits, s)
		}
	}
	return a
}

// FingerprintOf identifies current's failure over suspects, each by its
// objects as stored.
func FingerprintOf(current Verdict, suspects []suspect) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", current.Phase, current.Denial)
	for _, k := range current.Alerts.Keys {
		h.Write(k[:])
	}
	for _, s := range suspects {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%x\x00%x\x00", s.watched, s.namespace, s.Name,
			reflect.ValueOf(s.before).UnsafePointer(), reflect.ValueOf(s.after).UnsafePointer())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Message is the Failing condition's message: the objects first (the
// failure itself is in Published's message).
func (a Attribution) Message() string {
	var b strings.Builder
	switch {
	case len(a.Culprits) > 0:
		names := make([]string, len(a.Culprits))
		for i, s := range a.Culprits {
			names[i] = s.String()
		}
		fmt.Fprintf(&b, "caused by %s", strings.Join(names, ", "))
	case a.suspects == 0:
		b.WriteString("no watched object changed since the last rendering that passed (a config change, or a failure of haproxy's own); see Published")
	default:
		b.WriteString("no single object put back fixes any of it")
	}
	if a.Fresh {
		b.WriteString("; Gatehouse has seen no rendering of this config pass since it started, so every object was a suspect")
	}
	if a.examined < a.suspects {
		fmt.Fprintf(&b, "; %d of %d objects changed since the last rendering that passed were examined", a.examined, a.suspects)
	}
	if a.Incomplete != "" {
		b.WriteString(" (stopped: " + a.Incomplete + ")")
	}
	b.WriteString(". Deleting or fixing them is always admitted; the last accepted rendering stays published")
	return b.String()
}
