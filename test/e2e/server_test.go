package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// labelGuard is a test module (a fixture, not a fake of a real part): it
// denies ConfigMaps labelled gatehouse.test/deny=true, and registers generic
// validators that deny Services and Ingresses labelled the same way.
type labelGuard struct {
	mu       sync.Mutex
	resolved []string
}

const denyLabel = "gatehouse.test/deny"

func (*labelGuard) Name() string                                   { return "labelguard" }
func (*labelGuard) AddToScheme(*runtime.Scheme) error              { return nil }
func (*labelGuard) CacheObjects() map[client.Object]cache.ByObject { return nil }

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

func (g *labelGuard) Setup(ctx context.Context, host module.Host) ([]module.Webhook, error) {
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "services"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
	} {
		key, err := host.Validators.RegisterResource(gvr, denyLabelled)
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		g.resolved = append(g.resolved, key)
		g.mu.Unlock()
	}
	return []module.Webhook{{
		Name: "labelguard.gatehouse.test", Path: "/validate-labelguard", Type: module.Validating,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		FailurePolicy: admissionregistrationv1.Fail, SideEffects: admissionregistrationv1.SideEffectClassNone,
		TimeoutSeconds: 5, Admit: denyLabelled,
	}}, nil
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

func namespace(t *testing.T, name string) string {
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
	for _, want := range []string{`admission webhook "labelguard.gatehouse.test" denied the request`, "ConfigMap e2e-enforce/guarded carries", "remove the label to proceed"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("denial %q does not contain %q", err, want)
		}
	}
}

func TestWebhooksNeverInterceptExcludedNamespaces(t *testing.T) {
	startGuard(t, module.Enforce, nil)
	ctx := context.Background()
	own := namespace(t, "gatehouse-e2e")
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
	for _, want := range []string{"labelguard (enforcement: warn) would deny this request:", "ConfigMap e2e-warn/warned carries gatehouse.test/deny=true", "remove the label to proceed"} {
		if !strings.Contains(got, want) {
			t.Fatalf("warnings %q do not contain %q", got, want)
		}
	}
}

func TestGenericValidatePathDispatchesByDiscoveredGVK(t *testing.T) {
	_, guard := startGuard(t, module.Enforce, nil)
	want := "v1.Service networking.k8s.io/v1.Ingress"
	if got := strings.Join(guard.resolved, " "); got != want {
		t.Fatalf("resolved GVKs %q, want %q", got, want)
	}
	ctx := context.Background()
	ns := namespace(t, "e2e-generic")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guarded", Labels: map[string]string{denyLabel: "true"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	err := controlPlane.Client.Create(ctx, svc)
	if err == nil || !strings.Contains(err.Error(), `"validate.gatehouse.dev" denied the request: Service e2e-generic/guarded carries`) {
		t.Fatalf("labelled Service: %v", err)
	}
	svc.Name, svc.Labels = "plain", nil
	if err := controlPlane.Client.Create(ctx, svc); err != nil {
		t.Fatalf("plain Service refused: %v", err)
	}
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
		"empty-cert": {map[string][]byte{corev1.TLSCertKey: nil, corev1.TLSPrivateKeyKey: good.ServingKey}, "certificate Secret gatehouse-certs/empty-cert key tls.crt is empty"},
		"empty-key":  {map[string][]byte{corev1.TLSCertKey: good.ServingCert, corev1.TLSPrivateKeyKey: []byte(" ")}, "private key Secret gatehouse-certs/empty-key key tls.key is empty"},
		"bad-cert":   {map[string][]byte{corev1.TLSCertKey: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), corev1.TLSPrivateKeyKey: good.ServingKey}, "certificate Secret gatehouse-certs/bad-cert key tls.crt is unparsable"},
		"bad-key":    {map[string][]byte{corev1.TLSCertKey: good.ServingCert, corev1.TLSPrivateKeyKey: []byte("not a key")}, "private key Secret gatehouse-certs/bad-key key tls.key: no PEM data found"},
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
		`gatehouse_cache_synced{cache="informer-cache"} 1`,
		`gatehouse_certificate_expiry_timestamp_seconds`,
		`gatehouse_webhook_panics_total{module="labelguard",webhook="labelguard.gatehouse.test"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
