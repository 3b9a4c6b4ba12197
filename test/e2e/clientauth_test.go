package e2e

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
)

// namespaceDeleteReview is the review an attacker on the pod network posts
// to learn another tenant's claims and volumes from pvsafe's denial.
func namespaceDeleteReview(t *testing.T, ns string) []byte {
	t.Helper()
	old, err := json.Marshal(&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("direct-" + randSuffix()),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"},
			Name:      ns,
			Operation: admissionv1.Delete,
			OldObject: runtime.RawExtension{Raw: old},
			UserInfo:  authenticationv1.UserInfo{Username: "nobody"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func postWithTLS(t *testing.T, config *tls.Config, url string, body []byte) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: config}}
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestWebhookPortServesOnlyTheAPIServer plays the network neighbour of the
// review: with no Kubernetes identity it posts a Namespace DELETE review of
// another tenant's namespace straight to pvsafe's port. Before, the answer
// listed that namespace's claims and volumes. With --client-ca-file (the
// harness gives kube-apiserver a client certificate through its
// AdmissionConfiguration) it is refused without a certificate and with a
// certificate from a CA of its own, while the API server is still served:
// the same deletion through the API is denied by pvsafe.
func TestWebhookPortServesOnlyTheAPIServer(t *testing.T) {
	g := startPVSafe(t, module.Enforce)
	ns := namespace(t, "victim")
	_, pv := volumeFixture(t, ns, "ledger", corev1.PersistentVolumeReclaimDelete)
	review := namespaceDeleteReview(t, ns)
	url := g.URL + pvsafe.WebhookPath

	stranger, err := certs.SelfSignedClient("kube-apiserver-webhook-client", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(stranger.ClientCert, stranger.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	strangerTLS := g.TLSConfig.Clone()
	strangerTLS.Certificates = []tls.Certificate{pair}

	for _, tc := range []struct {
		name   string
		config *tls.Config
		code   int
		says   string
	}{
		{"no certificate", g.TLSConfig, http.StatusUnauthorized, "a client certificate is required"},
		{"certificate from another CA", strangerTLS, http.StatusForbidden, "is not trusted"},
	} {
		code, body := postWithTLS(t, tc.config, url, review)
		if code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s: got %d %q, want %d saying %q", tc.name, code, body, tc.code, tc.says)
		}
		for _, secret := range []string{"ledger", pv.Name} {
			if strings.Contains(body, secret) {
				t.Errorf("%s: the answer names %q, which the caller did not send: %s", tc.name, secret, body)
			}
		}
	}

	// Probes stay open: kubelet presents no certificate.
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: g.TLSConfig}}).Get(g.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz without a certificate: %d, want 200", resp.StatusCode)
	}

	// The API server presents the harness's client certificate and is served.
	mustDeny(t, deleteErr(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}),
		"Namespace '"+ns+"' would lose data permanently.",
		"  - ledger: volume "+pv.Name+" has reclaimPolicy Delete")
}
