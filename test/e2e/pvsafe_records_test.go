package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
)

// Issue 26, as the attacker: a tenant with edit in its namespace may delete
// and create the Events there, so the bypass Event on its claim is no
// record: the tenant erases it and forges another. The bypass is recorded
// where its roles do not reach: an Event in Gatehouse's namespace, which it
// can neither delete nor write, and the deletion's audit event in
// kube-apiserver's audit log (the annotation pvsafe.gatehouse.dev/bypass).
func TestPVSafeBypassRecordsATenantCannotErase(t *testing.T) {
	own := fixedNamespace(t, "gatehouse-e2e")
	startGatehouse(t, app.Options{
		Namespace: own,
		Catalogue: []module.Module{pvsafe.New(pvsafe.Options{Bypass: pvsafe.BypassLabelOnly})},
		Modules:   map[string]app.ModuleConfig{"pvsafe": {Enabled: true, Enforcement: module.Enforce}},
	})
	ctx := context.Background()
	ns := namespace(t, "pvsafe-records")
	tenant, user := tenantClient(t, ns)
	claim, pv := volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)
	labelForDeletion(t, tenant, claim)
	if err := tenant.Delete(ctx, claim); err != nil {
		t.Fatalf("label mode refused a labelled deletion: %v", err)
	}

	// The tenant's namespace: the Event is the tenant's to erase, and to
	// forge.
	bypassEvent(t, ns, "PersistentVolumeClaim", "data")
	var events corev1.EventList
	if err := tenant.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range events.Items {
		if events.Items[i].Reason == pvsafe.EventBypassed {
			if err := tenant.Delete(ctx, &events.Items[i]); err != nil {
				t.Fatalf("the tenant could not delete the Event in its namespace (the premise): %v", err)
			}
		}
	}
	forged := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "forged-" + randSuffix()},
		InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: "data"},
		Reason:         pvsafe.EventBypassed, Type: corev1.EventTypeWarning, Source: corev1.EventSource{Component: "gatehouse-pvsafe"},
		Message: `pvsafe allowed user "someone-else" to delete PersistentVolumeClaim ` + ns + "/data",
	}
	if err := tenant.Create(ctx, forged); err != nil {
		t.Fatalf("the tenant could not write an Event in its namespace (the premise): %v", err)
	}

	// Gatehouse's namespace holds the record, out of the tenant's reach.
	var record corev1.Event
	eventually(t, "the bypass recorded in Gatehouse's namespace", func() error {
		var list corev1.EventList
		if err := controlPlane.Client.List(ctx, &list, client.InNamespace(own)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == pvsafe.EventBypassed && e.InvolvedObject.Kind == pvsafe.RecordKind &&
				e.InvolvedObject.Name == "persistentvolumeclaim-"+string(claim.UID) {
				record = e
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(list.Items))
	})
	for _, want := range []string{`pvsafe allowed user "` + user + `"`, "to delete PersistentVolumeClaim " + ns + "/data with pv-safe.io/force-delete=true",
		"data lost: data: volume " + pv.Name} {
		if !strings.Contains(record.Message, want) {
			t.Fatalf("the record lacks %q: %s", want, record.Message)
		}
	}
	if err := tenant.Delete(ctx, &record); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant deleting the record in Gatehouse's namespace: %v, want Forbidden", err)
	}
	forged.Namespace, forged.Name, forged.ResourceVersion = own, "forged-"+randSuffix(), ""
	if err := tenant.Create(ctx, forged); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant writing an Event in Gatehouse's namespace: %v, want Forbidden", err)
	}

	// The audit log holds it with the deleting user, in kube-apiserver's
	// own record of the request.
	got := auditAnnotation(t, ns, "data", pvsafe.WebhookName+"/"+pvsafe.BypassAnnotation)
	if want := "delete PersistentVolumeClaim " + ns + "/data with pv-safe.io/force-delete=true: the label alone allows it (bypass mode label)"; !strings.HasPrefix(got, want) {
		t.Fatalf("audit annotation %q, want %q", got, want)
	}
}

// docs/pvsafe.md: a namespace role with wildcards (verbs, API groups and
// resources "*") holds the bypass of that namespace's claims and
// StatefulSets, as RBAC grants the virtual group like any other; it never
// holds the bypass of Namespaces and PersistentVolumes, which is asked
// without a namespace.
func TestPVSafeWildcardNamespaceRolesHoldTheBypass(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "pvsafe-wildcard")
	user := "owner-" + randSuffix()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "owner"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, obj := range []client.Object{role, binding} {
		if err := controlPlane.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	may := func(resource, namespace string) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: pvsafe.BypassVerb, Group: pvsafe.BypassGroup, Resource: resource, Namespace: namespace, Name: "data"},
		}}
		if err := controlPlane.Client.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	}
	eventually(t, "the wildcard role holds the bypass of the namespace's claims", func() error {
		for _, resource := range []string{"persistentvolumeclaims", "statefulsets"} {
			if ok, err := may(resource, ns); err != nil || !ok {
				return fmt.Errorf("%s: allowed=%v (%v)", resource, ok, err)
			}
		}
		return nil
	})
	for _, resource := range []string{"namespaces", "persistentvolumes"} {
		if ok, err := may(resource, ""); err != nil || ok {
			t.Fatalf("a namespace's wildcard role holds the cluster-wide bypass of %s: allowed=%v (%v)", resource, ok, err)
		}
	}
}
