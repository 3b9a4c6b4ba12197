package clustertest

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"
)

// Eventually retries check until it passes; the deadline only bounds a
// failing test and asserts nothing about speed.
func Eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// RandSuffix keeps object names unique, so that a suite can run again on
// the same control plane and in any order.
func RandSuffix() string { return rand.String(6) }
