package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

func TestRuntimeWebhooksAreServedReplacedAndWithdrawn(t *testing.T) {
	var srv *server.Server
	h := start(t, nil, func(s *server.Server) { srv = s })
	path := module.RuntimePath("cfg") + "one"
	if err := srv.SetRuntimeWebhooks("cfg", []module.Webhook{validating("one.test", path, denyAll)}, module.Warn); err != nil {
		t.Fatal(err)
	}
	_, body := h.post(t, path, review("u1", admissionv1.Create))
	if resp := decodeResponse(t, body); !resp.Allowed || len(resp.Warnings) == 0 || resp.Warnings[0] != "cfg (enforcement: warn) would deny this request:" {
		t.Fatalf("the module's enforcement was not applied: %+v", resp)
	}

	// Replacing the set withdraws what is not in it; a withdrawn path
	// answers "allowed", echoing the UID.
	other := module.RuntimePath("cfg") + "two"
	if err := srv.SetRuntimeWebhooks("cfg", []module.Webhook{validating("two.test", other, denyAll)}, module.Enforce); err != nil {
		t.Fatal(err)
	}
	_, body = h.post(t, path, review("u2", admissionv1.Create))
	if resp := decodeResponse(t, body); !resp.Allowed || resp.UID != "u2" {
		t.Fatalf("withdrawn path: %+v", resp)
	}
	_, body = h.post(t, other, review("u3", admissionv1.Create))
	if resp := decodeResponse(t, body); resp.Allowed {
		t.Fatalf("the replacement is not served: %+v", resp)
	}

	// Another module's set is untouched by this module's.
	foreign := module.RuntimePath("other") + "x"
	if err := srv.SetRuntimeWebhooks("other", []module.Webhook{validating("x.test", foreign, denyAll)}, module.Enforce); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetRuntimeWebhooks("cfg", nil, module.Enforce); err != nil {
		t.Fatal(err)
	}
	_, body = h.post(t, foreign, review("u4", admissionv1.Create))
	if resp := decodeResponse(t, body); resp.Allowed {
		t.Fatalf("withdrawing cfg's webhooks withdrew another module's: %+v", resp)
	}
}

func TestRuntimeWebhooksStayUnderTheModulesPrefix(t *testing.T) {
	var srv *server.Server
	start(t, nil, func(s *server.Server) { srv = s })
	for _, path := range []string{"/validate-cfg", module.RuntimePath("other") + "x", module.RuntimePath("cfg")} {
		if err := srv.SetRuntimeWebhooks("cfg", []module.Webhook{validating("bad.test", path, denyAll)}, module.Enforce); err == nil {
			t.Errorf("path %s accepted for module cfg", path)
		}
	}
	twice := module.RuntimePath("cfg") + "a"
	if err := srv.SetRuntimeWebhooks("cfg", []module.Webhook{validating("a.test", twice, denyAll), validating("b.test", twice, denyAll)}, module.Enforce); err == nil {
		t.Error("one path for two webhooks accepted")
	}
}

func TestTheRequestLoggerIsInTheContext(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	sink := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	h := start(t, func(o *server.Options) { o.Log = sink }, func(s *server.Server) {
		s.Admission("test", validating("log.test", "/log", func(ctx context.Context, req admission.Request) admission.Response {
			logf.FromContext(ctx).Info("module says hello")
			return admission.Allowed("")
		}), module.Enforce)
	})
	h.post(t, "/log", review("u-log", admissionv1.Create))
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		if strings.Contains(l, "module says hello") {
			for _, want := range []string{`"webhook"="log.test"`, `"module"="test"`, `"uid"="u-log"`} {
				if !strings.Contains(l, want) {
					t.Fatalf("the module's line %s lacks %s", l, want)
				}
			}
			return
		}
	}
	t.Fatalf("the module's line was not logged through the request logger: %q", lines)
}

// TestValidateServesTheSeedsContract: the dry-run spec's endpoint is
// /validate itself. The mux's subtree pattern for the run-time webhooks,
// /validate/, answered every request to /validate with a 307 to
// /validate/, whatever its method or body.
func TestValidateServesTheSeedsContract(t *testing.T) {
	h := start(t, func(o *server.Options) { o.MaxRequestBytes = 4096 }, func(*server.Server) {})
	// A redirect is an answer here, not a step to follow.
	h.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(method, h.url+server.ValidatePath, nil)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s /validate: %d (Allow %q) %s, want 405 with Allow: POST", method, resp.StatusCode, resp.Header.Get("Allow"), body)
		}
	}
	if code, body := h.post(t, server.ValidatePath, []byte(`{"apiVersion":`)); code != http.StatusBadRequest || !strings.Contains(string(body), "malformed AdmissionReview: invalid JSON") {
		t.Errorf("malformed review: %d %s, want 400 with the cause", code, body)
	}
	if code, body := h.post(t, server.ValidatePath, bytes.Repeat([]byte(" "), 5000)); code != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "exceeds the limit of 4096 bytes") {
		t.Errorf("oversize review: %d %s, want 413 with the limit", code, body)
	}
	code, body := h.post(t, server.ValidatePath, review("u-validate", admissionv1.Create))
	if code != http.StatusOK {
		t.Fatalf("review: %d %s", code, body)
	}
	if resp := decodeResponse(t, body); !resp.Allowed || resp.UID != "u-validate" {
		t.Fatalf("a kind without a validator: %+v, want allowed with the UID", resp)
	}
}

// TestReviewOfAnotherKindIsNotJudgedAsThePathsKind: a webhook declaring
// its kinds judges those only. Before, a ConfigMap posted to a Services
// path was read as a Service and refused.
func TestReviewOfAnotherKindIsNotJudgedAsThePathsKind(t *testing.T) {
	var srv *server.Server
	h := start(t, nil, func(s *server.Server) { srv = s })
	path := module.RuntimePath("kinds") + "services"
	hook := validating("services.test", path, denyAll)
	hook.Kinds = []schema.GroupVersionKind{{Version: "v1", Kind: "Service"}}
	if err := srv.SetRuntimeWebhooks("kinds", []module.Webhook{hook}, module.Enforce); err != nil {
		t.Fatal(err)
	}
	foreign := func() float64 { return testutil.ToFloat64(metrics.ForeignKinds.WithLabelValues("kinds")) }
	before := foreign()
	_, body := h.post(t, path, review("u-cm", admissionv1.Create)) // a ConfigMap
	if resp := decodeResponse(t, body); !resp.Allowed || resp.UID != "u-cm" {
		t.Fatalf("a ConfigMap on the Services path: %+v, want allowed", resp)
	}
	if after := foreign(); after != before+1 {
		t.Fatalf("gatehouse_webhook_foreign_kind_total went from %v to %v", before, after)
	}
	service := bytes.Replace(bytes.Replace(review("u-svc", admissionv1.Create), []byte(`"ConfigMap"`), []byte(`"Service"`), -1), []byte(`"configmaps"`), []byte(`"services"`), 1)
	_, body = h.post(t, path, service)
	if resp := decodeResponse(t, body); resp.Allowed {
		t.Fatalf("the path's own kind was not judged: %+v", resp)
	}
	if after := foreign(); after != before+1 {
		t.Fatalf("the path's own kind was counted as foreign")
	}
}
