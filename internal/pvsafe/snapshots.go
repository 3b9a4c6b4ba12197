package pvsafe

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// snapshotInformers starts the cache's informers for the snapshot types once
// their CRDs are served, polling discovery until then. The CRDs are optional:
// until they appear no snapshot qualifies, and installing them later needs no
// restart.
type snapshotInformers struct {
	cache     cache.Cache
	discovery discovery.DiscoveryInterface
	log       logr.Logger
	interval  time.Duration

	// running is set once all three informers have synced.
	running atomic.Bool
	// checked is set after the first discovery answer, so that readiness
	// waits for the informers when the CRDs exist at start-up.
	checked atomic.Bool
}

var snapshotResources = []string{"volumesnapshots", "volumesnapshotclasses", "volumesnapshotcontents"}

// Synced is the readiness condition: discovery has answered, and if the
// CRDs exist their informers have synced.
func (s *snapshotInformers) Synced() bool {
	return s.checked.Load()
}

// Readable says whether the snapshot types can be read from the cache.
func (s *snapshotInformers) Readable() bool { return s.running.Load() }

func (s *snapshotInformers) served() bool {
	list, err := s.discovery.ServerResourcesForGroupVersion(snapshotv1.SchemeGroupVersion.String())
	if err != nil {
		return false
	}
	found := map[string]bool{}
	for _, r := range list.APIResources {
		found[r.Name] = true
	}
	for _, r := range snapshotResources {
		if !found[r] {
			return false
		}
	}
	return true
}

// Start polls until the informers run or ctx ends.
func (s *snapshotInformers) Start(ctx context.Context) error {
	ticker := time.NewTicker(s.interval)
	defer ticker.Stop()
	for {
		if s.served() {
			if err := s.startInformers(ctx); err != nil {
				s.log.Error(err, "snapshot CRDs are served but their informers did not start; will retry")
			} else {
				s.running.Store(true)
				s.checked.Store(true)
				s.log.Info("VolumeSnapshot API found; snapshots now qualify deletions")
				return nil
			}
		} else {
			s.checked.Store(true)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (s *snapshotInformers) startInformers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, obj := range []client.Object{&snapshotv1.VolumeSnapshotClass{}, &snapshotv1.VolumeSnapshotContent{}, &snapshotv1.VolumeSnapshot{}} {
		// GetInformer on a started cache starts the informer and waits for
		// its sync.
		if _, err := s.cache.GetInformer(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// NeedLeaderElection is false: every replica decides.
func (s *snapshotInformers) NeedLeaderElection() bool { return false }
