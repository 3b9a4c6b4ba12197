package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// Native fuzz targets for what a broken or hostile client controls: the
// request body of every webhook. Run one with
//
//	go test ./internal/server -run '^$' -fuzz '^FuzzAdmissionHandler$' -fuzztime 30s
//
// or all of them with make fuzz.

const fuzzMaxRequestBytes = 4096

// conversionReview is a well-formed ConversionReview for the seeds.
func conversionReview(uid, desired string, objects ...string) []byte {
	r := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: types.UID(uid), DesiredAPIVersion: desired},
	}
	for _, o := range objects {
		r.Request.Objects = append(r.Request.Objects, runtime.RawExtension{Raw: []byte(o)})
	}
	b, _ := json.Marshal(r)
	return b
}

// reviewSeeds are bodies of both review kinds, well-formed and not.
func reviewSeeds() [][]byte {
	seeds := [][]byte{
		review("uid-1", admissionv1.Create),
		review("uid-2", admissionv1.Delete),
		conversionReview("c1", "deckhouse.io/v1", `{"apiVersion":"deckhouse.io/v1alpha2","kind":"NodeGroup","metadata":{"name":"w"}}`),
		conversionReview("c2", "v1"),
		nil,
		[]byte(`{`),
		[]byte(`null`),
		[]byte(`[]`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","object":null,"oldObject":{"a":1}}}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"UPDATE","object":"x","dryRun":true,"options":[1]}}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"apps","version":"v1","kind":"StatefulSet"},"userInfo":{"username":"u","extra":{"a":["b"]}}}}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"1"}}`),
		[]byte(`{"APIVERSION":"admission.k8s.io/v1","Kind":"AdmissionReview","Request":{"UID":"1"}}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1"},"request":{"uid":""}}`),
		[]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1"}}`),
		[]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1","desiredAPIVersion":"v","objects":[null,1,"x",{}]}}`),
		[]byte("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"\xff\xfe\"}}"),
	}
	return seeds
}

// FuzzDecodeAdmissionReview: decodeAdmissionReview never panics, and a body
// it accepts is an admission.k8s.io/v1 AdmissionReview with a request that
// has a UID (the handler dereferences the request and echoes the UID), and
// encodes again and decodes to the same UID.
func FuzzDecodeAdmissionReview(f *testing.F) {
	for _, s := range reviewSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r admissionv1.AdmissionReview
		if err := server.DecodeAdmissionReview(body, &r); err != nil {
			return
		}
		if r.APIVersion != "admission.k8s.io/v1" || r.Kind != "AdmissionReview" {
			t.Fatalf("accepted %q %q", r.APIVersion, r.Kind)
		}
		if r.Request == nil || r.Request.UID == "" {
			t.Fatalf("accepted a review without a request UID: %q", body)
		}
		again, err := json.Marshal(&r)
		if err != nil {
			t.Fatalf("an accepted review does not encode: %v", err)
		}
		var back admissionv1.AdmissionReview
		if err := server.DecodeAdmissionReview(again, &back); err != nil {
			t.Fatalf("an accepted review, encoded again, is refused: %v\n%s", err, again)
		}
		if back.Request.UID != r.Request.UID {
			t.Fatalf("UID %q came back as %q", r.Request.UID, back.Request.UID)
		}
	})
}

// FuzzDecodeConversionReview: decodeConversionReview never panics, and a
// body it accepts is an apiextensions.k8s.io/v1 ConversionReview with a
// request that has a UID and a desiredAPIVersion.
func FuzzDecodeConversionReview(f *testing.F) {
	for _, s := range reviewSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r apiextensionsv1.ConversionReview
		if err := server.DecodeConversionReview(body, &r); err != nil {
			return
		}
		if r.APIVersion != "apiextensions.k8s.io/v1" || r.Kind != "ConversionReview" {
			t.Fatalf("accepted %q %q", r.APIVersion, r.Kind)
		}
		if r.Request == nil || r.Request.UID == "" || r.Request.DesiredAPIVersion == "" {
			t.Fatalf("accepted a review without a request UID or desiredAPIVersion: %q", body)
		}
		if _, err := json.Marshal(&r); err != nil {
			t.Fatalf("an accepted review does not encode: %v", err)
		}
	})
}

// fuzzRoute is one path of the fuzzed server and the hook behind it.
type fuzzRoute struct {
	path, hook string
	conversion bool
}

var fuzzRoutes = []fuzzRoute{
	{"/deny", "deny.fuzz", false},
	{"/warn", "warn.fuzz", false},
	{"/patch", "patch.fuzz", false},
	{"/convert", "convert.fuzz", true},
	{module.RuntimePath("fuzz") + "deny", "runtime.fuzz", false},
	{module.RuntimePath("gone") + "x", "removed.gatehouse.dev", false},
}

// patchObject reads the object as modules do and answers with a patch that
// adds one field, so that the server completes a patch over the client's
// bytes.
func patchObject(_ context.Context, req admission.Request) admission.Response {
	if len(req.Object.Raw) == 0 {
		return admission.Allowed("no object")
	}
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil || obj == nil {
		return admission.Errored(http.StatusBadRequest, io.ErrUnexpectedEOF)
	}
	obj["fuzzed"] = true
	modified, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, modified)
}

