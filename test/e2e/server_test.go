package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// labelGuard is a test module (a fixture, not a fake of a real part): it
// denies ConfigMaps labelled gatehouse.test/deny=true through a static
// webhook, and, at run time, Services and Ingresses labelled the same way
// through a webhook it registers with the host.
type labelGuard struct {
	host module.Host
}

const denyLabel = "gatehouse.test/deny"

func (*labelGuard) Name() string                      { return "labelguard" }
func (*labelGuard) AddToScheme(*runtime.Scheme) error { return nil }

func denyLabelled(ctx context.Context, req admission.Request) admission.Response {
	var obj metav1.PartialObjectMetadata
	if err := jsonUnmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(400, err)
	}
	if obj.Labels[denyLabel] == "true" {
		return admission.Denied(fmt.Sprintf("%s %s/%s carries %s=true\nremove the label to proceed", req.Kind.Kind, req.Namespace, obj.Name, denyLabel))
	}
	return admission.Allowed("")
}

func (g *labelGuard) Setup(_ context.Context, host module.Host) error {
	g.host = host
	return nil
}

// guardKinds registers (or, with no kinds, withdraws) the run-time webhook
// judging the given kinds, their resources resolved through discovery.
func (g *labelGuard) guardKinds(kinds ...schema.GroupVersionKind) error {
	if len(kinds) == 0 {
		return g.host.SetWebhooks(nil)
	}
	var rules []admissionregistrationv1.RuleWithOperations
	for _, gvk := range kinds {
		mapping, err := g.host.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err
		}
		scope := admissionregistrationv1.NamespacedScope
		if mapping.Scope.Name() == meta.RESTScopeNameRoot {
			scope = admissionregistrationv1.ClusterScope
		}
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{gvk.Group}, APIVersions: []string{gvk.Version},
				Resources: []string{mapping.Resource.Resource}, Scope: ptr.To(scope),
			},
		})
	}
	return g.host.SetWebhooks([]module.Webhook{{
		Name: "labelguard-runtime.gatehouse.test", Path: module.RuntimePath("labelguard") + "kinds", Type: module.Validating,
		Rules: rules, FailurePolicy: admissionregistrationv1.Fail, SideEffects: admissionregistrationv1.SideEffectClassNone,
		TimeoutSeconds: 5, Admit: denyLabelled,
	}})
}

func (*labelGuard) Webhooks() []module.Webhook {
	return []module.Webhook{{
		Name: "labelguard.gatehouse.test", Path: "/validate-labelguard", Type: module.Validating,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		FailurePolicy: admissionregistrationv1.Fail, SideEffects: admissionregistrationv1.SideEffectClassNone,
		TimeoutSeconds: 5, Admit: denyLabelled,
	}}
}

func startGuard(t *testing.T, mode module.Enforcement, mutate func(*app.Options)) (*testenv.Gatehouse, *labelGuard) {
	t.Helper()
	guard := &labelGuard{}
	opts := app.Options{
		Catalogue: []module.Module{guard},
		Modules:   map[string]app.ModuleConfig{"labelguard": {Enabled: true, Enforcement: mode}},
	}
	if mutate != nil {
		mutate(&opts)
	}
	g := startGatehouse(t, opts)
	return g, guard
}

// namespace creates a namespace of the test's own, base-<random>, so that
// the suite can run again on the same control plane and in any order, and
// deletes it when the test ends.
func namespace(t *testing.T, base string) string {
	t.Helper()
	name := base + "-" + randSuffix()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := controlPlane.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = controlPlane.Client.Delete(context.Background(), ns) })
	return name
}

// namespacesDeleted waits until no namespace is being deleted: the objects
// of earlier tests are gone, for a test that counts what the whole cluster
// holds.
func namespacesDeleted(t *testing.T) {
	t.Helper()
	eventually(t, "earlier tests' namespaces are deleted", func() error {
		list := &corev1.NamespaceList{}
		if err := controlPlane.Client.List(context.Background(), list); err != nil {
			return err
		}
		for _, ns := range list.Items {
			if ns.DeletionTimestamp != nil {
				return fmt.Errorf("namespace %s is still being deleted", ns.Name)
			}
		}
		return nil
	})
}

// fixedNamespace creates a namespace whose name the test needs as it is
// (Gatehouse's own), or finds it from an earlier run.
func fixedNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := controlPlane.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

func labelled(ns, name string, deny bool) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if deny {
		cm.Labels = map[string]string{denyLabel: "true"}
	}
	return cm
}

func TestAPIServerCallsGatehouseOverTLS(t *testing.T) {
	startGuard(t, module.Enforce, nil)
	ctx := context.Background()
	ns := namespace(t, "e2e-enforce")

	if err := controlPlane.Client.Create(ctx, labelled(ns, "plain", false)); err != nil {
		t.Fatalf("unlabelled ConfigMap refused: %v", err)
	}
	err := controlPlane.Client.Create(ctx, labelled(ns, "guarded", true))
	if err == nil {
		t.Fatal("labelled ConfigMap admitted: the API server did not call Gatehouse")
	}
	for _, want := range []string{`admission webhook "labelguard.gatehouse.test" denied the request`, "ConfigMap " + ns + "/guarded carries", "remove the label to proceed"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("denial %q does not contain %q", err, want)
		}
	}
}

