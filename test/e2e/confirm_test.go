package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/placement"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// watchGate holds back, while paused, what Gatehouse's watches receive:
// its informer caches stay as they were, while its live reads (GET, LIST)
// see the API server as it is. A stale cache on demand, not by a race.
type watchGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newWatchGate() *watchGate {
	g := &watchGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *watchGate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *watchGate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *watchGate) wait() {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	<-open
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (g *watchGate) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if err != nil || r.URL.Query().Get("watch") != "true" {
			return resp, err
		}
		resp.Body = gatedBody{ReadCloser: resp.Body, gate: g}
		return resp, nil
	})
}

// gatedBody hands on what a watch received only while the gate is open:
// bytes that arrive after pause are held, whenever the read began.
type gatedBody struct {
	io.ReadCloser
	gate *watchGate
}

func (b gatedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.gate.wait()
	return n, err
}

// errAdmitted: a request a test wants refused was admitted.
var errAdmitted = errors.New("admitted")

// startGatedGatehouse is startGatehouse with its API traffic through a
// watchGate.
func startGatedGatehouse(t *testing.T, opts app.Options) (*testenv.Gatehouse, *watchGate) {
	t.Helper()
	gate := newWatchGate()
	cp := *controlPlane
	cp.Config = rest.CopyConfig(controlPlane.Config)
	cp.Config.Wrap(gate.wrap)
	opts.Log = testr.NewWithInterface(t, testr.Options{Verbosity: 0})
	opts.Namespace = "gatehouse-e2e"
	g, err := testenv.StartGatehouse(context.Background(), &cp, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Stop(); err != nil {
			t.Errorf("stop gatehouse: %v", err)
		}
		_ = controlPlane.Client.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookconfig.ValidatingName}})
		_ = controlPlane.Client.Delete(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookconfig.MutatingName}})
	})
	// Cleanups run last first: the watches flow again before Gatehouse
	// stops, whatever the test left.
	t.Cleanup(gate.resume)
	return g, gate
}

// confirmations is gatehouse_webhook_confirmations_total of a webhook and
// result.
func confirmations(t *testing.T, webhook, result string) float64 {
	t.Helper()
	return seriesSum("gatehouse_webhook_confirmations_total", map[string]string{"webhook": webhook, "result": result})
}

// pvsafe: a volume switched to reclaimPolicy Retain a moment ago is not
// seen by the cache; the server's confirmation reads it and admits the
// claim's deletion, counted as overturned.
func TestPVSafeStaleCacheDenialIsOverturnedByTheServer(t *testing.T) {
	_, gate := startGatedGatehouse(t, app.Options{
		Catalogue: []module.Module{pvsafe.New(pvsafe.Options{})},
		Modules:   map[string]app.ModuleConfig{"pvsafe": {Enabled: true, Enforcement: module.Enforce}},
	})
	ns := namespace(t, "pvsafe-stale")
	claim, pv := volumeFixture(t, ns, "data", corev1.PersistentVolumeReclaimDelete)
	eventually(t, "the claim's deletion is refused", func() error {
		if err := deleteErr(t, claim, client.DryRunAll); err == nil {
			return errAdmitted
		}
		return nil
	})
	before := confirmations(t, pvsafe.WebhookName, module.ConfirmationOverturned)

	gate.pause()
	patch := client.MergeFrom(pv.DeepCopy())
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	if err := controlPlane.Client.Patch(context.Background(), pv, patch); err != nil {
		t.Fatal(err)
	}
	if err := deleteErr(t, claim, client.DryRunAll); err != nil {
		t.Fatalf("the deletion of a claim whose volume is Retain was refused from a stale cache: %v", err)
	}
	if got := confirmations(t, pvsafe.WebhookName, module.ConfirmationOverturned); got != before+1 {
		t.Fatalf("overturned confirmations went from %v to %v, want one more: the cache was not behind, or not confirmed", before, got)
	}
	gate.resume()
}

// placement: a tenant's allow-list widened a moment ago is not in the
// cache; the HelmRelease taking the newly allowed class is admitted.
func TestPlacementStaleCacheDenialIsOverturnedByTheServer(t *testing.T) {
	e := newPlacementEnv(t)
	var gate *watchGate
	e.g, gate = startGatedGatehouse(t, app.Options{
		Catalogue: []module.Module{placement.New(placement.Options{})},
		Modules:   map[string]app.ModuleConfig{"placement": {Enabled: true, Enforcement: module.Enforce}},
	})
	eventually(t, "a release of a class the tenant may not use is refused", func() error {
		if _, err := e.release("refused-"+randSuffix(), e.classes["gpu"]); err == nil {
			return errAdmitted
		}
		return nil
	})
	before := confirmations(t, placement.ReleaseWebhookName, module.ConfirmationOverturned)

	gate.pause()
	e.allowClasses(e.classes["dc1"], e.classes["gpu"])
	if _, err := e.release("admitted", e.classes["gpu"]); err != nil {
		t.Fatalf("a release of a class allowed a moment ago was refused from a stale cache: %v", err)
	}
	if got := confirmations(t, placement.ReleaseWebhookName, module.ConfirmationOverturned); got != before+1 {
		t.Fatalf("overturned confirmations went from %v to %v, want one more", before, got)
	}
	gate.resume()
}

// configcheck: a Service created a moment ago is not in the store; an
// Ingress routing to it is admitted over the API server's lists.
func TestConfigcheckStaleCacheDenialIsOverturnedByTheServer(t *testing.T) {
	c := controlPlane.Client
	var gate *watchGate
	e := startConfigcheckOn(t, nil, func(opts app.Options) *testenv.Gatehouse {
		var g *testenv.Gatehouse
		g, gate = startGatedGatehouse(t, opts)
		return g
	})
	hook := webhookOfIngresses(t, e)
	before := confirmations(t, hook, module.ConfirmationOverturned)

	gate.pause()
	e.service("web")
	if err := c.Create(context.Background(), e.ingress("web", "haproxy", "web.example", "web", 80), client.DryRunAll); err != nil {
		t.Fatalf("an Ingress to a Service created a moment ago was refused from a stale cache: %v", err)
	}
	if got := confirmations(t, hook, module.ConfirmationOverturned); got != before+1 {
		t.Fatalf("overturned confirmations of %s went from %v to %v, want one more", hook, before, got)
	}
	gate.resume()
}

// webhookOfIngresses names the config's webhook for Ingresses.
func webhookOfIngresses(t *testing.T, e *configcheckEnv) string {
	t.Helper()
	for _, name := range e.webhookNames() {
		if strings.HasPrefix(name, "ingresses.") {
			return name
		}
	}
	t.Fatalf("no Ingress webhook among %v", e.webhookNames())
	return ""
}
