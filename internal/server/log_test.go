package server_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

func TestEachDecisionIsLoggedWithoutTheObject(t *testing.T) {
	var (
		mu    sync.Mutex
		lines []string
	)
	sink := funcr.NewJSON(func(obj string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, obj)
	}, funcr.Options{})
	h := start(t, func(o *server.Options) { o.Log = sink }, func(s *server.Server) {
		s.Admission("test", validating("deny.test", "/deny", denyAll), module.Enforce)
	})
	body := review("uid-log", admissionv1.Create)
	if code, _ := h.post(t, "/deny", body); code != 200 {
		t.Fatalf("status %d", code)
	}
	mu.Lock()
	defer mu.Unlock()
	var decision string
	for _, l := range lines {
		if strings.Contains(l, `"msg":"admission decision"`) {
			decision = l
		}
	}
	for _, want := range []string{`"uid":"uid-log"`, `"operation":"CREATE"`, `"kind":"v1.ConfigMap"`, `"namespace":"default"`,
		`"name":"cm"`, `"decision":"denied"`, `"reason":"line one of the reason\nline two: how to proceed"`, `"webhook":"deny.test"`, `"module":"test"`} {
		if !strings.Contains(decision, want) {
			t.Errorf("decision line lacks %s: %s", want, decision)
		}
	}
	if strings.Contains(decision, `"apiVersion":"v1","kind":"ConfigMap"`) || strings.Contains(decision, "metadata") {
		t.Errorf("the decision line carries the object: %s", decision)
	}
}
