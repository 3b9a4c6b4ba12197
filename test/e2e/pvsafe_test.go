package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

func startPVSafe(t *testing.T, mode module.Enforcement) *testenv.Gatehouse {
	t.Helper()
	return startPVSafeWith(t, mode, pvsafe.Options{})
}

func startPVSafeWith(t *testing.T, mode module.Enforcement, opts pvsafe.Options) *testenv.Gatehouse {
	t.Helper()
	return startGatehouse(t, app.Options{
		Catalogue: []module.Module{pvsafe.New(opts)},
		Modules:   map[string]app.ModuleConfig{"pvsafe": {Enabled: true, Enforcement: mode}},
	})
}

// volumeFixture creates a PV pre-bound to a claim and the claim naming it, and
// waits until kube-controller-manager's PV binder has bound them, as it would
// in a cluster. The volume is a CSI one whose driver is not running: when its
// claim goes, the PV controller leaves the Released volume to that driver's
// external provisioner, so it stays Released and nothing on this machine is
// deleted.
func volumeFixture(t *testing.T, ns, claim string, policy corev1.PersistentVolumeReclaimPolicy) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	return namedVolumeFixture(t, ns, claim, "pv-"+ns+"-"+claim, policy)
}

// namedVolumeFixture is volumeFixture with the volume's name (and CSI
// volume handle) given.
func namedVolumeFixture(t *testing.T, ns, claim, pvName string, policy corev1.PersistentVolumeReclaimPolicy) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	ctx := context.Background()
	c := controlPlane.Client
	pv, pvc := testenv.PreBoundVolume(ns, claim, pvName, policy)
	if err := c.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	settle(t, "claim "+ns+"/"+claim+" and volume "+pvName+" bound", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pv), pv); err != nil {
			return err
		}
		if pvc.Status.Phase != corev1.ClaimBound || pv.Status.Phase != corev1.VolumeBound {
			return fmt.Errorf("claim %q, volume %q", pvc.Status.Phase, pv.Status.Phase)
		}
		return nil
	})
	return pvc, pv
}

func deleteErr(t *testing.T, obj client.Object, opts ...client.DeleteOption) error {
	t.Helper()
	return controlPlane.Client.Delete(context.Background(), obj, opts...)
}

func mustDeny(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("deletion was allowed")
	}
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want Forbidden, got %v", err)
	}
	wants = append([]string{`admission webhook "pvsafe.gatehouse.dev" denied the request: DELETION BLOCKED:`}, wants...)
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("denial lacks %q:\n%s", w, err)
		}
	}
}

