package webhookconfig

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// unsyncedCache answers Get as controller-runtime's cache does while an
// informer cannot sync (its list forbidden, the API server away): it waits
// for the context.
type unsyncedCache struct{ cache.Cache }

func (unsyncedCache) Get(ctx context.Context, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	<-ctx.Done()
	return ctx.Err()
}

// Written is a readiness check: with a cache that never syncs it must report
// what is missing, not wait for the cache (a /readyz that never answers).
func TestWrittenAnswersWhileTheCacheCannotSync(t *testing.T) {
	r := &Reconciler{opts: ReconcilerOptions{Static: hooks(), Cache: unsyncedCache{}, Instance: "x"}}
	err := r.Written()
	if err == nil || !strings.Contains(err.Error(), "x-validating/") {
		t.Fatalf("Written() = %v, want the x-validating webhooks reported missing", err)
	}
}
