package server

import (
	"context"
	"testing"
	"time"
)

func TestStructuralTokens(t *testing.T) {
	for body, want := range map[string]int64{
		`{}`:                        1,
		`[1,1,1]`:                   3,
		`{"a":1,"b":[{},{}]}`:       8,
		`["a,b:[{", "\"],{", "\\"]`: 3,
		`{"k":"v\\","x":[1]}`:       5,
		``:                          0,
	} {
		if got := structuralTokens([]byte(body)); got != want {
			t.Errorf("structuralTokens(%s) = %d, want %d", body, got, want)
		}
	}
}

// TestBudgetLetsASmallChargeByALargeWaiter: a small charge that fits is
// taken at once while a large one waits for room (a FIFO semaphore would
// make pvsafe's reviews wait behind a flood's), and the large one gets in
// once room is released.
func TestBudgetLetsASmallChargeByALargeWaiter(t *testing.T) {
	b := newBudget(100)
	if err := b.acquire(context.Background(), 60); err != nil {
		t.Fatal(err)
	}
	large := make(chan error, 1)
	go func() { large <- b.acquire(context.Background(), 80) }()
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.acquire(ctx, 30); err != nil {
		t.Fatalf("a small charge waited behind a large one: %v", err)
	}
	b.release(60)
	b.release(30)
	if err := <-large; err != nil {
		t.Fatal(err)
	}
}

// TestBudgetShares: an unverified address holds at most its share beside
// its first request, and never the reserve but with its first request
// (without client certificates) or not at all (with them); a verified
// caller takes all that is free.
func TestBudgetShares(t *testing.T) {
	a, other, verified := party{key: "10.0.0.1"}, party{key: "10.0.0.2"}, party{verified: true}
	for _, verifiedOnly := range []bool{false, true} {
		b := newSharedBudget(80, 10, verifiedOnly) // reserve 20
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // try once
		// a's first request may grow beyond the share.
		if err := b.grow(ctx, a, 15, 0); err != nil {
			t.Fatalf("verifiedOnly %v: a first request within the unreserved room: %v", verifiedOnly, err)
		}
		if err := b.grow(ctx, a, 1, 0); err == nil {
			t.Errorf("verifiedOnly %v: a second request of an address over its share was charged", verifiedOnly)
		}
		for range 9 {
			if err := b.grow(ctx, other, 5, 0); err != nil {
				break
			}
		}
		// other's first 5 and a's 15: 20; other stops at its share (10).
		if free := b.free; free != 80-15-10 {
			t.Errorf("verifiedOnly %v: %d free, want %d", verifiedOnly, free, 80-15-10)
		}
		b.releaseFor(other, 10)
		third := party{key: "10.0.0.3"}
		// Only without client certificates may a first request take
		// the reserve.
		if err := b.grow(ctx, third, 60, 0); (err == nil) == verifiedOnly {
			t.Errorf("verifiedOnly %v: an address's first request into the reserve: %v", verifiedOnly, err)
		}
		if err := b.grow(ctx, verified, b.free, 0); err != nil {
			t.Errorf("verifiedOnly %v: a verified caller refused what is free: %v", verifiedOnly, err)
		}
	}
}
