// Package trigger is a controller source for events that come from outside
// the controller's own watches: a change another component noticed, a
// timer, a follower's arrival. Code holds a *Source, adds items to it from
// any goroutine, and the controller queues them while it runs; before it
// starts (or on a replica where it never starts, such as a leader-elected
// controller on a follower) an added item is dropped, and the Source's
// initial items, listed when the controller starts, cover what was missed.
//
// It replaces the same dozen lines four controllers wrote for themselves:
// a source.Func capturing the workqueue under a mutex.
package trigger
