package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// These tests are written as hostile tenants of one shared config: two
// namespaces, each with a user holding ClusterRole edit there only, both
// selected by the example config (examples/configcheck).

// longBackendName is what the example's backend-name annotation accepts
// (letters, digits, '.', '_' and '-'), long enough that haproxy's alerts
// about it are longer together than any denial message.
var longBackendName = strings.Repeat("b", 1503)

// tenantNamespace is a namespace selected by e's config, with a user who
// may edit it, and a Service "api" there.
func (e *configcheckEnv) tenantNamespace(t *testing.T, base string) (string, client.Client) {
	t.Helper()
	ns := namespace(t, base)
	e.label(ns)
	c, _ := tenantClient(t, ns)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "api"}},
	}
	eventually(t, "the tenant's Service is admitted", func() error { return c.Create(context.Background(), svc) })
	return ns, c
}

// tenantIngress routes host to port 80 of Service api in namespace;
// backend, when set, is its backend-name annotation.
func tenantIngress(namespace, name, host, backend string) *networkingv1.Ingress {
	return tenantIngressToPort(namespace, name, host, backend, 80)
}

// tenantIngressToPort is tenantIngress to another port: the example makes a
// backend per namespace, Service and port, named by the annotation when
// there is one.
func tenantIngressToPort(namespace, name, host, backend string, port int32) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To("haproxy"),
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "api", Port: networkingv1.ServiceBackendPort{Number: port}},
				}}},
			}}}},
		},
	}
	if backend != "" {
		ing.Annotations = map[string]string{"haproxy.gatehouse.dev/backend-name": backend}
	}
	return ing
}

// condition is the config's condition of that type, as its readers see it.
func (e *configcheckEnv) condition(kind string) *metav1.Condition {
	e.t.Helper()
	return meta.FindStatusCondition(e.config().Status.Conditions, kind)
}

func (e *configcheckEnv) waitCondition(kind string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	e.t.Helper()
	var got *metav1.Condition
	e.waitFor(fmt.Sprintf("condition %s is %s (%s)", kind, status, reason), func() error {
		got = e.condition(kind)
		if got == nil || got.Status != status || got.Reason != reason || got.ObservedGeneration != e.config().Generation {
			return fmt.Errorf("condition %s: %+v", kind, got)
		}
		return nil
	})
	return got
}

// TestConfigcheckConcurrentAdmissionsAreJudgedTogether: tenant A creates
// three Ingresses at the same moment (to three ports of its Service, so
// three backends), each alone fine, together naming three backends alike. Judged apart, all three were stored and the
// config's rendering failed haproxy -c for everyone from then on. Judged
// together, one is admitted and the rendering stays valid.
func TestConfigcheckConcurrentAdmissionsAreJudgedTogether(t *testing.T) {
	e := startConfigcheck(t)
	ctx := context.Background()
	nsA, tenantA := e.tenantNamespace(t, "tenant-a")
	nsB, tenantB := e.tenantNamespace(t, "tenant-b")
	if err := tenantB.Create(ctx, tenantIngress(nsB, "b0", "b0.example", "")); err != nil {
		t.Fatal(err)
	}
	e.waitCondition("Published", metav1.ConditionTrue, "Published")

	exactlyOneAdmitted(t, atOnce(3, func(i int) error {
		return tenantA.Create(ctx, tenantIngressToPort(nsA, fmt.Sprintf("a%d", i), fmt.Sprintf("a%d.example", i), longBackendName, int32(80+i)))
	}))

	// The config's rendering still passes: tenant B's next Ingress is
	// published.
	if err := tenantB.Create(ctx, tenantIngress(nsB, "b1", "b1.example", "")); err != nil {
		t.Fatal(err)
	}
	e.waitFor("tenant B's new Ingress is published", func() error {
		if !strings.Contains(e.published()["map.hosts.map"], "b1.example") {
			return errors.New("b1.example is not in the published host map")
		}
		return nil
	})
	if c := e.condition("Published"); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Published: %+v", c)
	}
}

