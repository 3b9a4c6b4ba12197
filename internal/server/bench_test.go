package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// BenchmarkAdmissionPath measures the server's own cost per request (guard,
// decode, decision log, metrics, encode) around a trivial decision, against
// the floor of a handler that only reads the body and writes fixed bytes.
func BenchmarkAdmissionPath(b *testing.B) {
	bundle, _ := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	dir := b.TempDir()
	_ = bundle.WriteDir(dir)
	src, err := certs.NewDir(dir, zap.New(zap.WriteTo(io.Discard)))
	if err != nil {
		b.Fatal(err)
	}
	srv, _ := server.New(server.Options{Certificates: src, Log: zap.New(zap.WriteTo(io.Discard), zap.UseDevMode(false))})
	srv.Admission("bench", validating("allow.bench", "/allow", func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	}), module.Enforce)
	floor := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x","allowed":true}}`))
	})
	body := review("bench-uid", admissionv1.Create)
	for _, tc := range []struct {
		name    string
		handler http.Handler
		path    string
	}{{"floor", floor, "/allow"}, {"gatehouse", srv.WebhookMux(), "/allow"}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, tc.path, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				tc.handler.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("status %d", rec.Code)
				}
			}
		})
	}
}
