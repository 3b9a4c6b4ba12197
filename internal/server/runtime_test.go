package server_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admission/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

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
