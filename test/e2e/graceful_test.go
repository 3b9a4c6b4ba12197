package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// slowModule is a test module (a fixture): its one webhook takes a fixed
// time per decision, so that requests are surely in flight when Gatehouse is
// told to stop. Its rule names a resource no API serves, so kube-apiserver
// never calls it; the test sends the reviews itself.
type slowModule struct {
	delay              time.Duration
	started, completed atomic.Int64
}

func (*slowModule) Name() string                             { return "slow" }
func (*slowModule) AddToScheme(*runtime.Scheme) error        { return nil }
func (*slowModule) Setup(context.Context, module.Host) error { return nil }

func (m *slowModule) Webhooks() []module.Webhook {
	return []module.Webhook{{
		Name: "slow.gatehouse.test", Path: "/validate-slow", Type: module.Validating,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"slow.gatehouse.test"}, APIVersions: []string{"v1"}, Resources: []string{"things"}},
		}},
		FailurePolicy: admissionregistrationv1.Ignore, SideEffects: admissionregistrationv1.SideEffectClassNone,
		TimeoutSeconds: 5,
		Admit: func(ctx context.Context, req admission.Request) admission.Response {
			m.started.Add(1)
			time.Sleep(m.delay)
			m.completed.Add(1)
			return admission.Allowed("")
		},
	}}
}

// TestGracefulStopUnderLoadLosesNoInFlightRequest: 16 clients send reviews
// over HTTPS (keep-alive) to a webhook that takes 200 ms each; Gatehouse is
// stopped (what SIGTERM does) while they run. Every request the server
// received must be answered: decisions started = decisions completed =
// answers the clients got. Requests sent after the listener closed fail to
// connect (in a cluster the failure policy decides them; they are counted,
// not lost).
func TestGracefulStopUnderLoadLosesNoInFlightRequest(t *testing.T) {
	slow := &slowModule{delay: 200 * time.Millisecond}
	g := startGatehouse(t, app.Options{
		Catalogue: []module.Module{slow},
		Modules:   map[string]app.ModuleConfig{"slow": {Enabled: true}},
	})
	url := g.URL + "/validate-slow"
	client := g.HTTPClient

	var answered, notConnected atomic.Int64
	var mu sync.Mutex
	var lost []string
	var clients sync.WaitGroup
	for c := range 16 {
		clients.Add(1)
		go func(c int) {
			defer clients.Done()
			for i := 0; ; i++ {
				status, err := postReview(client, url, fmt.Sprintf("c%d-%d", c, i))
				switch {
				case err == nil && status == http.StatusOK:
					answered.Add(1)
				case err != nil && isNotConnected(err):
					notConnected.Add(1)
					return
				default:
					mu.Lock()
					lost = append(lost, fmt.Sprintf("status %d, error %v", status, err))
					mu.Unlock()
					return
				}
			}
		}(c)
	}
	time.Sleep(time.Second)
	inFlightAtStop := slow.started.Load() - slow.completed.Load()
	stopStart := time.Now()
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	stopTook := time.Since(stopStart)
	clients.Wait()

	t.Logf("answered %d, in flight when the stop began %d, not connected after the listener closed %d, stop took %v",
		answered.Load(), inFlightAtStop, notConnected.Load(), stopTook.Round(time.Millisecond))
	if len(lost) > 0 {
		t.Fatalf("%d requests lost, first: %s", len(lost), lost[0])
	}
	if inFlightAtStop == 0 {
		t.Fatal("no request was in flight when the stop began; the test proves nothing")
	}
	if slow.started.Load() != slow.completed.Load() || slow.completed.Load() != answered.Load() {
		t.Fatalf("decisions started %d, completed %d, answers received %d: want all equal",
			slow.started.Load(), slow.completed.Load(), answered.Load())
	}
}

func postReview(client *http.Client, url, uid string) (int, error) {
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID(uid), Operation: admissionv1.Create, Namespace: "default", Name: uid,
			Kind:   metav1.GroupVersionKind{Group: "slow.gatehouse.test", Version: "v1", Kind: "Thing"},
			Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"slow.gatehouse.test/v1","kind":"Thing","metadata":{"name":"x"}}`)},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	// Replayable: a request written to a keep-alive connection the server
	// had just closed as idle is sent again on a new one, as kube-apiserver's
	// client does; it never reached a handler.
	req.Header.Set("Idempotency-Key", uid)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &answer); err != nil || answer.Response == nil || string(answer.Response.UID) != uid || !answer.Response.Allowed {
		return resp.StatusCode, fmt.Errorf("bad answer %q: %v", out, err)
	}
	return resp.StatusCode, nil
}

// isNotConnected says the request never reached the server: the listener
// was closed.
func isNotConnected(err error) bool {
	return strings.Contains(err.Error(), "connection refused")
}
