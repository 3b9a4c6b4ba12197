package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cozyv1alpha1 "github.com/gatehouse-dev/gatehouse/api/cozystack.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/placement"
)

// The tests below are issue 17's placement findings, each written as the
// bypass or the mismatch was found; each failed on the code before.

const holdFinalizer = "e2e.gatehouse.dev/hold"

// heldClass creates a class with a finalizer, allowed in e's tenant, and
// removes the finalizer when the test ends (after its releases are gone).
func (e *placementEnv) heldClass(short string) string {
	e.t.Helper()
	ctx := context.Background()
	name := short + "-" + randSuffix()
	ac := &cozyv1alpha1.AffinityClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{holdFinalizer}},
		Spec:       cozyv1alpha1.AffinityClassSpec{NodeSelector: map[string]string{zoneKey: "zone-a"}},
	}
	if err := e.c.Create(ctx, ac); err != nil {
		e.t.Fatal(err)
	}
	e.classes[short] = name
	// Registered before any Gatehouse the test starts later, so it runs
	// after they stopped and their webhook configurations are gone.
	e.t.Cleanup(func() {
		_ = e.c.DeleteAllOf(context.Background(), &helmv2.HelmRelease{}, client.InNamespace(e.ns))
		_ = releaseFinalizer(e.c, name)
		_ = e.c.Delete(context.Background(), ac)
	})
	return name
}

// releaseFinalizer removes holdFinalizer from the class, as the controller
// that holds it would.
func releaseFinalizer(c client.Client, name string) error {
	ctx := context.Background()
	ac := &cozyv1alpha1.AffinityClass{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ac); err != nil {
		return err
	}
	ac.Finalizers = nil
	return c.Update(ctx, ac)
}

// allowClasses rewrites the tenant's allow-list as the platform (the
// admin client is in system:masters).
func (e *placementEnv) allowClasses(classes ...string) {
	e.t.Helper()
	values := fmt.Sprintf("_namespace:\n  defaultAffinityClass: %s\n  allowedAffinityClasses: [%s]\n", e.classes["dc1"], strings.Join(classes, ", "))
	if err := setValues(e.c, e.ns, values); err != nil {
		e.t.Fatal(err)
	}
}

// Item 6: a finalizer splits a class's deletion in two writes. The DELETE
// of an unused class is admitted and leaves it terminating; a release must
// not take it then (it would be refused "not found" for its Pods once the
// finalizer goes); and a class in use keeps its guard through the removal
// of its last finalizer, which is what deletes it.
func TestPlacementClassFinalizerDoesNotBypassTheGuard(t *testing.T) {
	e := startPlacement(t, module.Warn)
	ctx := context.Background()
	unused := e.heldClass("unused")
	kept := e.heldClass("kept")
	e.allowClasses(e.classes["dc1"], unused, kept)

	// The class in use first (warn mode lets its DELETE through, with the
	// denial as warnings: the state the guard must hold through).
	eventually(t, "the widened allow-list is in the cache", func() error {
		_, err := e.release("db", kept)
		return err
	})
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.WarningHandler = rec
	warned, err := client.New(cfg, client.Options{Scheme: e.c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the release is in the cache and the class guarded", func() error {
		rec.msgs = nil
		if err := warned.Delete(ctx, &cozyv1alpha1.AffinityClass{ObjectMeta: metav1.ObjectMeta{Name: kept}}, client.DryRunAll); err != nil {
			return err
		}
		if !strings.Contains(strings.Join(rec.msgs, "\n"), fmt.Sprintf("AffinityClass %q cannot be deleted: 1 HelmRelease(s) use it:", kept)) {
			return fmt.Errorf("warnings %q", rec.msgs)
		}
		return nil
	})
	if err := warned.Delete(ctx, &cozyv1alpha1.AffinityClass{ObjectMeta: metav1.ObjectMeta{Name: kept}}); err != nil {
		t.Fatal(err)
	}

	// The unused class is deleted; its finalizer holds it.
	if err := e.c.Delete(ctx, &cozyv1alpha1.AffinityClass{ObjectMeta: metav1.ObjectMeta{Name: unused}}); err != nil {
		t.Fatalf("deleting an unused class: %v", err)
	}
	want := fmt.Sprintf("HelmRelease %s/late: AffinityClass %q (from spec.values.affinityClass) is being deleted: a release may keep it until it is gone, but not newly take it; choose another class in spec.values.affinityClass", e.ns, unused)
	eventually(t, "a release on the terminating class is refused", func() error {
		_, err := e.release("late", unused)
		if err == nil {
			_ = e.c.Delete(ctx, &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "late"}})
			return fmt.Errorf("a release was admitted on a class being deleted")
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("release on a terminating class: %v; want %q", err, want)
		}
		return nil
	})
	// The release already on the terminating class keeps it: Flux applies
	// it again unchanged.
	hr := &helmv2.HelmRelease{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "db"}, hr); err != nil {
		t.Fatal(err)
	}
	hr.Annotations = map[string]string{"reconcile.fluxcd.io/requestedAt": "now"}
	if err := e.c.Update(ctx, hr); err != nil {
		t.Fatalf("a release keeping its terminating class was refused: %v", err)
	}

	// Enforce: removing the last finalizer of the class in use deletes it,
	// and is refused like a DELETE.
	if err := e.g.Stop(); err != nil {
		t.Fatal(err)
	}
	startGatehouse(t, app.Options{
		Catalogue: []module.Module{placement.New(placement.Options{})},
		Modules:   map[string]app.ModuleConfig{"placement": {Enabled: true, Enforcement: module.Enforce}},
	})
	err = releaseFinalizer(e.c, kept)
	want = fmt.Sprintf("AffinityClass %q cannot be deleted (by removing its last finalizer): 1 HelmRelease(s) use it:\n  - %s/db", kept, e.ns)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("removing the last finalizer of a class in use: %v; want %q", err, want)
	}
	ac := &cozyv1alpha1.AffinityClass{}
	if err := e.c.Get(ctx, client.ObjectKey{Name: kept}, ac); err != nil || ac.DeletionTimestamp == nil {
		t.Fatalf("the class in use should still be there, terminating: %v", err)
	}
	// Its Pods are still judged by it.
	err = e.c.Create(ctx, e.fluxPod("web-1", "db", map[string]string{zoneKey: "zone-b"}, nil))
	want = fmt.Sprintf("pod %s/web-1 belongs to application with AffinityClass %q but missing required nodeSelector %s=zone-a", e.ns, kept, zoneKey)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a Pod of a release on a terminating class: %v; want %q", err, want)
	}
	// Once no release uses it, the finalizer may go.
	if err := e.c.Delete(ctx, hr); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the class's last finalizer may go once unused", func() error { return releaseFinalizer(e.c, kept) })
}
