package server_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// podFlood is a Pod review of about 2.9 MB whose spec.containers holds a
// million empty objects: decoded into corev1.Pod, as placement's Pod
// webhook does, it allocates 2.2 GB (and keeps 450 MB) for one review.
func podFlood() []byte {
	var b bytes.Buffer
	b.WriteString(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"pods","operation":"CREATE",` +
		`"kind":{"group":"","version":"v1","kind":"Pod"},"object":{"metadata":{"name":"flood"},"spec":{"containers":[`)
	for i := 0; b.Len() < 2_900_000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("{}")
	}
	b.WriteString(`]}}}}`)
	return b.Bytes()
}

// TestReviewCostlierThanTheBudgetIsRefusedUndecoded: one review under the
// size limit whose decoding its webhook declares to cost more than the
// whole budget of decisions in flight (a 2.9 MB Pod of empty containers, to
// a webhook decoding Pods) is refused with 413 before anything decodes it;
// before the estimate it reached the decision and took gigabytes.
func TestReviewCostlierThanTheBudgetIsRefusedUndecoded(t *testing.T) {
	var decided atomic.Int32
	hook := validating("pods.test", "/pods", func(context.Context, admission.Request) admission.Response {
		decided.Add(1)
		return admission.Allowed("")
	})
	hook.Cost = module.Cost{BytesPerToken: 1280}
	h := start(t, nil, func(s *server.Server) { s.Admission("test", hook, module.Enforce) })

	code, out := h.post(t, "/pods", podFlood())
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(out), "more than the 192 MiB of decisions the server holds in flight") {
		t.Errorf("status %d: %s; want 413 naming the budget", code, out)
	}
	if decided.Load() != 0 {
		t.Errorf("the review reached the decision")
	}
	if code, out := h.post(t, "/pods", review("small", admissionv1.Create)); code != http.StatusOK {
		t.Errorf("an ordinary review: status %d: %s", code, out)
	}
}

// TestModuleConcurrencyIsBoundedAcrossItsWebhooks: a module declaring a
// concurrency of 2 on two webhooks has at most two decisions running, of
// either; a third request gets 503, without Retry-After, once its wait
// ends, and a module declaring none is not held up.
func TestModuleConcurrencyIsBoundedAcrossItsWebhooks(t *testing.T) {
	release := make(chan struct{})
	var running, most atomic.Int32
	slow := func(context.Context, admission.Request) admission.Response {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		running.Add(-1)
		return admission.Allowed("")
	}
	a, b := validating("a.test", "/a", slow), validating("b.test", "/b", slow)
	a.Cost.Concurrency, b.Cost.Concurrency = 2, 2
	other := validating("other.test", "/other", func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })
	h := start(t, func(o *server.Options) { o.InFlightWait = 300 * time.Millisecond }, func(s *server.Server) {
		s.Admission("busy", a, module.Enforce)
		s.Admission("busy", b, module.Enforce)
		s.Admission("other", other, module.Enforce)
	})

	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for _, path := range []string{"/a", "/b"} {
		wg.Go(func() {
			code, _ := h.post(t, path, review("held", admissionv1.Create))
			codes <- code
		})
	}
	for running.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := h.client.Post(h.url+"/a", "application/json", bytes.NewReader(review("third", admissionv1.Create)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "" {
		t.Errorf("a third decision of the module: status %d, Retry-After %q; want 503 and none", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code, out := h.post(t, "/other", review("other", admissionv1.Create)); code != http.StatusOK {
		t.Errorf("another module's review: status %d: %s", code, out)
	}
	close(release)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("a held decision ended with %d", code)
		}
	}
	if most.Load() != 2 {
		t.Errorf("%d decisions ran at once, want 2", most.Load())
	}
}

// TestLoadRefusalsAreNotRetried posts, as kube-apiserver calls a webhook
// (client-go's REST client, which retries a 429 or 5xx naming a
// Retry-After), to a module whose one decision is held: the 503 reaches
// the caller after one request, so that the API server applies the
// failurePolicy at once instead of sending the request again every second
// until the webhook's timeout.
func TestLoadRefusalsAreNotRetried(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	var received atomic.Int32
	slow := func(context.Context, admission.Request) admission.Response {
		held <- struct{}{}
		<-release
		return admission.Allowed("")
	}
	a := validating("a.test", "/a", slow)
	a.Cost.Concurrency = 1
	h := start(t, func(o *server.Options) { o.InFlightWait = 100 * time.Millisecond }, func(s *server.Server) {
		s.Admission("busy", a, module.Enforce)
	})
	go func() { _, _ = h.post(t, "/a", review("held", admissionv1.Create)) }()
	<-held
	defer close(release)

	base, err := url.Parse(h.url)
	if err != nil {
		t.Fatal(err)
	}
	counting := *h.client
	counting.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		received.Add(1)
		return h.client.Transport.RoundTrip(r)
	})
	c, err := rest.NewRESTClient(base, "", rest.ClientContentConfig{
		ContentType: "application/json",
		Negotiator:  runtime.NewClientNegotiator(scheme.Codecs.WithoutConversion(), schema.GroupVersion{}),
	}, nil, &counting)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Post().AbsPath("/a").Body(review("refused", admissionv1.Create)).Do(t.Context()).Error()
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("want 503, got %v", err)
	}
	if n := received.Load(); n != 1 {
		t.Errorf("client-go sent the refused review %d times, want once", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWebhooksOfAModuleDeclareOneConcurrency: two webhooks of one module
// declaring different bounds are a programming error, refused at run time.
func TestWebhooksOfAModuleDeclareOneConcurrency(t *testing.T) {
	allow := func(context.Context, admission.Request) admission.Response { return admission.Allowed("") }
	h := start(t, nil, func(*server.Server) {})
	a := validating("a.test", module.RuntimePath("m")+"a", allow)
	b := validating("b.test", module.RuntimePath("m")+"b", allow)
	a.Cost.Concurrency, b.Cost.Concurrency = 2, 3
	if err := h.srv.SetRuntimeWebhooks("m", []module.Webhook{a, b}, module.Enforce); err == nil {
		t.Fatal("two concurrencies for one module accepted")
	}
}
