package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// labelForDeletion sets the bypass label on obj as c's user.
func labelForDeletion(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"`+pvsafe.BypassLabel+`":"true"}}}`))
	if err := c.Patch(context.Background(), obj, patch); err != nil {
		t.Fatalf("label %s: %v", obj.GetName(), err)
	}
}

// bypassEvent waits for the Event pvsafe records on an admitted bypass of
// the object (kind, name) in the namespace the Event is stored in, and
// returns its message.
func bypassEvent(t *testing.T, eventNamespace, kind, name string) string {
	t.Helper()
	var message string
	settle(t, "a "+pvsafe.EventBypassed+" Event on "+kind+" "+name+" in namespace "+eventNamespace, func(ctx context.Context) error {
		events := &corev1.EventList{}
		if err := controlPlane.Client.List(ctx, events, client.InNamespace(eventNamespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == pvsafe.EventBypassed {
				if e.Type != corev1.EventTypeWarning || e.Source.Component != "gatehouse-pvsafe" {
					return fmt.Errorf("event %+v", e)
				}
				message = e.Message
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(events.Items))
	})
	return message
}

// bypassClusterRole creates the ClusterRole config/ ships for the bypass.
func bypassClusterRole(t *testing.T) {
	t.Helper()
	root, _ := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "config/rbac/pvsafe/bypass_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := utilyaml.Unmarshal(data, role); err != nil {
		t.Fatal(err)
	}
	if role.Name != pvsafe.BypassClusterRole {
		t.Fatalf("config/ names the ClusterRole %q, messages name %q", role.Name, pvsafe.BypassClusterRole)
	}
	if err := controlPlane.Client.Create(context.Background(), role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// Finding 5, in the authorized mode (the default): a tenant with edit in its
// namespace labels a claim and deletes it. The label is not enough: the
// denial says which permission is missing and how to get it. Once a cluster
// administrator binds the shipped ClusterRole, the same deletion is
// admitted, and an Event on the claim names the tenant.
func TestPVSafeBypassByAnEditTenantNeedsThePermission(t *testing.T) {
	startPVSafe(t, module.Enforce)
	ns := namespace(t, "pvsafe-bypass-authz")
	tenant, user := tenantClient(t, ns)
	claim, pv := volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)

	labelForDeletion(t, tenant, claim)
	err := tenant.Delete(context.Background(), claim)
	mustDeny(t, err,
		"PersistentVolumeClaim '"+ns+"/data' would lose data permanently.",
		"Reason: volume "+pv.Name+" has reclaimPolicy Delete and no VolumeSnapshot.",
		`The bypass does not apply: pv-safe.io/force-delete=true is set, but user "`+user+`" may not bypass pvsafe: that needs verb "bypass" on persistentvolumeclaims.pvsafe.gatehouse.dev in namespace `+ns+`, which the ClusterRole gatehouse-pvsafe-bypass grants (no built-in role does).`,
		"kubectl -n "+ns+" create rolebinding pvsafe-bypass --clusterrole=gatehouse-pvsafe-bypass --user="+user,
		"Check it with: kubectl auth can-i bypass persistentvolumeclaims.pvsafe.gatehouse.dev/data -n "+ns,
		"Accept the data loss, with the permission to bypass (verb bypass on persistentvolumeclaims.pvsafe.gatehouse.dev, ClusterRole gatehouse-pvsafe-bypass): label the pvc, then delete it again:")
	if err := controlPlane.Client.Get(context.Background(), client.ObjectKeyFromObject(claim), &corev1.PersistentVolumeClaim{}); err != nil {
		t.Fatalf("the claim is gone after a refused bypass: %v", err)
	}

	bypassClusterRole(t)
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pvsafe-bypass"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: pvsafe.BypassClusterRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := controlPlane.Client.Create(context.Background(), binding); err != nil {
		t.Fatal(err)
	}
	// kube-apiserver's RBAC authorizer reads bindings from its informers:
	// the grant takes effect once they have seen it.
	settle(t, "the bypass admitted once granted", func(ctx context.Context) error {
		return tenant.Delete(ctx, claim)
	})
	msg := bypassEvent(t, ns, "PersistentVolumeClaim", "data")
	for _, want := range []string{
		`pvsafe allowed user "` + user + `"`, "to delete PersistentVolumeClaim " + ns + "/data with pv-safe.io/force-delete=true",
		"the user may bypass persistentvolumeclaims.pvsafe.gatehouse.dev (bypass mode authorized)",
		`the label was last set by field manager "`, "data lost: data: volume " + pv.Name + " has reclaimPolicy Delete",
	} {
		if !strings.Contains(msg, want) {
			t.Fatalf("event message lacks %q:\n%s", want, msg)
		}
	}
}