func snapshotCRDPaths(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubernetes-csi/external-snapshotter/client/v8").Output()
	if err != nil {
		t.Fatalf("locate the external-snapshotter module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd")
	var paths []string
	for _, r := range []string{"volumesnapshotclasses", "volumesnapshotcontents", "volumesnapshots"} {
		paths = append(paths, filepath.Join(dir, "snapshot.storage.k8s.io_"+r+".yaml"))
	}
	return paths
}

func installSnapshotCRDs(t *testing.T) {
	t.Helper()
	if _, err := envtest.InstallCRDs(controlPlane.Config, envtest.CRDInstallOptions{Paths: snapshotCRDPaths(t), ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
}

// uninstallSnapshotCRDs removes the snapshot CRDs, if an earlier test
// installed them, and waits until discovery no longer serves them.
func uninstallSnapshotCRDs(t *testing.T) {
	t.Helper()
	if err := envtest.UninstallCRDs(controlPlane.Config, envtest.CRDInstallOptions{Paths: snapshotCRDPaths(t)}); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(controlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := dc.ServerResourcesForGroupVersion(snapshotv1.SchemeGroupVersion.String()); apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the snapshot API was still served a minute after its CRDs were deleted")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readySnapshot makes a ready VolumeSnapshot of claim as the snapshot
// controller would: bound to a VolumeSnapshotContent of the claim's volume,
// with the class's deletionPolicy.
func readySnapshot(t *testing.T, ns, name, claim, class string) {
	t.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	snapshotOf(t, ns, name, claim, class, pv.Spec.CSI.VolumeHandle)
}

// snapshotOf makes a ready VolumeSnapshot naming claim as its source. With a
// volumeHandle it is bound to a VolumeSnapshotContent taken of that volume,
// with the class's deletionPolicy; with "" it has no content, as a
// snapshot whose content the cache has not seen yet.
func snapshotOf(t *testing.T, ns, name, claim, class, volumeHandle string) *snapshotv1.VolumeSnapshot {
	t.Helper()
	ctx := context.Background()
	c := snapshotClient(t)
	vs := &snapshotv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: snapshotv1.VolumeSnapshotSpec{
			Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(claim)},
			VolumeSnapshotClassName: ptr.To(class),
		},
	}
	if err := c.Create(ctx, vs); err != nil {
		t.Fatal(err)
	}
	vs.Status = &snapshotv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(true)}
	if volumeHandle != "" {
		sc := &snapshotv1.VolumeSnapshotClass{}
		if err := c.Get(ctx, client.ObjectKey{Name: class}, sc); err != nil {
			t.Fatal(err)
		}
		content := &snapshotv1.VolumeSnapshotContent{
			ObjectMeta: metav1.ObjectMeta{Name: "snapcontent-" + ns + "-" + name},
			Spec: snapshotv1.VolumeSnapshotContentSpec{
				Driver: "hostpath.csi.k8s.io", DeletionPolicy: sc.DeletionPolicy, VolumeSnapshotClassName: ptr.To(class),
				Source:            snapshotv1.VolumeSnapshotContentSource{VolumeHandle: ptr.To(volumeHandle)},
				VolumeSnapshotRef: corev1.ObjectReference{Namespace: ns, Name: name, UID: vs.UID},
			},
		}
		if err := c.Create(ctx, content); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), content) })
		vs.Status.BoundVolumeSnapshotContentName = ptr.To(content.Name)
	}
	if err := c.Status().Update(ctx, vs); err != nil {
		t.Fatal(err)
	}
	return vs
}

