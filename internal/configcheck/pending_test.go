package configcheck

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func names(t *testing.T, s render.IndexedStore) []string {
	t.Helper()
	var out []string
	for _, obj := range s.List() {
		ns, name := judge.IdentityOf(obj)
		out = append(out, ns+"/"+name)
	}
	return out
}

func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPendingOverlay(t *testing.T) {
	c, errs := spec.Compile(judgeSpec(), inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	w := c.Watched["ingresses"]
	cache, err := render.NewMemoryStore(w.Indexer, w.Stored(ingressWithLine("old", "x")), w.Stored(ingressWithLine("kept", "x")))
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]render.IndexedStore{"ingresses": cache}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	adm := guard.NewAdmissions(time.Minute, clock.now)

	view := func() []string {
		t.Helper()
		o, err := adm.Overlay(stores)
		if err != nil {
			t.Fatal(err)
		}
		return names(t, o["ingresses"])
	}
	if got := view(); !sameNames(got, []string{"app/kept", "app/old"}) {
		t.Fatalf("nothing pending: %v", got)
	}
	adm.Record("ingresses", render.OperationCreate, w.Stored(ingressWithLine("new", "a")))
	adm.Record("ingresses", render.OperationDelete, w.Stored(ingressWithLine("old", "x")))
	if got := view(); !sameNames(got, []string{"app/kept", "app/new"}) {
		t.Fatalf("a create and a delete pending: %v", got)
	}
	// A later admitted change of the same object replaces the earlier.
	adm.Record("ingresses", render.OperationUpdate, w.Stored(ingressWithLine("new", "b")))
	o, err := adm.Overlay(stores)
	if err != nil {
		t.Fatal(err)
	}
	got, err := o["ingresses"].GetSingle("app", "new")
	if err != nil || got["spec"].(map[string]any)["line"] != "b" {
		t.Fatalf("the later change of app/new is shown: %v, %v", got, err)
	}
	if adm.PendingChanges() != 2 {
		t.Fatalf("%d pending changes, want 2 (one per object)", adm.PendingChanges())
	}
	if !adm.OthersPending("ingresses", "app", "new") {
		t.Fatal("app/old's deletion is pending beside app/new")
	}
	alone := guard.NewAdmissions(time.Minute, clock.now)
	alone.Record("ingresses", render.OperationCreate, w.Stored(ingressWithLine("new", "a")))
	if alone.OthersPending("ingresses", "app", "new") || !alone.OthersPending("ingresses", "app", "other") {
		t.Fatal("othersPending counts the changes of other objects only")
	}

	get := func(watched, namespace, name string) (map[string]any, bool) { return cache.Get(namespace, name) }
	t.Run("kept while the cache does not show them", func(t *testing.T) {
		adm.Prune(get)
		if adm.PendingChanges() != 2 {
			t.Fatalf("%d pending, want 2", adm.PendingChanges())
		}
	})
	t.Run("dropped once the cache shows them", func(t *testing.T) {
		if err := cache.Upsert(w.Stored(ingressWithLine("new", "a"))); err != nil {
			t.Fatal(err)
		}
		adm.Prune(get)
		if adm.PendingChanges() != 2 {
			t.Fatal("the cache shows an earlier version of app/new, not the pending one: still pending")
		}
		if err := cache.Upsert(w.Stored(ingressWithLine("new", "b"))); err != nil {
			t.Fatal(err)
		}
		cache.Delete("app", "old")
		adm.Prune(get)
		if adm.PendingChanges() != 0 {
			t.Fatalf("%d pending after the cache shows both", adm.PendingChanges())
		}
	})
	t.Run("dropped after the bound when never stored", func(t *testing.T) {
		adm.Record("ingresses", render.OperationCreate, w.Stored(ingressWithLine("never", "a")))
		clock.t = clock.t.Add(59 * time.Second)
		adm.Prune(get)
		if adm.PendingChanges() != 1 {
			t.Fatal("dropped before the bound")
		}
		clock.t = clock.t.Add(time.Second)
		adm.Prune(get)
		if adm.PendingChanges() != 0 {
			t.Fatal("kept past the bound")
		}
	})
}

// TestPendingJudgedTogether is the concurrent-creates attack on the
// judgement: three Ingresses, each fine alone, that together break
// haproxy -c. Judged in turn against the cache plus the changes admitted
// before it, only the first is admitted.
func TestPendingJudgedTogether(t *testing.T) {
	c, errs := spec.Compile(judgeSpec(), inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	w := c.Watched["ingresses"]
	cache, err := render.NewMemoryStore(w.Indexer)
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]render.IndexedStore{"ingresses": cache}
	m := &Module{checker: testChecker(t, nil)}
	adm := guard.NewAdmissions(time.Minute, time.Now)
	// A section keyword starts a section wherever it is indented: each
	// Ingress declares backend "dup", which one may, and two may not.
	line := "backend dup"
	var admitted []string
	for _, name := range []string{"one", "two", "three"} {
		obj := w.Stored(ingressWithLine(name, line))
		withPending, err := adm.Overlay(stores)
		if err != nil {
			t.Fatal(err)
		}
		data, err := judge.Overlaid(withPending, "ingresses", render.OperationCreate, obj)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		v := m.judge(ctx, c, data, "")
		apart := m.judge(ctx, c, judgeData(t, c, obj), "")
		cancel()
		if v.Undecided != "" || apart.Undecided != "" {
			t.Fatal(v.Undecided, apart.Undecided)
		}
		if apart.Denial != "" {
			t.Fatalf("Ingress %s alone must pass: %s", name, apart.Denial)
		}
		if v.Denial == "" {
			admitted = append(admitted, name)
			adm.Record("ingresses", render.OperationCreate, obj)
		}
	}
	if !sameNames(admitted, []string{"one"}) {
		t.Fatalf("admitted %v; judged together only the first may be", admitted)
	}
}

func TestAdmissionsTakeTurnsPerConfig(t *testing.T) {
	m := &Module{}
	a := m.admissionsOf(spec.GatehouseKey(types.NamespacedName{Namespace: "lb", Name: "a"}))
	b := m.admissionsOf(spec.GatehouseKey(types.NamespacedName{Namespace: "lb", Name: "b"}))
	if m.admissionsOf(spec.GatehouseKey(types.NamespacedName{Namespace: "lb", Name: "a"})) != a {
		t.Fatal("one config has one turn")
	}
	verified := module.WithVerifiedCaller(context.Background())
	create := func(namespace string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: namespace, Operation: admissionv1.Create}}
	}
	release, err := a.Acquire(verified, create("tenant-a"))
	if err != nil {
		t.Fatal(err)
	}
	// Another config's admissions do not wait for a's.
	releaseB, err := b.Acquire(verified, create("tenant-a"))
	if err != nil {
		t.Fatal("another config's turn waited:", err)
	}
	releaseB()
	// a's next admission, of another tenant, waits until its own
	// deadline.
	ctx, cancel := context.WithCancel(verified)
	waited := make(chan error, 1)
	go func() {
		_, err := a.Acquire(ctx, create("tenant-b"))
		waited <- err
	}()
	for a.Waiting(true) != 1 {
		select {
		case err := <-waited:
			t.Fatalf("a second admission of the same config did not wait for the first: %v", err)
		default:
			runtime.Gosched()
		}
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want the waiting admission to end with its context", err)
	}
	release()
	again, err := a.Acquire(verified, create("tenant-b"))
	if err != nil {
		t.Fatal(err)
	}
	again()
}