// TestConfigcheckWayOutOfAFailingState: a failing state that got in past
// the webhook (three Ingresses claiming one backend name, stored before
// their namespace was selected) blocks nobody. Tenant B's creates and
// updates, Service creates, tenant A's deletes of its own Ingresses and
// the administrator's delete are admitted; a change adding a failure is
// still refused; the config names the Ingresses that cause the failure;
// the last good rendering stays published until the failure is gone.
func TestConfigcheckWayOutOfAFailingState(t *testing.T) {
	e := startConfigcheck(t)
	ctx := context.Background()
	nsB, tenantB := e.tenantNamespace(t, "tenant-b")
	if err := tenantB.Create(ctx, tenantIngress(nsB, "b0", "b0.example", "")); err != nil {
		t.Fatal(err)
	}
	e.waitFor("tenant B's Ingress is published", func() error {
		if !strings.Contains(e.published()["map.hosts.map"], "b0.example") {
			return errors.New("b0.example is not published")
		}
		return nil
	})
	good := maps.Clone(e.published())

	// Tenant A's namespace is not selected yet: its objects are admitted
	// without rendering.
	nsA := namespace(t, "tenant-a")
	tenantA, _ := tenantClient(t, nsA)
	if err := tenantA.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "api"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "api"}},
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := tenantA.Create(ctx, tenantIngressToPort(nsA, fmt.Sprintf("a%d", i), fmt.Sprintf("a%d.example", i), longBackendName, int32(80+i))); err != nil {
			t.Fatal(err)
		}
	}
	// The administrator selects it: the three join the config's state at
	// once.
	e.label(nsA)

	e.waitCondition("Published", metav1.ConditionFalse, "HAProxyCheckFailed")
	if got := e.published(); !maps.Equal(got, good) {
		t.Fatal("the published rendering changed while the state fails; the last good one must stay")
	}

	t.Run("tenant B's creates and updates are admitted", func(t *testing.T) {
		for i := range 6 {
			name := fmt.Sprintf("b-new-%d", i)
			if err := tenantB.Create(ctx, tenantIngress(nsB, name, name+".example", "")); err != nil {
				t.Fatalf("create %s: %v", name, err)
			}
		}
		ing := &networkingv1.Ingress{}
		if err := tenantB.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "b0"}, ing); err != nil {
			t.Fatal(err)
		}
		ing.Spec.Rules[0].Host = "b0-moved.example"
		if err := tenantB.Update(ctx, ing); err != nil {
			t.Fatalf("update: %v", err)
		}
	})
	t.Run("a Service create is admitted", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "api2"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}
		if err := tenantB.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a change adding a failure of its own is still refused", func(t *testing.T) {
		err := tenantB.Create(ctx, tenantIngress(nsB, "b-dup", "b-dup.example", longBackendName))
		denied(t, err, "has the same name as backend")
	})
	// The config's readers see which objects cause the failure.
	failing := e.waitCondition("Failing", metav1.ConditionTrue, "Attributed")
	for i := range 3 {
		if want := fmt.Sprintf("ingresses %s/a%d", nsA, i); !strings.Contains(failing.Message, want) {
			t.Fatalf("Failing names %q; want it to name %s", failing.Message, want)
		}
	}
	if strings.Contains(failing.Message, nsB+"/b0") {
		t.Fatalf("Failing names tenant B's Ingress, which is not part of the failure: %q", failing.Message)
	}
	t.Run("tenant A deletes its own Ingress", func(t *testing.T) {
		if err := tenantA.Delete(ctx, tenantIngress(nsA, "a0", "", "")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the administrator deletes the offending Ingress", func(t *testing.T) {
		if err := e.c.Delete(ctx, tenantIngress(nsA, "a1", "", "")); err != nil {
			t.Fatal(err)
		}
	})
	// One Ingress of the name is left: the state passes again, and what
	// tenant B changed meanwhile is published.
	e.waitCondition("Failing", metav1.ConditionFalse, "Passes")
	e.waitCondition("Published", metav1.ConditionTrue, "Published")
	hosts := e.published()["map.hosts.map"]
	for _, want := range []string{"b0-moved.example", "b-new-5.example", "a2.example"} {
		if !strings.Contains(hosts, want) {
			t.Fatalf("published host map lacks %s:\n%s", want, hosts)
		}
	}
}