func TestWebhooksNeverInterceptExcludedNamespaces(t *testing.T) {
	startGuard(t, module.Enforce, nil)
	ctx := context.Background()
	own := fixedNamespace(t, "gatehouse-e2e")
	for _, ns := range []string{"kube-system", "kube-node-lease", own} {
		namespace(t, ns)
		cm := labelled(ns, "excluded-"+strings.ReplaceAll(ns, "-", ""), true)
		if err := controlPlane.Client.Create(ctx, cm); err != nil {
			t.Errorf("namespace %s was intercepted: %v", ns, err)
		}
	}
}

// warningRecorder collects the warnings the API server relays.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func TestWarnModeAdmitsAndRelaysTheDenialAsWarnings(t *testing.T) {
	startGuard(t, module.Warn, nil)
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.WarningHandler = rec
	c, err := client.New(cfg, client.Options{Scheme: controlPlane.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, "e2e-warn")
	if err := c.Create(context.Background(), labelled(ns, "warned", true)); err != nil {
		t.Fatalf("warn mode denied: %v", err)
	}
	got := strings.Join(rec.msgs, "\n")
	for _, want := range []string{"labelguard (enforcement: warn) would deny this request:", "ConfigMap " + ns + "/warned carries gatehouse.test/deny=true", "remove the label to proceed"} {
		if !strings.Contains(got, want) {
			t.Fatalf("warnings %q do not contain %q", got, want)
		}
	}
}

func TestRuntimeWebhooksAreAddedAndRemovedWithoutRestart(t *testing.T) {
	g, guard := startGuard(t, module.Enforce, nil)
	ctx := context.Background()
	ns := namespace(t, "e2e-runtime")
	svc := func(name string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{denyLabel: "true"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}
	}
	if err := guard.guardKinds(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}); err != nil {
		t.Fatal(err)
	}
	// The leader writes the entry; the API server then calls the new path.
	eventually(t, "the run-time webhook refuses a labelled Service", func() error {
		err := controlPlane.Client.Create(ctx, svc("guarded-"+randSuffix()))
		if err == nil {
			return errors.New("a labelled Service was admitted: the run-time webhook is not in force yet")
		}
		if !strings.Contains(err.Error(), `"labelguard-runtime.gatehouse.test" denied the request: Service `+ns+"/guarded-") {
			return fmt.Errorf("unexpected refusal: %v", err)
		}
		return nil
	})
	rendered := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: webhookconfig.ValidatingName}, rendered); err != nil {
		t.Fatal(err)
	}
	var resources []string
	for _, w := range rendered.Webhooks {
		if w.Name == "labelguard-runtime.gatehouse.test" {
			for _, r := range w.Rules {
				resources = append(resources, r.Resources...)
			}
			if *w.ClientConfig.URL != g.URL+"/validate/labelguard/kinds" {
				t.Errorf("run-time webhook URL %s", *w.ClientConfig.URL)
			}
		}
	}
	if strings.Join(resources, ",") != "services,ingresses" {
		t.Fatalf("run-time webhook rules name %v, want the resources discovery resolves", resources)
	}
	plain := svc("plain-" + randSuffix())
	plain.Labels = nil
	if err := controlPlane.Client.Create(ctx, plain); err != nil {
		t.Fatalf("plain Service refused: %v", err)
	}

	if err := guard.guardKinds(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the withdrawn webhook leaves the configuration", func() error {
		if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: webhookconfig.ValidatingName}, rendered); err != nil {
			return err
		}
		for _, w := range rendered.Webhooks {
			if w.Name == "labelguard-runtime.gatehouse.test" {
				return errors.New("the withdrawn webhook is still configured")
			}
		}
		return nil
	})
	if err := controlPlane.Client.Create(ctx, svc("after-"+randSuffix())); err != nil {
		t.Fatalf("labelled Service refused after its webhook was withdrawn: %v", err)
	}
}

