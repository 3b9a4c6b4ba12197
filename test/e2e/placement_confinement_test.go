package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/placement"
)

// The tests below play a tenant: a user with the ClusterRole edit in its
// namespace (which covers Secrets), and HelmReleases there as Flux's
// aggregated flux-edit role grants them. Each failed on the code before
// placement confined tenants (issue 16, finding 4).

// releaseEditor lets user write HelmReleases in namespace, as Flux's
// ClusterRole aggregated to edit does in a cluster that runs Flux.
func releaseEditor(t *testing.T, namespace, user string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "flux-edit-" + user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{helmv2.GroupVersion.Group}, Resources: []string{"helmreleases"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := controlPlane.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

// helmController is a client acting as Flux's helm-controller, with edit in
// namespace: the platform identity that writes tenants' values.
func helmController(t *testing.T, namespace string) client.Client {
	t.Helper()
	const user = "system:serviceaccount:flux-system:helm-controller"
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "helm-controller"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "flux-system", Name: "helm-controller"}},
	}
	if err := controlPlane.Client.Create(context.Background(), binding); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:flux-system", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: controlPlane.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// setValues rewrites values.yaml of namespace's cozystack-values as c.
func setValues(c client.Client, namespace, values string) error {
	ctx := context.Background()
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "cozystack-values"}, s); err != nil {
		return err
	}
	s.Data = map[string][]byte{"values.yaml": []byte(values)}
	return c.Update(ctx, s)
}

// (a) A tenant edits its own cozystack-values to allow itself any class.
func TestPlacementTenantCannotChangeItsOwnAllowList(t *testing.T) {
	e := startPlacement(t, module.Enforce)
	ctx := context.Background()
	tenant, user := tenantClient(t, e.ns)
	releaseEditor(t, e.ns, user)
	dc1, dc2, either, gpu := e.classes["dc1"], e.classes["dc2"], e.classes["either"], e.classes["gpu"]
	original := fmt.Sprintf("_namespace:\n  defaultAffinityClass: %s\n  allowedAffinityClasses: [%s, %s, %s]\n", dc1, dc1, dc2, either)
	widened := fmt.Sprintf("_namespace:\n  defaultAffinityClass: %s\n  allowedAffinityClasses: [%s, %s, %s, %s]\n", dc1, dc1, dc2, either, gpu)

	err := setValues(tenant, e.ns, widened)
	want := fmt.Sprintf(`Secret %s/cozystack-values: user %q may not change its placement settings (_namespace.defaultAffinityClass, _namespace.allowedAffinityClasses in values.yaml)`, e.ns, user)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "ask the platform team to change the Tenant") {
		t.Fatalf("the tenant widened its own allow-list: %v; want %q", err, want)
	}
	// Dropping the settings altogether (no tenant: any class) is a change too.
	if err := setValues(tenant, e.ns, "_namespace:\n  host: example.org\n"); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the tenant removed its placement settings: %v", err)
	}
	// Without the Secret the namespace would be no tenant's.
	victim := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cozystack-values"}}
	err = tenant.Delete(ctx, victim)
	want = fmt.Sprintf(`Secret %s/cozystack-values: user %q may not delete it: it holds the namespace's placement settings, and a namespace without them may use any class`, e.ns, user)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the tenant deleted its cozystack-values: %v; want %q", err, want)
	}
	// The rest of the Secret stays the tenant's to write.
	if err := setValues(tenant, e.ns, original+"_cluster:\n  host: example.org\n"); err != nil {
		t.Fatalf("a change outside the placement settings was refused: %v", err)
	}
	// The class it tried to allow stays refused.
	release := func(c client.Client, name, class string) error {
		hr := &helmv2.HelmRelease{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Labels: map[string]string{"apps.cozystack.io/application.kind": "Postgres"}},
			Spec: helmv2.HelmReleaseSpec{
				Interval: metav1.Duration{Duration: 300_000_000_000},
				Chart:    &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "postgres", SourceRef: helmv2.CrossNamespaceObjectReference{Kind: "HelmRepository", Name: "cozystack"}}},
				Values:   &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(`{"affinityClass":%q}`, class))},
			},
		}
		return c.Create(ctx, hr)
	}
	err = release(tenant, "ml", gpu)
	want = fmt.Sprintf("AffinityClass %q (from spec.values.affinityClass) is not allowed in namespace %s", gpu, e.ns)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("release with the class the tenant tried to allow: %v; want %q", err, want)
	}

	// Flux's helm-controller, a platform identity, still writes them, and
	// the class is then allowed.
	if err := setValues(helmController(t, e.ns), e.ns, widened); err != nil {
		t.Fatalf("helm-controller could not change the tenant's settings: %v", err)
	}
	if err := release(tenant, "ml", gpu); err != nil {
		t.Fatalf("the class the platform allowed is refused: %v", err)
	}

	// A tenant cannot create the Secret with settings where none exists.
	other := namespace(t, "tenant-new")
	newcomer, newUser := tenantClient(t, other)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "cozystack-values"}, Data: map[string][]byte{"values.yaml": []byte(widened)}}
	err = newcomer.Create(ctx, s)
	want = fmt.Sprintf(`Secret %s/cozystack-values: user %q may not create it with placement settings`, other, newUser)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a tenant created cozystack-values with settings: %v; want %q", err, want)
	}
}