// TestConfigcheckRenderFailureOfAnotherTenantIsNotShown plays a tenant
// admitted over a state another tenant's object breaks. Another namespace,
// not yet selected, holds an Ingress to a Service that does not exist;
// once the administrator selects it, the example config's rendering stops
// at its fail text, which names that Ingress, its namespace, its Service
// and its host. Tenant B, who may read none of them, creates an Ingress of
// its own: it is admitted (it adds no failure), and its warnings say that
// the state fails and how far the change was checked, with the other
// tenant's names replaced. B's own failure, in a namespace of its own, is
// still quoted whole.
func TestConfigcheckRenderFailureOfAnotherTenantIsNotShown(t *testing.T) {
	e := startConfigcheck(t)
	ctx := context.Background()
	nsB := namespace(t, "tenant-b")
	e.label(nsB)
	_, userB := tenantClient(t, nsB)
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: userB, Groups: []string{"system:authenticated"}}
	cfg.WarningHandler = rec
	tenantB, err := client.New(cfg, client.Options{Scheme: controlPlane.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "api"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "api"}},
	}
	eventually(t, "tenant B's Service is admitted", func() error { return tenantB.Create(ctx, svc) })

	// B's own failure is B's to read, whole.
	err = tenantB.Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "shop"},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("haproxy"), Rules: []networkingv1.IngressRule{{Host: "shop.b.example",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "nosuch", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}}}}},
	})
	denied(t, err, fmt.Sprintf("Service 'nosuch' not found (Ingress %s/shop, host shop.b.example): create the Service first", nsB))

	// The other tenant's broken Ingress, stored while its namespace was
	// not selected, then selected.
	hidden := namespace(t, "ledger-team")
	broken := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: hidden, Name: "vault-7"},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("haproxy"), Rules: []networkingv1.IngressRule{{Host: "payroll.hidden.example",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "salaries", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}}}}},
	}
	if err := e.c.Create(ctx, broken); err != nil {
		t.Fatal(err)
	}
	e.label(hidden)
	e.waitCondition("Published", metav1.ConditionFalse, "RenderFailed")

	rec.mu.Lock()
	rec.msgs = nil
	rec.mu.Unlock()
	eventually(t, "tenant B's Ingress is admitted over the failing state", func() error {
		return tenantB.Create(ctx, tenantIngress(nsB, "web", "web.b.example", ""))
	})
	rec.mu.Lock()
	warnings := strings.Join(rec.msgs, "\n")
	rec.mu.Unlock()
	if !strings.Contains(warnings, "fails without this change too") || !strings.Contains(warnings, "the failure: Service '…' not found (Ingress …/…, host ….….example)") {
		t.Fatalf("warnings %q: want the failing state named and its failure with the other tenant's words replaced", warnings)
	}
	for _, secret := range []string{hidden, "vault-7", "salaries", "payroll", "hidden"} {
		if strings.Contains(warnings, secret) {
			t.Fatalf("tenant B's warnings quote %q of another tenant's Ingress: %q", secret, warnings)
		}
	}
}

// atOnce runs n creates released at the same moment, and returns their
// errors by index.
func atOnce(n int, create func(i int) error) []error {
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			errs[i] = create(i)
		}()
	}
	start.Done()
	done.Wait()
	return errs
}

// exactlyOneAdmitted asserts that of creates claiming one backend name at
// once, judged together, exactly one was admitted, the others refused for
// the duplicate backend.
func exactlyOneAdmitted(t *testing.T, errs []error) {
	t.Helper()
	admitted := 0
	for i, err := range errs {
		switch {
		case err == nil:
			admitted++
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "has the same name as backend"):
		default:
			t.Fatalf("create %d: %v; want admitted, or refused for the duplicate backend", i, err)
		}
	}
	if admitted != 1 {
		t.Fatalf("%d of %d objects claiming one backend name were admitted; judged together, exactly one may be", admitted, len(errs))
	}
}
