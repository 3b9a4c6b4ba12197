package trigger

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Source queues the items added to it into its controller's workqueue. It
// is a source.TypedSource[T]: pass it to the controller's Watch. The zero
// value is not usable; call New.
type Source[T comparable] struct {
	initial func() []T

	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[T]
}

var _ source.TypedSource[int] = (*Source[int])(nil)

// New returns a Source whose controller, when it starts, first queues the
// items initial lists (nil: none).
func New[T comparable](initial func() []T) *Source[T] {
	return &Source[T]{initial: initial}
}

// Start is called by the controller with its workqueue: from then on Add
// and AddAfter queue into it.
func (s *Source[T]) Start(_ context.Context, queue workqueue.TypedRateLimitingInterface[T]) error {
	s.mu.Lock()
	s.queue = queue
	s.mu.Unlock()
	if s.initial != nil {
		for _, item := range s.initial() {
			queue.Add(item)
		}
	}
	return nil
}

// Add queues item now. It reports whether the controller runs (false: the
// item was dropped; the initial items will cover it).
func (s *Source[T]) Add(item T) bool { return s.AddAfter(item, 0) }

// AddAfter queues item after d (at once for d ≤ 0); the workqueue holds an
// item once, so a burst of calls makes one reconciliation. It reports
// whether the controller runs.
func (s *Source[T]) AddAfter(item T, d time.Duration) bool {
	s.mu.Lock()
	queue := s.queue
	s.mu.Unlock()
	if queue == nil {
		return false
	}
	if d > 0 {
		queue.AddAfter(item, d)
	} else {
		queue.Add(item)
	}
	return true
}

// Running reports whether the controller has started.
func (s *Source[T]) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue != nil
}
