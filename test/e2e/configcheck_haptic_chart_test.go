package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// TestConfigcheckRunsHapticsChartConfigUnchanged: haptic's own config, as
// its chart renders it with every library haptic's CI validates
// (internal/configcheck/testdata/haptic, 70 tests and _global, Scriggo
// throughout, the ssl library's Secrets on demand), written unchanged but
// for its namespace into a cluster with haptic's CRD, judged on HAProxy
// 3.0 as haptic's users run it. It is admitted (its tests pass, the
// cluster's state renders), and its Ingress webhook judges Ingresses
// through kube-apiserver with haptic's own templates: a valid Ingress with
// TLS from its namespace's Secret is admitted, one whose Secret holds no
// certificate haproxy can load is refused with haproxy's words, and one
// whose annotation haptic's templates refuse gets their fail() text.
func TestConfigcheckRunsHapticsChartConfigUnchanged(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	haproxyRoot := filepath.Join(root, "bin/haproxy-3.0")
	if _, err := os.Stat(filepath.Join(haproxyRoot, "usr/sbin/haproxy")); err != nil {
		t.Fatalf("%v: build it with `make %s/usr/sbin/haproxy` (make test does)", err, haproxyRoot)
	}
	data, err := os.ReadFile(filepath.Join(root, "internal/configcheck/testdata/haptic/haproxytemplateconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	installHapticCRD(t)
	ctx := context.Background()

	// The chart's default certificate (extraContext: default/default-ssl-cert).
	defaultCert := tlsSecretOf(t, "default", "default-ssl-cert", "default.example")
	if err := controlPlane.Client.Create(ctx, defaultCert); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = controlPlane.Client.Delete(context.Background(), defaultCert) })

	startGatehouse(t, app.Options{
		Catalogue: []module.Module{configcheck.New(configcheck.Options{HAProxyRoot: haproxyRoot})},
		Modules:   map[string]app.ModuleConfig{"configcheck": {Enabled: true}},
	})
	cfg := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &cfg.Object); err != nil {
		t.Fatal(err)
	}
	cfg.SetNamespace(namespace(t, "haptic-chart"))
	start := time.Now()
	eventually(t, "haptic's chart config is admitted", func() error { return controlPlane.Client.Create(ctx, cfg.DeepCopy()) })
	t.Logf("admitted %.1f s after the first write", time.Since(start).Seconds())

	shop := namespace(t, "shop")
	web := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "web"}},
	}
	if err := controlPlane.Client.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	_, tenantUser := tenantClient(t, shop)
	warnings := &warningRecorder{}
	tenantConfig := rest.CopyConfig(controlPlane.Config)
	tenantConfig.Impersonate = rest.ImpersonationConfig{UserName: tenantUser, Groups: []string{"system:authenticated"}}
	tenantConfig.WarningHandler = warnings
	tenant, err := client.New(tenantConfig, client.Options{Scheme: controlPlane.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := tenant.Create(ctx, tlsSecretOf(t, shop, "shop-tls", "shop.example")); err != nil {
		t.Fatal(err)
	}
	broken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "broken-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n"), "tls.key": []byte("no key")}}
	if err := tenant.Create(ctx, broken); err != nil {
		t.Fatal(err)
	}

	eventually(t, "the config's Ingress webhook judges with haptic's templates", func() error {
		err := tenant.Create(ctx, hapticIngress(shop, "probe", "shop-tls", "abc"), client.DryRunAll)
		if err == nil {
			return fmt.Errorf("an Ingress with haproxy.org/pod-maxconn abc was admitted")
		}
		if !apierrors.IsForbidden(err) {
			return err
		}
		return nil
	})
	denied(t, tenant.Create(ctx, hapticIngress(shop, "maxconn", "shop-tls", "abc")),
		fmt.Sprintf("Invalid value 'abc' for annotation 'haproxy.org/pod-maxconn' on Ingress '%s/maxconn'. Must be a positive integer.", shop))
	err = tenant.Create(ctx, hapticIngress(shop, "broken", "broken-tls", ""))
	t.Logf("warnings: %q", warnings.msgs)
	denied(t, err, "haproxy")
	if err := tenant.Create(ctx, hapticIngress(shop, "shop", "shop-tls", "100")); err != nil {
		t.Fatalf("a valid Ingress with TLS from its namespace's Secret: %v", err)
	}
}

// hapticIngress is an Ingress of class haproxy for Service web, with TLS
// from secret and, when set, haptic's pod-maxconn annotation.
func hapticIngress(namespace, name, secret, maxconn string) *networkingv1.Ingress {
	host := name + ".shop.example"
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To("haproxy"),
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: secret}},
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}},
				}}},
			}}}},
		},
	}
	if maxconn != "" {
		ing.Annotations = map[string]string{"haproxy.org/pod-maxconn": maxconn}
	}
	return ing
}

// tlsSecretOf is a kubernetes.io/tls Secret holding a certificate for host
// and its key.
func tlsSecretOf(t *testing.T, namespace, name, host string) *corev1.Secret {
	t.Helper()
	bundle, err := certs.SelfSigned([]string{host}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": bundle.ServingCert, "tls.key": bundle.ServingKey}}
}