// fuzzServer builds a Server as the tests' start does, but serves it
// through httptest only: no listener, no TLS, one server for every input.
func fuzzServer(f *testing.F) http.Handler {
	bundle, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	if err := bundle.WriteDir(dir); err != nil {
		f.Fatal(err)
	}
	src, err := certs.NewDir(dir, logr.Discard())
	if err != nil {
		f.Fatal(err)
	}
	srv, err := server.New(server.Options{Certificates: src, MaxRequestBytes: fuzzMaxRequestBytes, Log: logr.Discard()})
	if err != nil {
		f.Fatal(err)
	}
	srv.Admission("fuzz", validating("deny.fuzz", "/deny", denyAll), module.Enforce)
	srv.Admission("fuzz", validating("warn.fuzz", "/warn", denyAll), module.Warn)
	patching := validating("patch.fuzz", "/patch", patchObject)
	patching.Type = module.Mutating
	srv.Admission("fuzz", patching, module.Enforce)
	srv.Conversion("fuzz", module.Webhook{Name: "convert.fuzz", Path: "/convert", Type: module.Conversion, CRDs: []string{"x"},
		Convert: func(_ context.Context, req *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error) {
			return req.Objects, nil
		}})
	if err := srv.SetRuntimeWebhooks("fuzz", []module.Webhook{validating("runtime.fuzz", module.RuntimePath("fuzz")+"deny", denyAll)}, module.Enforce); err != nil {
		f.Fatal(err)
	}
	return srv.WebhookMux()
}

// FuzzAdmissionHandler drives the whole HTTP handler (guard, decoding,
// module call, encoding) with random bodies and content types: the status
// is 200, 400, 413 or 415, never 500 and never a panic the server had to
// recover (metrics.Panics does not move); a 200 is a review of the kind
// the path serves, answering the UID the body carried.
func FuzzAdmissionHandler(f *testing.F) {
	handler := fuzzServer(f)
	for i, s := range reviewSeeds() {
		f.Add(uint8(i), "application/json", false, s)
	}
	f.Add(uint8(2), "application/json; charset=utf-8", true, review("uid-patch", admissionv1.Create))
	f.Add(uint8(0), "text/yaml", false, []byte("a: b"))
	f.Add(uint8(3), "", true, conversionReview("c3", "deckhouse.io/v1alpha1", `{"a":1}`, `[]`))
	f.Add(uint8(5), "application/json;", false, review("uid-gone", admissionv1.Update))
	f.Add(uint8(4), "application/json", true, bytes.Repeat([]byte("x"), fuzzMaxRequestBytes+1))

	f.Fuzz(func(t *testing.T, route uint8, contentType string, chunked bool, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		panicsBefore := panicCount()

		req := httptest.NewRequest(http.MethodPost, rt.path, bytes.NewReader(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if chunked {
			req.ContentLength = -1 // the size is known only once read
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)

		if got := panicCount(); got != panicsBefore {
			t.Fatalf("%s: a handler panicked (panic counter %v -> %v); body %q", rt.path, panicsBefore, got, body)
		}
		switch rec.Code {
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
			return
		default:
			t.Fatalf("%s: HTTP %d for body %q: %s", rt.path, rec.Code, body, rec.Body.Bytes())
		}
		if len(body) > fuzzMaxRequestBytes {
			t.Fatalf("%s: a body of %d bytes was served, over the limit of %d", rt.path, len(body), fuzzMaxRequestBytes)
		}
		if rt.conversion {
			var in, out apiextensionsv1.ConversionReview
			if err := server.DecodeConversionReview(body, &in); err != nil {
				t.Fatalf("%s: 200 for a body the decoder refuses (%v): %q", rt.path, err, body)
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("%s: the answer is not a ConversionReview (%v): %s", rt.path, err, rec.Body.Bytes())
			}
			if out.APIVersion != "apiextensions.k8s.io/v1" || out.Kind != "ConversionReview" || out.Response.UID != in.Request.UID {
				t.Fatalf("%s: answer %s to UID %q", rt.path, rec.Body.Bytes(), in.Request.UID)
			}
			return
		}
		var in, out admissionv1.AdmissionReview
		if err := server.DecodeAdmissionReview(body, &in); err != nil {
			t.Fatalf("%s: 200 for a body the decoder refuses (%v): %q", rt.path, err, body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("%s: the answer is not an AdmissionReview (%v): %s", rt.path, err, rec.Body.Bytes())
		}
		if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response.UID != in.Request.UID {
			t.Fatalf("%s: answer %s to UID %q", rt.path, rec.Body.Bytes(), in.Request.UID)
		}
	})
}

// panicCount sums the panic counters of every hook of the fuzzed server.
func panicCount() float64 {
	var n float64
	for _, rt := range fuzzRoutes {
		module := "fuzz"
		if rt.hook == "removed.gatehouse.dev" {
			module = "gatehouse"
		}
		n += testutil.ToFloat64(metrics.Panics.WithLabelValues(rt.hook, module))
	}
	return n
}
