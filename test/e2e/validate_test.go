package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// admissionReview is the AdmissionReview of object (and old) in namespace
// default for a caller posting straight to the port.
func admissionReview(t *testing.T, uid string, kind metav1.GroupVersionKind, resource string, op admissionv1.Operation, object, old map[string]any) []byte {
	t.Helper()
	meta, _ := object["metadata"].(map[string]any)
	if meta == nil {
		meta, _ = old["metadata"].(map[string]any)
	}
	namespace, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	req := &admissionv1.AdmissionRequest{
		UID: types.UID(uid), Kind: kind,
		Resource:  metav1.GroupVersionResource{Group: kind.Group, Version: kind.Version, Resource: resource},
		Namespace: namespace, Name: name, Operation: op,
		UserInfo: authenticationv1.UserInfo{Username: "someone"},
	}
	for raw, v := range map[*runtime.RawExtension]map[string]any{&req.Object: object, &req.OldObject: old} {
		if v != nil {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			raw.Raw = b
		}
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// noRedirects is c following no redirect: a 307 is an answer to see, not a
// step to take.
func noRedirects(c *http.Client) *http.Client {
	out := *c
	out.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &out
}

func send(t *testing.T, c *http.Client, method, url string, body []byte) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

// TestValidateHoldsTheSeedsServerContract checks every statement of the
// dry-run spec's server section at its endpoint, /validate, through a
// Gatehouse serving its certificate from a Secret. Since the platform
// rework /validate answered 307 to /validate/ whatever was sent, and the
// load generator's "server path" measured a redirect round trip unseen.
// Statements tested elsewhere: 10 s read and write timeouts
// (internal/server TestSlowClientIsCutOffByTheReadTimeout), startup failing
// on an empty certificate or key (TestStartupFailsNamingTheBrokenPartOfTheSecret),
// 30 s graceful shutdown (graceful_test.go), port 9443 by default
// (TestCLI, the flag's default in --help).
func TestValidateHoldsTheSeedsServerContract(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "gatehouse-validate")
	pair, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "serving"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: pair.ServingCert, corev1.TLSPrivateKeyKey: pair.ServingKey},
	}
	if err := controlPlane.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// labelguard judges ConfigMaps at a path of its own; /validate is not
	// that validator's.
	g, _ := startGuard(t, module.Enforce, func(o *app.Options) {
		o.CertSecret = ns + "/serving"
		o.ManageWebhooks = &webhookconfig.Target{CABundle: pair.CACert}
	})
	validate := g.URL + server.ValidatePath
	apiServer := noRedirects(g.HTTPClient)

	t.Run("HTTPS with the certificate from the Secret", func(t *testing.T) {
		if got := servedCert(t, strings.TrimPrefix(g.URL, "https://")); got != string(pair.ServingCert) {
			t.Fatal("the certificate served is not the Secret's")
		}
	})

	t.Run("/healthz answers 200 ok, to a caller without a client certificate too", func(t *testing.T) {
		anonymous := noRedirects(&http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: g.TLSConfig}})
		for _, c := range []*http.Client{apiServer, anonymous} {
			resp, body := send(t, c, http.MethodGet, g.URL+"/healthz", nil)
			if resp.StatusCode != http.StatusOK || body != "ok" {
				t.Fatalf("GET /healthz: %d %q, want 200 \"ok\"", resp.StatusCode, body)
			}
		}
	})

	t.Run("a method other than POST gets 405", func(t *testing.T) {
		for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			resp, body := send(t, apiServer, method, validate, nil)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("%s /validate: %d (Allow %q) %q, want 405 with Allow: POST", method, resp.StatusCode, resp.Header.Get("Allow"), body)
			}
			if method != http.MethodHead && !strings.Contains(body, "method "+method+" is not allowed: webhooks accept POST") {
				t.Errorf("%s /validate: the answer %q does not say why", method, body)
			}
		}
	})

	t.Run("a malformed review gets 400 with the cause", func(t *testing.T) {
		for _, tc := range []struct{ body, want string }{
			{``, "malformed AdmissionReview: request body is empty"},
			{`{"apiVersion":`, "malformed AdmissionReview: invalid JSON"},
			{`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "malformed AdmissionReview: the review has no request"},
			{`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`, "malformed AdmissionReview: request.uid is empty"},
			{`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"1"}}`, `expected apiVersion "admission.k8s.io/v1" and kind "AdmissionReview", got "admission.k8s.io/v1beta1" and "AdmissionReview"`},
		} {
			resp, body := send(t, apiServer, http.MethodPost, validate, []byte(tc.body))
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, tc.want) {
				t.Errorf("POST %q: %d %q, want 400 containing %q", tc.body, resp.StatusCode, body, tc.want)
			}
		}
	})

	t.Run("an oversize review gets 413 with the limit", func(t *testing.T) {
		big := bytes.Repeat([]byte(" "), 3<<20+1)
		resp, body := send(t, apiServer, http.MethodPost, validate, big)
		want := fmt.Sprintf("request body of %d bytes exceeds the limit of %d bytes", len(big), 3<<20)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || body != want {
			t.Fatalf("%d %q, want 413 %q", resp.StatusCode, body, want)
		}
	})

	t.Run("a caller without the API server's client certificate gets 401", func(t *testing.T) {
		anonymous := noRedirects(&http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: g.TLSConfig}})
		configMap := metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
		resp, body := send(t, anonymous, http.MethodPost, validate, admissionReview(t, "anon", configMap, "configmaps", admissionv1.Create, map[string]any{"metadata": map[string]any{"name": "x", "namespace": "default"}}, nil))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%d %q, want 401", resp.StatusCode, body)
		}
	})

	t.Run("a kind without a validator is allowed, echoing the UID", func(t *testing.T) {
		denied := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "default", "labels": map[string]any{denyLabel: "true"}}}
		widget := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "x"}}
		for _, tc := range []struct {
			kind        metav1.GroupVersionKind
			resource    string
			op          admissionv1.Operation
			object, old map[string]any
		}{
			{metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", admissionv1.Create, denied, nil},
			{metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", admissionv1.Update, denied, denied},
			{metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "widgets", admissionv1.Create, widget, nil},
			{metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "widgets", admissionv1.Delete, nil, widget},
		} {
			uid := "validate-" + randSuffix()
			resp, body := send(t, apiServer, http.MethodPost, validate, admissionReview(t, uid, tc.kind, tc.resource, tc.op, tc.object, tc.old))
			var out admissionv1.AdmissionReview
			if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil || out.Response == nil {
				t.Fatalf("%s %s: %d %q, want 200 and an AdmissionReview", tc.op, tc.kind.Kind, resp.StatusCode, body)
			}
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || !out.Response.Allowed || string(out.Response.UID) != uid {
				t.Errorf("%s %s: %s, want an allowed admission.k8s.io/v1 AdmissionReview with uid %s", tc.op, tc.kind.Kind, body, uid)
			}
		}
	})
}

// TestReviewOfAnotherKindOnAWatchedPathIsNotJudgedAsIt: a config's Services
// webhook judges Services. A ConfigMap posted to its path used to be read as
// the Service of the same name: its DELETE was refused for the Ingress that
// needs the Service ("Service 'api' not found"). A kind the path does not
// judge is allowed, as the spec allows a kind without a validator, and
// counted.
func TestReviewOfAnotherKindOnAWatchedPathIsNotJudgedAsIt(t *testing.T) {
	e := startConfigcheck(t)
	ctx := context.Background()
	e.service("api")
	eventually(t, "the Ingress to api is admitted", func() error {
		return e.c.Create(ctx, e.ingress("web", "haproxy", "a.example", "api", 80))
	})
	path := module.RuntimePath("configcheck") + url.PathEscape(e.cfgKey.Namespace) + "/" + url.PathEscape(e.cfgKey.Name) + "/services"
	apiServer := noRedirects(e.g.HTTPClient)
	post := func(kind metav1.GroupVersionKind, resource string) *admissionv1.AdmissionResponse {
		t.Helper()
		old := map[string]any{"apiVersion": "v1", "kind": kind.Kind, "metadata": map[string]any{"name": "api", "namespace": e.app}}
		body := admissionReview(t, "kind-"+randSuffix(), kind, resource, admissionv1.Delete, nil, old)
		resp, answer := send(t, apiServer, http.MethodPost, e.g.URL+path, body)
		var out admissionv1.AdmissionReview
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(answer), &out) != nil || out.Response == nil {
			t.Fatalf("%d %q, want 200 and an AdmissionReview", resp.StatusCode, answer)
		}
		return out.Response
	}

	// The path judges what it serves: deleting the Service is refused, once
	// Gatehouse's cache holds the Ingress the API server has just admitted
	// (until then the deletion breaks nothing Gatehouse knows of).
	eventually(t, "DELETE of Service api on the Services path is denied", func() error {
		service := post(metav1.GroupVersionKind{Version: "v1", Kind: "Service"}, "services")
		if service.Allowed || service.Result == nil || !strings.Contains(service.Result.Message, "Service 'api' not found") {
			return fmt.Errorf("%+v, want the denial", service)
		}
		return nil
	})
	before := counterWithLabel("gatehouse_webhook_foreign_kind_total", "module", "configcheck")
	configMap := post(metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps")
	if !configMap.Allowed {
		t.Fatalf("DELETE of ConfigMap api on the Services path was judged as the Service: %s", configMap.Result.Message)
	}
	if after := counterWithLabel("gatehouse_webhook_foreign_kind_total", "module", "configcheck"); after != before+1 {
		t.Fatalf("gatehouse_webhook_foreign_kind_total{module=configcheck} went from %v to %v, want one more", before, after)
	}
}
