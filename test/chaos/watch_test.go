package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestWatchExpiryRelists: Gatehouse's informers are made to resume from a
// resource version the API server no longer serves, and must relist rather
// than keep a stale cache. Gatehouse is frozen (SIGSTOP) so that it misses a
// change (a volume made Retain); kube-apiserver is restarted with a
// one-second etcd compaction interval (its watch cache starts empty at the
// newest revision, and etcd compacts the history the informers last saw);
// then Gatehouse resumes. Deleting the namespace whose claim sits on that
// volume must now be allowed from the cache itself: the count of stale
// denials overturned by the live confirmation must not move.
func TestWatchExpiryRelists(t *testing.T) {
	ctx := context.Background()
	env, metricsAddr := startPVSafe(t, true)
	c := env.ControlPlane.Client
	// claimOnDeleteVolume makes namespace ns with a claim bound to a Delete
	// volume, and waits until pvsafe refuses deleting the namespace.
	claimOnDeleteVolume := func(ns string) (*corev1.Namespace, *corev1.PersistentVolume) {
		t.Helper()
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if err := c.Create(ctx, namespace.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-data"},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName:              "manual-" + ns,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "hostpath.csi.k8s.io", VolumeHandle: ns}},
			},
		}
		if err := c.Create(ctx, pv); err != nil {
			t.Fatal(err)
		}
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To("manual-" + ns),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if err := c.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the deletion of namespace "+ns+" is refused (a bound claim on a Delete volume)", func() error {
			err := c.Delete(ctx, namespace.DeepCopy(), client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), "DELETION BLOCKED") {
				return fmt.Errorf("got %v", err)
			}
			return nil
		})
		return namespace, pv
	}
	namespace, pv := claimOnDeleteVolume("expiry")
	overturnedBefore := metric(t, metricsAddr, overturnedSeries)

	if err := env.Process.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = env.Process.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	if err := c.Get(ctx, client.ObjectKeyFromObject(pv), pv); err != nil {
		t.Fatal(err)
	}
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	if err := c.Update(ctx, pv); err != nil { // not intercepted: pvsafe judges DELETEs
		t.Fatal(err)
	}
	p := killAPIServer(t, env)
	startAPIServer(t, env, p, "--etcd-compaction-interval=1s")
	time.Sleep(3 * time.Second) // two compaction intervals: the revisions Gatehouse saw are gone
	resume()
	// The informers' relist, observed rather than slept for (a fixed wait
	// was short on a loaded machine): a claim and volume made now are in
	// Gatehouse's cache once a refusal comes from it (a cache without them
	// allows, and only denials are confirmed live). The claim and volume
	// informers deliver in resource-version order, so a cache holding them
	// also holds the volume made Retain before them. A cache that kept
	// its stale watch and never relisted fails here.
	claimOnDeleteVolume("canary")

	if err := c.Delete(ctx, namespace.DeepCopy(), client.DryRunAll); err != nil {
		t.Fatalf("deleting the namespace after its volume became Retain: %v", err)
	}
	if after := metric(t, metricsAddr, overturnedSeries); after != overturnedBefore {
		t.Fatalf("stale denials overturned went from %v to %v: the cache had not relisted and a live read saved the decision", overturnedBefore, after)
	}
}

func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// overturnedSeries is pvsafe's count of stale denials overturned by the live
// confirmation (Prometheus's text format sorts the labels).
const overturnedSeries = `gatehouse_webhook_confirmations_total{module="pvsafe",result="overturned",webhook="pvsafe.gatehouse.dev"}`

// metric sums a counter family from Gatehouse's /metrics.
func metric(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	scanner := bufio.NewScanner(resp.Body)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}
