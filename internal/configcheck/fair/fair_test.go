package fair

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
)

// served runs requests through q one at a time, in the order q grants
// them, and returns that order. Each request is queued only once the one
// before waits, so the queue's order alone decides; the first holds the
// only free slot until all are queued.
type request struct {
	name  string
	party string
	class Class
}

func servedOrder(t *testing.T, q *Queue, reqs []request) []string {
	t.Helper()
	ctx := context.Background()
	hold, err := q.Acquire(ctx, "holder", Real)
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan string)
	done := make(chan struct{})
	for i, r := range reqs {
		go func() {
			release, err := q.Acquire(ctx, r.party, r.class)
			if err != nil {
				t.Error(err)
				granted <- r.name
				return
			}
			granted <- r.name
			<-done
			release()
		}()
		for q.Waiting() != i+1 {
			// Wait for it to be queued (a condition, not a duration).
			yield()
		}
	}
	hold()
	var order []string
	for range reqs {
		order = append(order, <-granted)
		done <- struct{}{}
	}
	return order
}

// yield lets the request just started run until it is queued.
func yield() { runtime.Gosched() }

func TestRoundRobinWithinAClassAndClassesInOrder(t *testing.T) {
	q, err := New(Options{Slots: 1, MaxWaiting: 8})
	if err != nil {
		t.Fatal(err)
	}
	// Tenant A's burst comes first; B's one request, a dry run and a
	// config check come after it.
	got := servedOrder(t, q, []request{
		{"dry-run", "author", DryRun},
		{"A1", "tenant-a", Real}, {"A2", "tenant-a", Real}, {"A3", "tenant-a", Real},
		{"check", "author", Check},
		{"B1", "tenant-b", Real},
		{"A4", "tenant-a", Real},
		{"C1", "tenant-c", Real},
	})
	// B and C, queued behind three of A's, wait for one of A's only;
	// the check and the dry run come after every real change although
	// the dry run was queued first.
	want := []string{"A1", "B1", "C1", "A2", "A3", "A4", "check", "dry-run"}
	if !slices.Equal(got, want) {
		t.Fatalf("served %v; want %v", got, want)
	}
}

func TestLowerClassesLeaveTheReservedSlots(t *testing.T) {
	q, err := New(Options{Slots: 2, Reserved: 1, MaxWaiting: 8})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	release, err := q.Acquire(ctx, "author", DryRun)
	if err != nil {
		t.Fatal(err)
	}
	// A second dry run, of another party, waits though a slot is free.
	waitCtx, cancel := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() {
		r, err := q.Acquire(waitCtx, "other-author", Check)
		if err == nil {
			r()
		}
		second <- err
	}()
	for q.Waiting() != 1 {
		yield()
	}
	// A real change takes the free slot at once.
	real, err := q.Acquire(ctx, "tenant-b", Real)
	if err != nil {
		t.Fatal(err)
	}
	real()
	select {
	case err := <-second:
		t.Fatalf("a check took the reserved slot (%v)", err)
	default:
	}
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want the waiter to give up with its context", err)
	}
	if n := q.Waiting(); n != 0 {
		t.Fatalf("%d waiting after the waiter gave up", n)
	}
	release()
}

func TestAPartyHasBoundedWaiters(t *testing.T) {
	q, err := New(Options{Slots: 1, MaxWaiting: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold, err := q.Acquire(ctx, "tenant-a", Real)
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	for i := range 2 {
		go func() { _, _ = q.Acquire(ctx, "tenant-a", Real) }()
		for q.Waiting() != i+1 {
			yield()
		}
	}
	_, err = q.Acquire(ctx, "tenant-a", Real)
	var full *FullError
	if !errors.As(err, &full) || !errors.Is(err, ErrFull) || full.Party != "tenant-a" || full.Waiting != 2 {
		t.Fatalf("got %v; want tenant-a refused at once with 2 waiting", err)
	}
	// Another party still queues.
	go func() { _, _ = q.Acquire(ctx, "tenant-b", Real) }()
	for q.Waiting() != 3 {
		yield()
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{{Slots: 0, MaxWaiting: 1}, {Slots: 1, Reserved: 1, MaxWaiting: 1}, {Slots: 2, MaxWaiting: 0}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}
