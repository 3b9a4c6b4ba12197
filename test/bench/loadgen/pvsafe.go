package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gatehouse-dev/gatehouse/internal/testing/devenv"
)

// pvsafeClaimDelete is a DELETE of a bound claim whose volume has
// reclaimPolicy Retain: pvsafe's allow path, decided from the caches (claim's
// namespace, its volume) with no API call.
func pvsafeClaimDelete() scenario {
	var oldObject []byte
	return scenario{
		Name: "pvsafe-claim-delete",
		Path: "/validate-pvsafe",
		Setup: func(ctx context.Context, env *devenv.Env) error {
			c := env.ControlPlane.Client
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-pvsafe"}}
			if err := c.Create(ctx, ns); err != nil {
				return err
			}
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "bench-pv"},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/bench"}},
					ClaimRef:                      &corev1.ObjectReference{Namespace: ns.Name, Name: "data"},
				},
			}
			if err := c.Create(ctx, pv); err != nil {
				return err
			}
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					VolumeName:       pv.Name,
					StorageClassName: ptr.To(""),
				},
			}
			if err := c.Create(ctx, pvc); err != nil {
				return err
			}
			pvc.Status.Phase = corev1.ClaimBound
			if err := c.Status().Update(ctx, pvc); err != nil {
				return err
			}
			pvc.APIVersion, pvc.Kind = "v1", "PersistentVolumeClaim"
			var err error
			oldObject, err = json.Marshal(pvc)
			// Let Gatehouse's informers see the fixtures.
			time.Sleep(time.Second)
			return err
		},
		Next: func(i int) request {
			return request{Stream: "pvsafe-claim-delete", Want: allowed, Body: fmt.Appendf(nil, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-%d","kind":{"group":"","version":"v1","kind":"PersistentVolumeClaim"},"resource":{"group":"","version":"v1","resource":"persistentvolumeclaims"},"namespace":"bench-pvsafe","name":"data","operation":"DELETE","userInfo":{"username":"bench"},"oldObject":%s}}`, i, oldObject)}
		},
	}
}