// (b) One update removes the application label, the next chooses the
// class freely: the webhook must not be switched off by a label.
func TestPlacementApplicationLabelCannotBeRemoved(t *testing.T) {
	e := startPlacement(t, module.Enforce)
	ctx := context.Background()
	tenant, user := tenantClient(t, e.ns)
	releaseEditor(t, e.ns, user)
	dc1, gpu := e.classes["dc1"], e.classes["gpu"]
	if _, err := e.release("db", ""); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: e.ns, Name: "db"}

	hr := &helmv2.HelmRelease{}
	if err := tenant.Get(ctx, key, hr); err != nil {
		t.Fatal(err)
	}
	delete(hr.Labels, "apps.cozystack.io/application.kind")
	err := tenant.Update(ctx, hr)
	want := fmt.Sprintf(`HelmRelease %s/db: user %q may not remove the label apps.cozystack.io/application.kind`, e.ns, user)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the tenant removed its release's application label: %v; want %q", err, want)
	}

	// The next write sets the class label and _scheduling by hand: they are
	// the webhook's, and are set back to the tenant's class.
	if err := tenant.Get(ctx, key, hr); err != nil {
		t.Fatal(err)
	}
	hr.Labels["apps.cozystack.io/affinity-class"] = gpu
	hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(`{"_scheduling":{"affinityClass":%q,"nodeSelector":{"gpu":"true"}}}`, gpu))}
	if err := tenant.Update(ctx, hr); err != nil {
		t.Fatal(err)
	}
	if err := tenant.Get(ctx, key, hr); err != nil {
		t.Fatal(err)
	}
	if hr.Labels["apps.cozystack.io/application.kind"] == "" || hr.Labels["apps.cozystack.io/affinity-class"] != dc1 ||
		!strings.Contains(string(hr.Spec.Values.Raw), `"_scheduling":{"affinityClass":"`+dc1+`"`) {
		t.Fatalf("the tenant chose its release's class: labels %v values %s", hr.Labels, hr.Spec.Values.Raw)
	}
	// And its Pods are still held to dc1.
	err = tenant.Create(ctx, e.fluxPod("on-gpu", "db", map[string]string{"gpu": "true"}, nil))
	want = fmt.Sprintf(`pod %s/on-gpu belongs to application with AffinityClass %q but missing required nodeSelector %s=zone-a`, e.ns, dc1, zoneKey)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a Pod of the release outside its class: %v; want %q", err, want)
	}

	// A platform identity may still remove the label.
	flux := helmController(t, e.ns)
	releaseEditor(t, e.ns, "system:serviceaccount:flux-system:helm-controller")
	if err := flux.Get(ctx, key, hr); err != nil {
		t.Fatal(err)
	}
	delete(hr.Labels, "apps.cozystack.io/application.kind")
	if err := flux.Update(ctx, hr); err != nil {
		t.Fatalf("a platform identity could not remove the application label: %v", err)
	}
}

