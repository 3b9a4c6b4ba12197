package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/nodegroup"
	"github.com/gatehouse-dev/gatehouse/internal/placement"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
	"github.com/gatehouse-dev/gatehouse/internal/testing/clustertest"
)

// The scale cluster of the reliability issue: 10,000 Namespaces, 50,000
// PersistentVolumeClaims and 50,000 PersistentVolumes, 10,000 Pods with
// owners (the placement fixture), 1,000 NodeGroups, 1,000 Ingresses and their
// Services. Claims and volumes are of classes that never match, so nothing
// binds; Pods name no running scheduler.
const (
	scaleNamespaces = 10_000
	scaleClaims     = 50_000
	scaleClaimNS    = 100 // the claims are spread over the first 100 namespaces
	scaleNodeGroups = 1_000
)

func createScaleFixture(b *testing.B) {
	ctx := context.Background()
	c := controlPlane.Client
	create := func(obj client.Object) {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Error(err)
		}
	}
	parallel(b, scaleNamespaces, func(i int) {
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%05d", i)}})
	})
	parallel(b, scaleClaims, func(i int) {
		create(&corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-pv-%05d", i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName:              "scale-volumes",
				PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "hostpath.csi.k8s.io", VolumeHandle: fmt.Sprintf("scale-%05d", i)}},
			},
		})
		create(&corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("scale-%05d", i%scaleClaimNS), Name: fmt.Sprintf("data-%05d", i)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To("scale-claims"),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		})
	})
	parallel(b, scaleNodeGroups, func(i int) {
		ng := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "deckhouse.io/v1", "kind": "NodeGroup",
			"metadata": map[string]any{"name": fmt.Sprintf("scale-%04d", i)},
			"spec":     map[string]any{"nodeType": "Static"},
		}}
		create(ng)
	})
	if b.Failed() {
		b.FailNow()
	}
}

// BenchmarkGatehouseMemoryAtScale: the heap an in-process Gatehouse with
// every module holds once its caches have synced over the scale cluster,
// and its cost per 10,000 cached objects. The test process's own heap is
// measured before Gatehouse starts and subtracted.
//
//	go test ./test/bench -run '^$' -bench GatehouseMemoryAtScale -benchtime 1x -timeout 60m
func BenchmarkGatehouseMemoryAtScale(b *testing.B) {
	createPlacementFixture(b)
	cb := startConfigcheckBench(b)      // 1,000 Ingresses, their Services and the config
	if err := cb.g.Stop(); err != nil { // measured below with every module
		b.Fatal(err)
	}
	createScaleFixture(b)
	ctx := context.Background()
	c := controlPlane.Client
	cfg := clustertest.ExampleConfig(b)
	clustertest.Unscoped(cfg)
	cfg.Namespace = ccBenchLB
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		rssBefore := rss()
		g := clustertest.StartGatehouse(b, controlPlane, app.Options{
			Catalogue: []module.Module{pvsafe.New(pvsafe.Options{}), nodegroup.New(), placement.New(placement.Options{}), configcheck.New(configcheck.Options{})},
			Modules: map[string]app.ModuleConfig{
				"pvsafe": {Enabled: true}, "nodegroup": {Enabled: true}, "placement": {Enabled: true}, "configcheck": {Enabled: true},
			},
		})
		// Ready means every module's caches synced; configcheck's stores
		// are synced once the config's status says Published for a new
		// generation, which only this instance can have written.
		// Read again on each try: the new instance writes the config's
		// status as it starts, and an update of the copy read before that
		// conflicts on every retry.
		eventually(b, "the config is updated", func() error {
			current := &gatehousev1alpha1.HAProxyTemplateConfig{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), current); err != nil {
				return err
			}
			current.Spec.TemplatingSettings.ExtraContext = &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(`{"run":%d}`, rssBefore))}
			return c.Update(ctx, current)
		})
		eventually(b, "configcheck published the rendering of 1,000 Ingresses", func() error {
			current := &gatehousev1alpha1.HAProxyTemplateConfig{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), current); err != nil {
				return err
			}
			for _, cond := range current.Status.Conditions {
				if cond.Type == gatehousev1alpha1.ConditionPublished && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == current.Generation {
					return nil
				}
			}
			return fmt.Errorf("status %+v", current.Status.Conditions)
		})
		held := heapInUse() - before
		objects := scaleNamespaces + 2*scaleClaims + benchPods + 2*benchPods/benchPodsPerSet + 2*benchPods/benchPodsPerSet/benchSetsPerApp + scaleNodeGroups + 2*ccBenchIngresses
		b.ReportMetric(float64(held)/(1<<20), "MiB-heap")
		b.ReportMetric(float64(held)/float64(objects)*10_000/(1<<20), "MiB/10k-objects")
		b.ReportMetric(float64(rss()-rssBefore)/(1<<20), "MiB-rss-growth")
		b.ReportMetric(float64(objects), "objects")
		if err := g.Stop(); err != nil {
			b.Fatal(err)
		}
	}
}

// rss is the process's resident set size in bytes.
func rss() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			fields := strings.Fields(line)
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
