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
