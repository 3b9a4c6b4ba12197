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
	// first: queued with AcquireFirst.
	first bool
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
			acquire := q.Acquire
			if r.first {
				acquire = q.AcquireFirst
			}
			release, err := acquire(ctx, r.party, r.class)
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
		{"dry-run", "author", DryRun, false},
		{"A1", "tenant-a", Real, false}, {"A2", "tenant-a", Real, false}, {"A3", "tenant-a", Real, false},
		{"check", "author", Check, false},
		{"B1", "tenant-b", Real, false},
		{"A4", "tenant-a", Real, false},
		{"C1", "tenant-c", Real, false},
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

// TestFirstGoesAheadOfItsOwnPartyOnly: a request queued first (a tenant's
// deletion) is served before its own party's earlier waiters of its class,
// behind the one queued first before it, and never before another party's
// turn.
func TestFirstGoesAheadOfItsOwnPartyOnly(t *testing.T) {
	q, err := New(Options{Slots: 1, MaxWaiting: 8})
	if err != nil {
		t.Fatal(err)
	}
	got := servedOrder(t, q, []request{
		{name: "A1", party: "tenant-a", class: Real}, {name: "A2", party: "tenant-a", class: Real},
		{name: "B1", party: "tenant-b", class: Real},
		{name: "A-del1", party: "tenant-a", class: Real, first: true},
		{name: "A-del2", party: "tenant-a", class: Real, first: true},
		{name: "B-dry", party: "tenant-b", class: DryRun, first: true},
	})
	want := []string{"A-del1", "B1", "A-del2", "A1", "A2", "B-dry"}
	if !slices.Equal(got, want) {
		t.Fatalf("served %v; want %v", got, want)
	}
}

// TestFirstDisplacesItsPartysNewest: a party at its bound of waiters still
// queues a request first; the party's newest waiter not queued first, of
// its least urgent class, is refused in its place. A party whose waiters
// were all queued first refuses one more.
func TestFirstDisplacesItsPartysNewest(t *testing.T) {
	q, err := New(Options{Slots: 1, MaxWaiting: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold, err := q.Acquire(ctx, "tenant-a", Real)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]chan error{}
	// queue queues a request; when it displaces another, the count of
	// waiters is unchanged: the displaced one's error says it is queued.
	queue := func(name string, c Class, first bool) {
		t.Helper()
		ch := make(chan error, 1)
		results[name] = ch
		n := q.Waiting()
		go func() {
			acquire := q.Acquire
			if first {
				acquire = q.AcquireFirst
			}
			r, err := acquire(ctx, "tenant-a", c)
			if err == nil {
				r()
			}
			ch <- err
		}()
		for !first && q.Waiting() == n {
			yield()
		}
	}
	queue("real-1", Real, false)
	queue("dry-1", DryRun, false)
	queue("real-2", Real, false)
	// Full: a deletion displaces the dry run (least urgent class).
	queue("del-1", Real, true)
	if err := <-results["dry-1"]; !errors.Is(err, ErrFull) {
		t.Fatalf("the dry run got %v; want it refused for the deletion", err)
	}
	// Then the newest real change.
	queue("del-2", Real, true)
	if err := <-results["real-2"]; !errors.Is(err, ErrFull) {
		t.Fatalf("the newest real change got %v; want it refused for the deletion", err)
	}
	queue("del-3", Real, true)
	if err := <-results["real-1"]; !errors.Is(err, ErrFull) {
		t.Fatalf("the last real change got %v; want it refused for the deletion", err)
	}
	if _, err := q.AcquireFirst(ctx, "tenant-a", Real); !errors.Is(err, ErrFull) {
		t.Fatalf("a fourth deletion with three waiting first: %v; want ErrFull", err)
	}
	if n := q.Waiting(); n != 3 {
		t.Fatalf("%d waiting; want the three deletions", n)
	}
	hold()
	for _, name := range []string{"del-1", "del-2", "del-3"} {
		if err := <-results[name]; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := q.Waiting(); n != 0 {
		t.Fatalf("%d waiting at the end", n)
	}
}