// Finding 5, in the compatible label mode: the label alone still lets the
// tenant delete, and the bypass is recorded as an Event on the claim naming
// the tenant. A Namespace's bypass is recorded in the default namespace, so
// that the record outlives the namespace.
func TestPVSafeBypassInLabelModeRecordsAnEvent(t *testing.T) {
	startPVSafeWith(t, module.Enforce, pvsafe.Options{Bypass: pvsafe.BypassLabelOnly})
	ctx := context.Background()
	ns := namespace(t, "pvsafe-bypass-label")
	tenant, user := tenantClient(t, ns)
	claim, _ := volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)
	mustDeny(t, tenant.Delete(ctx, claim), "  3. Accept the data loss: label the pvc, then delete it again:")

	labelForDeletion(t, tenant, claim)
	if err := tenant.Delete(ctx, claim); err != nil {
		t.Fatalf("label mode refused a labelled deletion: %v", err)
	}
	msg := bypassEvent(t, ns, "PersistentVolumeClaim", "data")
	if want := `pvsafe allowed user "` + user + `"`; !strings.Contains(msg, want) || !strings.Contains(msg, "the label alone allows it (bypass mode label)") {
		t.Fatalf("event message lacks %q and the mode:\n%s", want, msg)
	}

	other := namespace(t, "pvsafe-bypass-label-ns")
	volumeFixture(t, other, "data", corev1.PersistentVolumeReclaimDelete)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}
	labelForDeletion(t, controlPlane.Client, nsObj)
	if err := deleteErr(t, nsObj); err != nil {
		t.Fatalf("labelled namespace: %v", err)
	}
	self := &authenticationv1.SelfSubjectReview{}
	if err := controlPlane.Client.Create(ctx, self); err != nil {
		t.Fatal(err)
	}
	msg = bypassEvent(t, metav1.NamespaceDefault, "Namespace", other)
	if want := `pvsafe allowed user "` + self.Status.UserInfo.Username + `"`; !strings.Contains(msg, want) || !strings.Contains(msg, "to delete Namespace "+other+" with") {
		t.Fatalf("event message lacks %q:\n%s", want, msg)
	}
}

// Finding 6: a ready, retained snapshot of an earlier claim of the same name
// (another volume) does not make today's claim deletable, whether its
// content says it was taken of another volume or says nothing and the
// snapshot is older than the claim. A snapshot of this volume does.
func TestPVSafeASnapshotOfAnEarlierClaimOfTheSameNameDoesNotCount(t *testing.T) {
	installSnapshotCRDs(t)
	startPVSafe(t, module.Enforce)
	ctx := context.Background()
	ns := namespace(t, "pvsafe-same-name")
	class := &snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "retain-same-name"}, Driver: "hostpath.csi.k8s.io", DeletionPolicy: snapshotv1.VolumeSnapshotContentRetain}
	if err := snapshotClient(t).Create(ctx, class); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	// Yesterday's claim "data" on volume A, snapshotted, then deleted.
	earlier, volumeA := namedVolumeFixture(t, ns, "data", "pv-"+ns+"-a", corev1.PersistentVolumeReclaimDelete)
	snapshotOf(t, ns, "yesterday", "data", class.Name, volumeA.Spec.CSI.VolumeHandle)
	snapshotOf(t, ns, "yesterday-unbound", "data", class.Name, "")
	if err := deleteErr(t, earlier); err != nil {
		t.Fatalf("the earlier claim, with a snapshot of its volume: %v", err)
	}
	settle(t, "the earlier claim gone", func(ctx context.Context) error {
		if err := controlPlane.Client.Get(ctx, client.ObjectKeyFromObject(earlier), &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})

	// Today's claim of the same name, on volume B, created after both
	// snapshots (in the same second at most: the unbound one does not count
	// either way).
	today, volumeB := namedVolumeFixture(t, ns, "data", "pv-"+ns+"-b", corev1.PersistentVolumeReclaimDelete)
	mustDeny(t, deleteErr(t, today),
		"PersistentVolumeClaim '"+ns+"/data' would lose data permanently.",
		"VolumeSnapshot yesterday was taken of another volume, not "+volumeB.Name,
		"VolumeSnapshot yesterday-unbound may hold an earlier claim's data: its content does not say which volume it was taken of, and it is not newer than the claim")
	// The volume itself is judged the same way.
	mustDeny(t, deleteErr(t, volumeB), "PersistentVolume '"+volumeB.Name+"'", "VolumeSnapshot yesterday was taken of another volume")

	readySnapshot(t, ns, "today", "data", class.Name)
	if err := deleteErr(t, today); err != nil {
		t.Fatalf("delete with a snapshot of this volume: %v", err)
	}
}

// In the authorized mode a SubjectAccessReview that cannot be answered in
// time refuses the bypass, and says so: the deletion cannot be undone. The
// review's time bound is set below what kube-apiserver can answer in.
func TestPVSafeBypassRefusedWhenTheAccessReviewFails(t *testing.T) {
	startPVSafeWith(t, module.Enforce, pvsafe.Options{AccessReviewTimeout: time.Nanosecond})
	ns := namespace(t, "pvsafe-bypass-review-fails")
	claim, _ := volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)
	labelForDeletion(t, controlPlane.Client, claim)
	self := &authenticationv1.SelfSubjectReview{}
	if err := controlPlane.Client.Create(context.Background(), self); err != nil {
		t.Fatal(err)
	}
	before := counterValue(t, "gatehouse_pvsafe_bypass_review_failures_total")
	mustDeny(t, deleteErr(t, claim),
		`The bypass does not apply: pv-safe.io/force-delete=true is set, but whether user "`+self.Status.UserInfo.Username+`" may bypass pvsafe could not be checked (SubjectAccessReview: `,
		"); the bypass is refused rather than risk the data. Retry the deletion.")
	if after := counterValue(t, "gatehouse_pvsafe_bypass_review_failures_total"); after != before+1 {
		t.Fatalf("review failures counter %v -> %v", before, after)
	}
}
