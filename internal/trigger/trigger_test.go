package trigger

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func TestSourceQueuesOnlyOnceStarted(t *testing.T) {
	s := New(func() []string { return []string{"initial"} })
	if s.Add("early") || s.Running() {
		t.Fatal("an item was queued before the controller started")
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	if err := s.Start(context.Background(), queue); err != nil {
		t.Fatal(err)
	}
	if !s.Add("now") || !s.AddAfter("later", time.Millisecond) || !s.Add("now") {
		t.Fatal("an item was dropped after the controller started")
	}
	var got []string
	for range 3 {
		item, _ := queue.Get()
		got = append(got, item)
		queue.Done(item)
	}
	want := []string{"initial", "now", "later"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("queued %v, want %v (the early item dropped, the repeated one held once)", got, want)
		}
	}
	if queue.Len() != 0 {
		t.Errorf("%d more items queued", queue.Len())
	}
}
