package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
)

// BenchmarkPVSafeNamespaceDecision1000 decides the deletion of a namespace of
// 1,000 bound claims, half of them on Delete volumes, from Gatehouse's real
// informer cache (filled by the real API server), against the floor of
// listing the same claims from that cache.
func BenchmarkPVSafeNamespaceDecision1000(b *testing.B) {
	ctx := context.Background()
	c := controlPlane.Client
	const ns = "pvsafe-bench-1000"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("claim-%04d", i)
		policy := corev1.PersistentVolumeReclaimRetain
		if i%2 == 0 {
			policy = corev1.PersistentVolumeReclaimDelete
		}
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, PersistentVolumeReclaimPolicy: policy,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/x"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: name}}}
		if err := c.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: pv.Name, StorageClassName: ptr.To(""),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if err := c.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
	}

	// A cache scoped as pvsafe's own (claims, volumes and namespaces, read
	// without copies, managed fields stripped), filled by kube-apiserver.
	// The module's caches belong to the host and are not reachable from
	// outside, so the benchmark builds the same one.
	readOnly := ctrlcache.ByObject{UnsafeDisableDeepCopy: ptr.To(true)}
	cache, err := ctrlcache.New(controlPlane.Config, ctrlcache.Options{
		Scheme: controlPlane.Scheme,
		ByObject: map[client.Object]ctrlcache.ByObject{
			&corev1.PersistentVolumeClaim{}: readOnly, &corev1.PersistentVolume{}: readOnly, &corev1.Namespace{}: readOnly,
		},
		DefaultTransform: ctrlcache.TransformStripManagedFields(),
	})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = cache.Start(runCtx) }()
	for _, obj := range []client.Object{&corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}, &corev1.Namespace{}} {
		if _, err := cache.GetInformer(runCtx, obj); err != nil {
			b.Fatal(err)
		}
	}
	if !cache.WaitForCacheSync(runCtx) {
		b.Fatal("cache did not sync")
	}
	// The PV binder binds the pre-bound pairs; the decision counts only
	// bound claims.
	for {
		list := &corev1.PersistentVolumeClaimList{}
		if err := cache.List(ctx, list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		bound := 0
		for _, pvc := range list.Items {
			if pvc.Status.Phase == corev1.ClaimBound {
				bound++
			}
		}
		if bound == 1000 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	lookup := pvsafe.CacheLookup(cache)
	b.Run("floor-list-claims", func(b *testing.B) {
		for b.Loop() {
			if claims, _ := lookup.Claims(ctx, ns); len(claims) != 1000 {
				b.Fatal(len(claims))
			}
		}
	})
	b.Run("decision", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := pvsafe.DecideNamespace(ctx, nsObj, lookup)
			if err != nil || len(v.Risks) != 500 {
				b.Fatalf("%v, %d risks", err, len(v.Risks))
			}
		}
	})
	// The confirmation a denial pays for: the same decision from the API
	// server.
	if err := snapshotv1.AddToScheme(controlPlane.Client.Scheme()); err != nil {
		b.Fatal(err)
	}
	live := pvsafe.LiveLookup(controlPlane.Client)
	b.Run("live-confirmation", func(b *testing.B) {
		for b.Loop() {
			v, err := pvsafe.DecideNamespace(ctx, nsObj, live)
			if err != nil || len(v.Risks) != 500 {
				b.Fatalf("%v, %d risks", err, len(v.Risks))
			}
		}
	})
}
