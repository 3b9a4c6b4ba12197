package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

func clientWith(t *testing.T, h *harness, b *certs.ClientBundle) *http.Client {
	t.Helper()
	base := h.client.Transport.(*http.Transport).TLSClientConfig.Clone()
	if b != nil {
		pair, err := tls.X509KeyPair(b.ClientCert, b.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		base.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: base}}
}

func postWith(t *testing.T, c *http.Client, url string, body []byte) (int, string) {
	t.Helper()
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// An attacker on the pod network, with no certificate or one from a CA of
// its own, is refused before its review is read; the API server's
// certificate is served; probes and conversions need none.
func TestClientAuthRefusesCallersWithoutTheAPIServersCertificate(t *testing.T) {
	cas, apiServer := clientCA(t)
	stranger, err := certs.SelfSignedClient("kube-apiserver-webhook-client", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var decided, converted atomic.Int32
	h := start(t, func(o *server.Options) {
		o.ClientAuth = &server.ClientAuthOptions{CAs: cas}
	}, func(s *server.Server) {
		s.Admission("test", validating("v.test", "/v", func(context.Context, admission.Request) admission.Response {
			decided.Add(1)
			return admission.Allowed("")
		}), module.Enforce)
		s.Conversion("test", module.Webhook{Name: "c.test", Path: "/convert", Type: module.Conversion, CRDs: []string{"x"},
			Convert: func(_ context.Context, req *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error) {
				converted.Add(1)
				return req.Objects, nil
			}})
	})
	refused := func(code string) float64 {
		return testutil.ToFloat64(metrics.BadRequests.WithLabelValues("/v", code))
	}
	before401, before403 := refused("401"), refused("403")

	code, body := postWith(t, clientWith(t, h, nil), h.url+"/v", review("anon", "CREATE"))
	if code != http.StatusUnauthorized || !strings.Contains(body, "a client certificate is required") {
		t.Errorf("no certificate: got %d %q, want 401 naming the requirement", code, body)
	}
	code, body = postWith(t, clientWith(t, h, stranger), h.url+"/v", review("stranger", "CREATE"))
	if code != http.StatusForbidden || !strings.Contains(body, "is not trusted") {
		t.Errorf("certificate of another CA: got %d %q, want 403", code, body)
	}
	// Refused before the method or the body is looked at.
	resp, err := clientWith(t, h, nil).Get(h.url + "/v")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET without certificate: got %d, want 401 (not 405)", resp.StatusCode)
	}
	if decided.Load() != 0 {
		t.Errorf("the handler decided %d unauthenticated reviews", decided.Load())
	}
	if got := refused("401") - before401; got != 2 {
		t.Errorf("401 refusals counted: %v, want 2", got)
	}
	if got := refused("403") - before403; got != 1 {
		t.Errorf("403 refusals counted: %v, want 1", got)
	}

	code, body = postWith(t, clientWith(t, h, apiServer), h.url+"/v", review("apiserver", "CREATE"))
	if code != http.StatusOK || decided.Load() != 1 {
		t.Errorf("the API server's certificate: got %d %q (decided %d), want served", code, body, decided.Load())
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := clientWith(t, h, nil).Get(h.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s without certificate: got %d, want 200 (kubelet probes present none)", path, resp.StatusCode)
		}
	}
	conversion, _ := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{UID: "c1", DesiredAPIVersion: "good/v1",
			Objects: []runtime.RawExtension{{Raw: []byte(`{"a":1}`)}}},
	})
	code, body = postWith(t, clientWith(t, h, nil), h.url+"/convert", conversion)
	if code != http.StatusOK || converted.Load() != 1 {
		t.Errorf("conversion without certificate: got %d %q, want served (kube-apiserver presents none to conversion webhooks)", code, body)
	}
}

func TestClientAuthAllowedNames(t *testing.T) {
	cas, apiServer := clientCA(t)
	h := start(t, func(o *server.Options) {
		o.ClientAuth = &server.ClientAuthOptions{CAs: cas, AllowedNames: []string{"some-other-client"}}
	}, func(s *server.Server) {
		s.Admission("test", validating("v.test", "/v", func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("")
		}), module.Enforce)
	})
	code, body := postWith(t, clientWith(t, h, apiServer), h.url+"/v", review("named", "CREATE"))
	if code != http.StatusForbidden || !strings.Contains(body, "not among the allowed client names") {
		t.Errorf("trusted certificate with a name not allowed: got %d %q, want 403", code, body)
	}
}

// swappableCAs is a ClientCAs whose pool the test replaces, as a reload of
// the CA file does.
type swappableCAs struct{ pool atomic.Pointer[x509.CertPool] }

func (s *swappableCAs) Pool() *x509.CertPool            { return s.pool.Load() }
func (s *swappableCAs) Start(ctx context.Context) error { <-ctx.Done(); return nil }

func poolOf(t *testing.T, pemCA []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemCA) {
		t.Fatal("bad CA")
	}
	return p
}

// A connection verified once is verified again when the CAs are reloaded:
// removing a CA cuts off its clients' kept-alive connections too.
func TestClientAuthFollowsAReloadedCAOnAKeptConnection(t *testing.T) {
	old, err := certs.SelfSignedClient("kube-apiserver", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	replacement, err := certs.SelfSignedClient("kube-apiserver", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cas := &swappableCAs{}
	cas.pool.Store(poolOf(t, old.CACert))
	h := start(t, func(o *server.Options) { o.ClientAuth = &server.ClientAuthOptions{CAs: cas} }, func(s *server.Server) {
		s.Admission("test", validating("v.test", "/v", func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("")
		}), module.Enforce)
	})
	c := clientWith(t, h, old)
	if code, body := postWith(t, c, h.url+"/v", review("1", "CREATE")); code != http.StatusOK {
		t.Fatalf("before the reload: %d %s", code, body)
	}
	cas.pool.Store(poolOf(t, replacement.CACert))
	if code, body := postWith(t, c, h.url+"/v", review("2", "CREATE")); code != http.StatusForbidden {
		t.Fatalf("after the CA was replaced, the old client on its kept connection got %d %s, want 403", code, body)
	}
	if code, body := postWith(t, clientWith(t, h, replacement), h.url+"/v", review("3", "CREATE")); code != http.StatusOK {
		t.Fatalf("the new CA's client: %d %s", code, body)
	}
}

// An allowed answer carries the UID and allowed only: the reason a module
// gives (from its caches) is logged, never answered.
func TestAllowedAnswerCarriesNoStatus(t *testing.T) {
	h := start(t, nil, func(s *server.Server) {
		s.Admission("test", validating("v.test", "/v", func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("namespace x holds 3 claims, none at risk")
		}), module.Enforce)
	})
	code, body := h.post(t, "/v", review("u1", "CREATE"))
	var out struct {
		Response map[string]json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(body, &out); err != nil || code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	for field := range out.Response {
		if field != "uid" && field != "allowed" {
			t.Errorf("allowed answer carries %q: %s", field, body)
		}
	}
}
