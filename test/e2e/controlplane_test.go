package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// These tests check the control plane itself: what kube-controller-manager,
// kube-scheduler and the fake nodes do for the modules' tests.

// settle polls check until it passes. The bound is generous because the
// namespace controller backs off between passes on a busy machine; it only
// ends a failing test and asserts nothing about speed.
func settle(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// volume creates a PersistentVolume of the given class and size and removes
// it when the test ends. Retain keeps the PV controller from reclaiming it,
// so only the test deletes it; the CSI source names a driver that is not
// running, so nothing on this machine is touched either way.
func volume(t *testing.T, class, size string) *corev1.PersistentVolume {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "cp-" + class + "-"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "hostpath.csi.k8s.io", VolumeHandle: class + "-" + size}},
		},
	}
	if err := controlPlane.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlPlane.Client.Delete(context.Background(), pv); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete PersistentVolume %s: %v", pv.Name, err)
		}
	})
	return pv
}

func claim(ns, name, class, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

// pauseSpec is a Pod that no kubelet will ever start.
func pauseSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}}
}

func TestControlPlaneDeploymentPodsAreScheduledOntoTheFakeNodes(t *testing.T) {
	ctx := context.Background()
	c := controlPlane.Client
	ns := namespace(t, "cp-deploy")
	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pauseSpec()},
		},
	}
	if err := c.Create(ctx, deploy); err != nil {
		t.Fatal(err)
	}

	var rs appsv1.ReplicaSet
	settle(t, "the Deployment's ReplicaSet", func(ctx context.Context) error {
		list := &appsv1.ReplicaSetList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, r := range list.Items {
			if metav1.IsControlledBy(&r, deploy) {
				rs = r
				return nil
			}
		}
		return fmt.Errorf("none of %d ReplicaSets is controlled by the Deployment", len(list.Items))
	})
	if rs.Spec.Replicas == nil || *rs.Spec.Replicas != 3 {
		t.Fatalf("ReplicaSet %s wants %v replicas, not 3", rs.Name, rs.Spec.Replicas)
	}

	nodes := controlPlane.Nodes.Names()
	settle(t, "three Pods of the ReplicaSet bound to fake nodes", func(ctx context.Context) error {
		list := &corev1.PodList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return err
		}
		bound := 0
		for _, p := range list.Items {
			if !metav1.IsControlledBy(&p, &rs) {
				return fmt.Errorf("pod %s is not controlled by ReplicaSet %s", p.Name, rs.Name)
			}
			if p.Spec.NodeName == "" {
				continue
			}
			if !slices.Contains(nodes, p.Spec.NodeName) {
				return fmt.Errorf("pod %s is bound to %s, not one of the fake nodes %v", p.Name, p.Spec.NodeName, nodes)
			}
			bound++
		}
		if len(list.Items) != 3 || bound != 3 {
			return fmt.Errorf("%d Pods, %d of them bound", len(list.Items), bound)
		}
		return nil
	})
}

func TestControlPlaneNamespaceWithAPodAndAClaimTerminates(t *testing.T) {
	ctx := context.Background()
	c := controlPlane.Client
	ns := namespace(t, "cp-terminate")
	class := "cp-terminate-" + randSuffix()
	volume(t, class, "1Gi")
	if err := c.Create(ctx, claim(ns, "data", class, "1Gi")); err != nil {
		t.Fatal(err)
	}
	// The Pod uses the claim: the claim-protection finalizer holds the claim
	// until the Pod is gone, and the Pod goes only once its graceful deletion
	// is finished on its node.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: pauseSpec()}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	settle(t, "the Pod scheduled with its bound claim", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Spec.NodeName == "" {
			return errors.New("not scheduled yet")
		}
		return nil
	})

	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	settle(t, "the namespace gone", func(ctx context.Context) error {
		got := &corev1.Namespace{}
		err := c.Get(ctx, client.ObjectKey{Name: ns}, got)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still %s: %v", got.Status.Phase, got.Status.Conditions)
	})
}

func TestControlPlaneClaimBindsToAMatchingVolume(t *testing.T) {
	ctx := context.Background()
	c := controlPlane.Client
	ns := namespace(t, "cp-bind")
	// A class of its own keeps the binder from matching the claim with any
	// other test's volume, and this test's volumes with other claims.
	class := "cp-bind-" + randSuffix()
	small := volume(t, class, "500Mi")
	fits := volume(t, class, "2Gi")
	pvc := claim(ns, "data", class, "1Gi")
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	settle(t, "the claim bound", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim is %q", pvc.Status.Phase)
		}
		return nil
	})
	if pvc.Spec.VolumeName != fits.Name {
		t.Fatalf("claim bound to %q, want %s (%s is too small)", pvc.Spec.VolumeName, fits.Name, small.Name)
	}
	settle(t, "the volume bound", func(ctx context.Context) error {
		pv := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(fits), pv); err != nil {
			return err
		}
		if pv.Status.Phase != corev1.VolumeBound {
			return fmt.Errorf("volume is %q", pv.Status.Phase)
		}
		if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != ns || ref.Name != "data" || ref.UID != pvc.UID {
			return fmt.Errorf("volume's claimRef is %+v", ref)
		}
		return nil
	})
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(small), pv); err != nil {
		t.Fatal(err)
	}
	if pv.Spec.ClaimRef != nil {
		t.Fatalf("the too-small volume was bound to %+v", pv.Spec.ClaimRef)
	}
}

func TestControlPlaneGarbageCollectorDeletesAnOwnedConfigMap(t *testing.T) {
	ctx := context.Background()
	c := controlPlane.Client
	ns := namespace(t, "cp-gc")
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	if err := c.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owned",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	if err := c.Create(ctx, owned); err != nil {
		t.Fatal(err)
	}
	// Not owned: it must survive, so that the test tells the garbage
	// collector from the namespace being emptied.
	bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bystander"}}
	if err := c.Create(ctx, bystander); err != nil {
		t.Fatal(err)
	}

	if err := c.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	settle(t, "the owned ConfigMap collected", func(ctx context.Context) error {
		err := c.Get(ctx, client.ObjectKeyFromObject(owned), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(bystander), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the ConfigMap without an owner: %v", err)
	}
}
