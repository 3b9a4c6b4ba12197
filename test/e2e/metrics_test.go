package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// serviceAccountToken creates a ServiceAccount in ns and returns a token the
// API server issued for it.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if err := controlPlane.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(controlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// TestProtectedMetricsServeOnlyAuthorizedReaders: with --metrics-secure a
// scrape without a token, or with the token of an identity not granted get
// on /metrics, is refused; a token of a metrics reader (the chart's
// metrics-reader ClusterRole) is served, each decided by the real
// kube-apiserver's TokenReview and SubjectAccessReview.
func TestProtectedMetricsServeOnlyAuthorizedReaders(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	g, _ := startGuard(t, module.Enforce, func(o *app.Options) {
		o.MetricsAddr = addr
		o.MetricsSecure = true
	})
	ctx := context.Background()
	ns := namespace(t, "e2e-metrics-secure")
	reader := serviceAccountToken(t, ns, "prometheus")
	stranger := serviceAccountToken(t, ns, "stranger")
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "gatehouse-e2e-metrics-reader-" + ns},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}},
	}
	if err := controlPlane.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = controlPlane.Client.Delete(context.Background(), role) })
	if err := controlPlane.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = controlPlane.Client.Delete(context.Background(), binding) })

	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: g.TLSConfig}}
	scrape := func(token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	if code, body := scrape(""); code != http.StatusUnauthorized || strings.Contains(body, "gatehouse_") {
		t.Errorf("anonymous scrape: %d %.200q, want 401 without metrics", code, body)
	}
	// controller-runtime's filter answers a token the TokenReview rejects
	// with an error as 500 "Authentication failed".
	if code, body := scrape("not-a-token"); code == http.StatusOK || strings.Contains(body, "gatehouse_") {
		t.Errorf("scrape with a forged token: %d %.200q, want refused without metrics", code, body)
	}
	if code, body := scrape(stranger); code != http.StatusForbidden || strings.Contains(body, "gatehouse_") {
		t.Errorf("scrape by an identity without get /metrics: %d %.200q, want 403 without metrics", code, body)
	}
	// The API server's RBAC authorizer sees the new binding through its
	// informer, so the first scrapes may still be refused.
	settle(t, "a metrics reader's scrape served", func(context.Context) error {
		code, body := scrape(reader)
		if code != http.StatusOK || !strings.Contains(body, "gatehouse_webhook_panics_total") {
			return fmt.Errorf("%d %.300q, want 200 with Gatehouse's metrics", code, body)
		}
		return nil
	})
	// Plain HTTP is not served at all.
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("protected metrics were served over plain HTTP")
		}
	}
}
