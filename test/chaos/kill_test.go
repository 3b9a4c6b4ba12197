package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatehouse-dev/gatehouse/internal/testing/devenv"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// phase counts the writes of one period of the test.
type phase struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	first      string
}

func (p *phase) record(err error) {
	if err == nil {
		p.ok.Add(1)
		return
	}
	p.failed.Add(1)
	p.mu.Lock()
	if p.first == "" {
		p.first = err.Error()
	}
	p.mu.Unlock()
}

// TestKilledUnderLoadRecovers: four writers create and delete claims
// through kube-apiserver, whose DELETEs go to pvsafe (failurePolicy Fail),
// while Gatehouse is killed with SIGKILL and started again. During the
// outage deletions fail, as the failure policy decides; once Gatehouse is
// ready again, none may fail.
func TestKilledUnderLoadRecovers(t *testing.T) {
	ctx := context.Background()
	env, _ := startPVSafe(t, false)
	c := env.ControlPlane.Client
	const ns = "chaos"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	var current atomic.Pointer[phase]
	before, outage, after := &phase{}, &phase{}, &phase{}
	current.Store(before)
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Add(1)
		go func(w int) {
			defer writers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%d", w, i)
				pvc := &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					},
				}
				if err := c.Create(ctx, pvc); err != nil {
					current.Load().record(fmt.Errorf("create: %w", err))
					continue
				}
				// Only the DELETE goes through the webhook.
				err := c.Delete(ctx, pvc)
				if err != nil && !strings.Contains(err.Error(), "pvsafe") && !strings.Contains(err.Error(), "failed calling webhook") {
					err = fmt.Errorf("delete (not a webhook failure): %w", err)
				}
				// Counted in the phase it ended in: a request in flight
				// when Gatehouse was killed belongs to the outage.
				current.Load().record(err)
			}
		}(w)
	}

	time.Sleep(3 * time.Second)
	current.Store(outage)
	killed := time.Now()
	if err := env.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the outage
	restarted := time.Now()
	if err := env.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	readyAfter, startToReady := time.Since(killed), time.Since(restarted)
	current.Store(after)
	time.Sleep(5 * time.Second)
	close(stop)
	writers.Wait()

	t.Logf("before the kill: %d writes, %d failed; outage (kill to ready %v, of which process start to ready %v): %d ok, %d failed (first: %s); after ready: %d ok, %d failed",
		before.ok.Load(), before.failed.Load(), readyAfter.Round(time.Millisecond), startToReady.Round(time.Millisecond), outage.ok.Load(), outage.failed.Load(), outage.first,
		after.ok.Load(), after.failed.Load())
	if before.failed.Load() > 0 {
		t.Fatalf("%d writes failed before the kill: %s", before.failed.Load(), before.first)
	}
	if outage.failed.Load() == 0 {
		t.Fatal("no deletion failed while Gatehouse was down: the webhook was not in the path (failurePolicy Fail)")
	}
	if after.failed.Load() > 0 {
		t.Fatalf("%d writes failed after Gatehouse was ready again: %s", after.failed.Load(), after.first)
	}
	if after.ok.Load() == 0 {
		t.Fatal("no write after recovery")
	}
}

// startPVSafe starts a control plane of the test's own with bin/gatehouse
// (pvsafe) as a process, stopped when the test ends, and returns its metrics
// address. apiServerReplaced says the test kills envtest's kube-apiserver,
// whose stop then fails as expected.
func startPVSafe(t *testing.T, apiServerReplaced bool) (*devenv.Env, string) {
	t.Helper()
	metricsAddr := "127.0.0.1:" + freePort(t)
	env, err := devenv.Start(context.Background(), devenv.Options{
		Dir: logDir(t), WebhookAddr: "127.0.0.1:" + freePort(t), MetricsAddr: metricsAddr, Modules: "pvsafe",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := env.Stop()
		switch {
		case err != nil && apiServerReplaced:
			t.Logf("stop (envtest no longer owns the kube-apiserver it started): %v", err)
		case err != nil:
			t.Errorf("stop: %v", err)
		}
	})
	return env, metricsAddr
}

func freePort(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}

// logDir returns the directory for a control plane's logs (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, the fake nodes,
// Gatehouse): a t.TempDir, copied when the test fails to a directory that
// outlives it, whose path the test logs. Call it before starting anything
// that writes there: the copy is made after the test's later cleanups
// (the processes stopped, their logs complete).
func logDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		kept, err := os.MkdirTemp("", "gatehouse-"+strings.ReplaceAll(t.Name(), "/", "_")+"-")
		if err == nil {
			err = copyLogs(kept, dir)
		}
		if err != nil {
			t.Logf("keeping the logs of %s: %v", dir, err)
			return
		}
		t.Logf("the control plane's and Gatehouse's logs are kept in %s", kept)
	})
	return dir
}

// copyLogs copies the *.log files directly in dir to kept.
func copyLogs(kept, dir string) error {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return err
	}
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(kept, filepath.Base(path)), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