func snapshotClient(t *testing.T) client.Client {
	t.Helper()
	scheme := controlPlane.Scheme
	if !scheme.Recognizes(snapshotv1.SchemeGroupVersion.WithKind("VolumeSnapshot")) {
		if err := snapshotv1.AddToScheme(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(controlPlane.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Gatehouse starts before the snapshot CRDs exist (they are removed first if
// an earlier test installed them); they are installed while it runs, and it
// must pick them up from its cache without a restart.
func TestPVSafeSnapshotCRDsInstalledAfterStart(t *testing.T) {
	uninstallSnapshotCRDs(t)
	startPVSafe(t, module.Enforce)
	ns := namespace(t, "pvsafe-late-crds")
	claim, _ := volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)
	mustDeny(t, deleteErr(t, claim), "no VolumeSnapshot")

	installSnapshotCRDs(t)
	class := &snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "retain-late"}, Driver: "hostpath.csi.k8s.io", DeletionPolicy: snapshotv1.VolumeSnapshotContentRetain}
	if err := snapshotClient(t).Create(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	readySnapshot(t, ns, "data-snap", "data", "retain-late")

	// Decided from the cache, not overturned by the live confirmation: the
	// snapshot informers started by themselves.
	overturned := func() float64 {
		return counterWithLabel("gatehouse_webhook_confirmations_total", "result", "overturned")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		before := overturned()
		err := deleteErr(t, claim, client.DryRunAll)
		if err != nil {
			t.Fatalf("dry-run delete with a ready, retained snapshot: %v", err)
		}
		if overturned() == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the snapshot informers did not start within 30s of the CRDs appearing")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := deleteErr(t, claim); err != nil {
		t.Fatalf("delete with a ready, retained snapshot: %v", err)
	}
}

func TestPVSafeClaimDecisions(t *testing.T) {
	startPVSafe(t, module.Enforce)
	ctx := context.Background()
	ns := namespace(t, "pvsafe-claims")

	unbound := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unbound"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	if err := controlPlane.Client.Create(ctx, unbound); err != nil {
		t.Fatal(err)
	}
	if err := deleteErr(t, unbound); err != nil {
		t.Fatalf("unbound claim: %v", err)
	}

	kept, _ := volumeFixture(t, ns, "kept", corev1.PersistentVolumeReclaimRetain)
	if err := deleteErr(t, kept); err != nil {
		t.Fatalf("claim on a Retain volume: %v", err)
	}

	risky, pv := volumeFixture(t, ns, "risky", corev1.PersistentVolumeReclaimDelete)
	err := deleteErr(t, risky)
	mustDeny(t, err,
		"PersistentVolumeClaim '"+ns+"/risky' would lose data permanently.",
		"Reason: volume "+pv.Name+" has reclaimPolicy Delete and no VolumeSnapshot.",
		"kubectl patch pv "+pv.Name+` -p '{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}'`,
		"kubectl -n "+ns+" label pvc risky pv-safe.io/force-delete=true")

	// A server-side dry run gets the same answer and changes nothing.
	mustDeny(t, deleteErr(t, risky, client.DryRunAll), "PersistentVolumeClaim '"+ns+"/risky'")
	if err := controlPlane.Client.Get(ctx, client.ObjectKeyFromObject(risky), &corev1.PersistentVolumeClaim{}); err != nil {
		t.Fatalf("the claim is gone after denied deletes: %v", err)
	}

	// The PV itself is protected while bound.
	mustDeny(t, deleteErr(t, pv), "PersistentVolume '"+pv.Name+"'", "bound to "+ns+"/risky")

	// Bypass: label, then delete; counted.
	before := counterValue(t, "gatehouse_pvsafe_bypasses_total")
	risky.Labels = map[string]string{pvsafe.BypassLabel: "true"}
	if err := controlPlane.Client.Update(ctx, risky); err != nil {
		t.Fatal(err)
	}
	if err := deleteErr(t, risky); err != nil {
		t.Fatalf("bypassed claim: %v", err)
	}
	if after := counterValue(t, "gatehouse_pvsafe_bypasses_total"); after != before+1 {
		t.Fatalf("bypass counter %v -> %v", before, after)
	}

	// A Released volume is already being reclaimed: allowed. The PV
	// controller releases it once the claim is gone.
	settle(t, "volume "+pv.Name+" released", func(ctx context.Context) error {
		if err := controlPlane.Client.Get(ctx, client.ObjectKeyFromObject(pv), pv); err != nil {
			return err
		}
		if pv.Status.Phase != corev1.VolumeReleased {
			return fmt.Errorf("volume is %q", pv.Status.Phase)
		}
		return nil
	})
	if err := deleteErr(t, pv); err != nil {
		t.Fatalf("released volume: %v", err)
	}
}

func TestPVSafeSnapshotMadeReadyJustBeforeTheDelete(t *testing.T) {
	installSnapshotCRDs(t)
	startPVSafe(t, module.Enforce)
	ctx := context.Background()
	ns := namespace(t, "pvsafe-fresh-snapshot")
	for _, c := range []*snapshotv1.VolumeSnapshotClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "retain-fresh"}, Driver: "hostpath.csi.k8s.io", DeletionPolicy: snapshotv1.VolumeSnapshotContentRetain},
		{ObjectMeta: metav1.ObjectMeta{Name: "delete-fresh"}, Driver: "hostpath.csi.k8s.io", DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete},
	} {
		if err := snapshotClient(t).Create(ctx, c); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	claim, _ := volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)
	readySnapshot(t, ns, "not-retained", "data", "delete-fresh")
	mustDeny(t, deleteErr(t, claim), "VolumeSnapshot not-retained is not retained (VolumeSnapshotContent snapcontent-"+ns+"-not-retained has deletionPolicy Delete)")

	// No wait between the snapshot becoming ready and the delete: the cache
	// may not have seen it, the live confirmation must.
	readySnapshot(t, ns, "retained", "data", "retain-fresh")
	if err := deleteErr(t, claim); err != nil {
		t.Fatalf("delete right after the snapshot became ready: %v", err)
	}
}