func TestWebhookConfigurationDriftIsRepaired(t *testing.T) {
	startGuard(t, module.Enforce, nil)
	ctx := context.Background()
	key := client.ObjectKey{Name: webhookconfig.ValidatingName}

	// Another owner's entry in the same configuration is never touched.
	foreign := admissionregistrationv1.ValidatingWebhook{
		Name: "foreign.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/foreign")},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
		}},
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
	}
	live := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := controlPlane.Client.Get(ctx, key, live); err != nil {
		t.Fatal(err)
	}
	live.Webhooks = append(live.Webhooks, foreign)
	if err := controlPlane.Client.Update(ctx, live); err != nil {
		t.Fatal(err)
	}

	// An entry of Gatehouse's edited by hand comes back as declared.
	if err := controlPlane.Client.Get(ctx, key, live); err != nil {
		t.Fatal(err)
	}
	for i := range live.Webhooks {
		if live.Webhooks[i].Name == "labelguard.gatehouse.test" {
			live.Webhooks[i].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}
	}
	if err := controlPlane.Client.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	entry := func() (*admissionregistrationv1.ValidatingWebhook, bool, error) {
		got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := controlPlane.Client.Get(ctx, key, got); err != nil {
			return nil, false, err
		}
		var ours *admissionregistrationv1.ValidatingWebhook
		keptForeign := false
		for i := range got.Webhooks {
			switch got.Webhooks[i].Name {
			case "labelguard.gatehouse.test":
				ours = &got.Webhooks[i]
			case foreign.Name:
				keptForeign = true
			}
		}
		return ours, keptForeign, nil
	}
	eventually(t, "the edited entry is restored", func() error {
		ours, keptForeign, err := entry()
		switch {
		case err != nil:
			return err
		case !keptForeign:
			return errors.New("the other owner's entry was removed")
		case ours == nil || *ours.FailurePolicy != admissionregistrationv1.Fail:
			return errors.New("the edited entry is not restored yet")
		}
		return nil
	})

	// An entry deleted by hand comes back.
	if err := controlPlane.Client.Get(ctx, key, live); err != nil {
		t.Fatal(err)
	}
	live.Webhooks = slices.DeleteFunc(live.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return w.Name == "labelguard.gatehouse.test"
	})
	if err := controlPlane.Client.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted entry is restored", func() error {
		ours, keptForeign, err := entry()
		switch {
		case err != nil:
			return err
		case !keptForeign:
			return errors.New("the other owner's entry was removed")
		case ours == nil:
			return errors.New("the deleted entry is not restored yet")
		}
		return nil
	})

	// The whole configuration deleted comes back, and is enforced again.
	if err := controlPlane.Client.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, "e2e-drift")
	eventually(t, "the deleted configuration is restored and enforced", func() error {
		err := controlPlane.Client.Create(ctx, labelled(ns, "denied-"+randSuffix(), true))
		if err == nil || !strings.Contains(err.Error(), "carries gatehouse.test/deny=true") {
			return fmt.Errorf("labelled ConfigMap not refused yet: %v", err)
		}
		return nil
	})
}

func TestCertificateFromSecretIsServedAndRotatedWithoutRestart(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "gatehouse-certs")
	first, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serving"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: first.ServingCert, corev1.TLSPrivateKeyKey: first.ServingKey},
	}
	if err := controlPlane.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	g, _ := startGuard(t, module.Enforce, func(o *app.Options) {
		o.CertSecret = ns + "/serving"
		o.ManageWebhooks = &webhookconfig.Target{CABundle: first.CACert}
	})
	addr := strings.TrimPrefix(g.URL, "https://")
	if got := servedCert(t, addr); got != string(first.ServingCert) {
		t.Fatal("the Secret's certificate is not the one served")
	}

	second, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{corev1.TLSCertKey: second.ServingCert, corev1.TLSPrivateKeyKey: second.ServingKey}
	if err := controlPlane.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for servedCert(t, addr) != string(second.ServingCert) {
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate was not served within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestStartupFailsNamingTheBrokenPartOfTheSecret(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "gatehouse-certs")
	good, _ := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	cases := map[string]struct {
		data map[string][]byte
		want string
	}{
		"empty-cert": {map[string][]byte{corev1.TLSCertKey: nil, corev1.TLSPrivateKeyKey: good.ServingKey}, "certificate Secret " + ns + "/empty-cert key tls.crt is empty"},
		"empty-key":  {map[string][]byte{corev1.TLSCertKey: good.ServingCert, corev1.TLSPrivateKeyKey: []byte(" ")}, "private key Secret " + ns + "/empty-key key tls.key is empty"},
		"bad-cert":   {map[string][]byte{corev1.TLSCertKey: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), corev1.TLSPrivateKeyKey: good.ServingKey}, "certificate Secret " + ns + "/bad-cert key tls.crt is unparsable"},
		"bad-key":    {map[string][]byte{corev1.TLSCertKey: good.ServingCert, corev1.TLSPrivateKeyKey: []byte("not a key")}, "private key Secret " + ns + "/bad-key key tls.key: no PEM data found"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: tc.data}
			if err := controlPlane.Client.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
			_, err := app.New(ctx, app.Options{RestConfig: controlPlane.Config, CertSecret: ns + "/" + name, MetricsAddr: "0"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func servedCert(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return string(pemEncode(conn.ConnectionState().PeerCertificates[0].Raw))
}

func TestMetricsAreServedOnTheirOwnPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	startGuard(t, module.Enforce, func(o *app.Options) { o.MetricsAddr = addr })
	ns := namespace(t, "e2e-metrics")
	_ = controlPlane.Client.Create(context.Background(), labelled(ns, "counted", true))

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`gatehouse_webhook_requests_total{decision="denied",module="labelguard",operation="CREATE",webhook="labelguard.gatehouse.test"}`,
		`gatehouse_webhook_latency_seconds_bucket{module="labelguard",webhook="labelguard.gatehouse.test",le="10"}`,
		`gatehouse_cache_synced{cache="platform"} 1`,
		`gatehouse_certificate_expiry_timestamp_seconds`,
		`gatehouse_webhook_panics_total{module="labelguard",webhook="labelguard.gatehouse.test"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