// (c) Owner-kind slots: a tenant's dry-run Pods naming invented owner kinds
// must not use them up, so that an operator's kind seen later is followed
// and its Pods checked.
func TestPlacementInventedOwnerKindsTakeNoSlot(t *testing.T) {
	// The periodic check walks every Pod's lineage when Gatehouse starts,
	// and a real owner kind it meets takes a slot: the Pods of earlier
	// tests' namespaces must be gone first.
	namespacesDeleted(t)
	// One slot beyond the six workload kinds.
	e := startPlacement(t, module.Enforce, placement.Options{MaxOwnerKinds: 7})
	ctx := context.Background()
	tenant, _ := tenantClient(t, e.ns)

	for i := range 3 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: fmt.Sprintf("squat-%d", i), OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "invented.example.com/v1", Kind: fmt.Sprintf("Squatter%d", i), Name: "x", UID: "00000000-0000-0000-0000-000000000001",
			}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
		}
		if err := tenant.Create(ctx, pod, client.DryRunAll); err != nil {
			t.Fatalf("dry-run Pod with an invented owner kind: %v", err)
		}
	}
	pod, _ := e.operatorPod(t, "confine.example.org", "pg", e.classes["dc2"])
	err := e.c.Create(ctx, pod(map[string]string{zoneKey: "zone-a"}))
	want := fmt.Sprintf(`pod %s/pg-1 belongs to application with AffinityClass %q but missing required nodeSelector %s=zone-b`, e.ns, e.classes["dc2"], zoneKey)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a Pod owned by an operator's kind after invented kinds were named: %v; want %q", err, want)
	}
}

// (c) When no slot is left, the Pod is not decided by Gatehouse: it answers
// undecided, the webhook's failure policy (Ignore) admits the Pod, and the
// refusal is counted.
func TestPlacementOwnerKindsExhaustedIsUndecided(t *testing.T) {
	e := startPlacement(t, module.Enforce, placement.Options{MaxOwnerKinds: 6})
	ctx := context.Background()
	refused := counterValue(t, "gatehouse_placement_owner_kinds_refused_total")
	undecided := counterWithLabel("gatehouse_webhook_requests_total", "decision", "undecided")

	pod, _ := e.operatorPod(t, "exhaust.example.org", "pg", e.classes["dc2"])
	if err := e.c.Create(ctx, pod(map[string]string{zoneKey: "zone-a"})); err != nil {
		t.Fatalf("failurePolicy Ignore should admit an undecided Pod: %v", err)
	}
	if got := counterValue(t, "gatehouse_placement_owner_kinds_refused_total"); got <= refused {
		t.Fatalf("gatehouse_placement_owner_kinds_refused_total stayed at %v", got)
	}
	if got := counterWithLabel("gatehouse_webhook_requests_total", "decision", "undecided"); got <= undecided {
		t.Fatalf("the undecided Pod was not answered as undecided (failure policy), undecided decisions stayed at %v", got)
	}
}

// operatorPod defines an operator's kind (Database in group), an
// application release using class, and a CR of that kind rendered by the
// release; it returns a maker of Pods the CR owns.
func (e *placementEnv) operatorPod(t *testing.T, group, release, class string) (func(map[string]string) *corev1.Pod, *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	kind := "Database" + strings.ToUpper(randSuffix()[:1]) + randSuffix()
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}
	crd := schemalessCRD(gvk, strings.ToLower(kind)+"s")
	if err := e.c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), crd) })
	if _, err := e.release(release, class); err != nil {
		t.Fatal(err)
	}
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(gvk)
	cr.SetNamespace(e.ns)
	cr.SetName(release)
	cr.SetLabels(map[string]string{"helm.toolkit.fluxcd.io/name": release})
	eventually(t, "the operator's CRD is served", func() error { return e.c.Create(ctx, cr) })
	n := 0
	return func(selector map[string]string) *corev1.Pod {
		n++
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: fmt.Sprintf("%s-%d", release, n), OwnerReferences: []metav1.OwnerReference{{
				APIVersion: gvk.GroupVersion().String(), Kind: kind, Name: release, UID: cr.GetUID(), Controller: ptr.To(true),
			}}},
			Spec: corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "db", Image: "registry.example/db:1"}}},
		}
	}, cr
}