func TestPVSafeNamespaceWithSeveralRiskyClaimsAndTheBypassCascade(t *testing.T) {
	startPVSafe(t, module.Enforce)
	ctx := context.Background()
	ns := namespace(t, "pvsafe-ns")
	_, pvA := volumeFixture(t, ns, "alpha", corev1.PersistentVolumeReclaimDelete)
	_, pvB := volumeFixture(t, ns, "bravo", corev1.PersistentVolumeReclaimDelete)
	_, pvKept := volumeFixture(t, ns, "kept", corev1.PersistentVolumeReclaimRetain)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}

	mustDeny(t, deleteErr(t, nsObj),
		"Namespace '"+ns+"' would lose data permanently.",
		"2 PersistentVolumeClaim(s) would lose data:",
		"  - alpha: volume "+pvA.Name+" has reclaimPolicy Delete",
		"  - bravo: volume "+pvB.Name+" has reclaimPolicy Delete",
		"kubectl label namespace "+ns+" pv-safe.io/force-delete=true")

	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels[pvsafe.BypassLabel] = "true"
	if err := controlPlane.Client.Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	if err := deleteErr(t, nsObj); err != nil {
		t.Fatalf("bypassed namespace: %v", err)
	}
	// The namespace controller deletes the claims while the namespace
	// terminates; pvsafe must let them go, or the namespace stays.
	settle(t, "the bypassed namespace gone", func(ctx context.Context) error {
		err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		claims := &corev1.PersistentVolumeClaimList{}
		if err := controlPlane.Client.List(ctx, claims, client.InNamespace(ns)); err != nil {
			return err
		}
		var left []string
		for _, c := range claims.Items {
			left = append(left, c.Name)
		}
		return fmt.Errorf("still there, with claims %v", left)
	})
	// The volumes outlive their claims; once the PV controller has
	// released them, pvsafe lets them go.
	for _, pv := range []*corev1.PersistentVolume{pvA, pvB, pvKept} {
		settle(t, "volume "+pv.Name+" released", func(ctx context.Context) error {
			if err := controlPlane.Client.Get(ctx, client.ObjectKeyFromObject(pv), pv); err != nil {
				return err
			}
			if pv.Status.Phase != corev1.VolumeReleased {
				return fmt.Errorf("volume is %q", pv.Status.Phase)
			}
			return nil
		})
		if err := deleteErr(t, pv); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete volume %s: %v", pv.Name, err)
		}
	}
}

func TestPVSafeStatefulSetThatDeletesItsClaims(t *testing.T) {
	startPVSafe(t, module.Enforce)
	ctx := context.Background()
	ns := namespace(t, "pvsafe-sts")
	volumeFixture(t, ns, "data-db-0", corev1.PersistentVolumeReclaimDelete)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
		},
	}
	if err := controlPlane.Client.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	mustDeny(t, deleteErr(t, sts), "StatefulSet '"+ns+"/db' (persistentVolumeClaimRetentionPolicy.whenDeleted: Delete)", "  - data-db-0:")

	// The StatefulSet controller writes the object too (status, Pods,
	// owner references on the claims): update its latest version.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := controlPlane.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil {
			return err
		}
		sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
		return controlPlane.Client.Update(ctx, sts)
	}); err != nil {
		t.Fatal(err)
	}
	if err := deleteErr(t, sts); err != nil {
		t.Fatalf("StatefulSet that retains its claims: %v", err)
	}
}

func TestPVSafeWarnModeAdmitsWithTheDenialAsWarnings(t *testing.T) {
	startPVSafe(t, module.Warn)
	ns := namespace(t, "pvsafe-warn")
	claim, _ := volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.WarningHandler = rec
	c, err := client.New(cfg, client.Options{Scheme: controlPlane.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), claim); err != nil {
		t.Fatalf("warn mode denied: %v", err)
	}
	got := strings.Join(rec.msgs, "\n")
	for _, want := range []string{"pvsafe (enforcement: warn) would deny this request:", "DELETION BLOCKED: PersistentVolumeClaim '" + ns + "/data'"} {
		if !strings.Contains(got, want) {
			t.Fatalf("warnings lack %q:\n%s", want, got)
		}
	}
}

// counterValue sums a counter family from the registry Gatehouse uses.
func counterValue(t *testing.T, name string) float64 {
	t.Helper()
	return seriesSum(name, nil)
}
