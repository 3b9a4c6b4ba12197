package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/testing/clustertest"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// The configcheck benchmark's cluster: 1,000 Ingresses of the example
// config's class, each to a Service of its own, so that the rendering has
// 1,000 backends and a 1,000-line host map (the anchors: ingress-nginx's
// render webhook takes 3-17 s at about 1,000 Ingresses).
const (
	ccBenchNamespace = "configcheck-bench"
	ccBenchLB        = "configcheck-bench-lb"
	ccBenchIngresses = 1000
)

type ccBench struct {
	c    client.Client
	g    *testenv.Gatehouse
	path string // the Ingress webhook's path
}

// startConfigcheckBench fills the cluster (once; later runs reuse it),
// then starts Gatehouse with the example config, and waits until it has
// published a rendering of all 1,000 Ingresses.
func startConfigcheckBench(b *testing.B) *ccBench {
	ctx := context.Background()
	c := controlPlane.Client
	if err := gatehousev1alpha1.AddToScheme(c.Scheme()); err != nil {
		b.Fatal(err)
	}
	for _, ns := range []string{ccBenchNamespace, ccBenchLB} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	cfgKey := types.NamespacedName{Namespace: ccBenchLB, Name: "edge"}
	parallel(b, ccBenchIngresses, func(i int) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ccBenchNamespace, Name: fmt.Sprintf("svc-%04d", i)},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "x"}},
		}
		if err := c.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Error(err)
		}
		ing := clustertest.Ingress(ccBenchNamespace, fmt.Sprintf("ing-%04d", i), "haproxy", fmt.Sprintf("h%04d.example", i), svc.Name, 80)
		if err := c.Create(ctx, ing); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Error(err)
		}
	})
	if b.Failed() {
		b.FailNow()
	}
	g := startConfigcheckGatehouse(b)
	cfg := clustertest.ExampleConfig(b)
	clustertest.Unscoped(cfg)
	cfg.Namespace = ccBenchLB
	_ = c.Delete(ctx, cfg.DeepCopy())
	eventually(b, "the config is admitted", func() error { return c.Create(ctx, cfg.DeepCopy()) })
	b.Cleanup(func() { _ = c.Delete(context.Background(), cfg.DeepCopy()) })
	eventually(b, "the rendering of 1,000 Ingresses is published", func() error {
		current := &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := c.Get(ctx, cfgKey, current); err != nil {
			return err
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ccBenchLB, Name: configcheck.RenderedConfigMapName("edge")}, cm); err != nil {
			return err
		}
		if n := bytes.Count([]byte(cm.Data["haproxy.cfg"]), []byte("\nbackend be_"+ccBenchNamespace)); n != ccBenchIngresses {
			return fmt.Errorf("%d backends published", n)
		}
		return nil
	})
	return &ccBench{c: c, g: g, path: "/validate/configcheck/" + ccBenchLB + "/edge/ingresses"}
}

// startConfigcheckGatehouse starts Gatehouse with the configcheck module
// alone.
func startConfigcheckGatehouse(b *testing.B) *testenv.Gatehouse {
	b.Helper()
	return clustertest.StartGatehouse(b, controlPlane, app.Options{
		Catalogue: []module.Module{configcheck.New(configcheck.Options{})},
		Modules:   map[string]app.ModuleConfig{"configcheck": {Enabled: true}},
	})
}

// review is the AdmissionReview of creating ing.
func (cb *ccBench) review(b *testing.B, ing *networkingv1.Ingress, uid string) []byte {
	ing.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}
	raw, err := json.Marshal(ing)
	if err != nil {
		b.Fatal(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID(uid), Operation: admissionv1.Create, Namespace: ing.Namespace, Name: ing.Name,
			Kind:     metav1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
			Resource: metav1.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
			Object:   runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// updateReview is the AdmissionReview of updating old to ing.
func (cb *ccBench) updateReview(b *testing.B, old, ing *networkingv1.Ingress) []byte {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(cb.review(b, ing, "update"), &review); err != nil {
		b.Fatal(err)
	}
	old.TypeMeta = ing.TypeMeta
	raw, err := json.Marshal(old)
	if err != nil {
		b.Fatal(err)
	}
	review.Request.Operation = admissionv1.Update
	review.Request.OldObject = runtime.RawExtension{Raw: raw}
	body, err := json.Marshal(review)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// admit sends body to the Ingress webhook over HTTPS and requires an
// admission.
func (cb *ccBench) admit(b *testing.B, body []byte) {
	resp, err := cb.g.HTTPClient.Post(cb.g.URL+cb.path, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &review); err != nil || review.Response == nil || !review.Response.Allowed {
		b.Fatalf("not admitted (HTTP %d): %s", resp.StatusCode, out)
	}
}

// BenchmarkConfigcheckAdmission1000: one Ingress CREATE decided over HTTPS
// with 1,000 Ingresses and Services in the stores, against the same run's
// floor, one haproxy -c of the published rendering of the same 1,000:
//
//   - miss: a new host each time, so a new rendering and a haproxy -c run;
//
//   - hit: the same Ingress each time, so the checksum cache answers;
//
//   - haproxy-c: the floor, exec of haproxy -c on the published files.
//
//     go test ./test/bench -run '^$' -bench ConfigcheckAdmission1000 -benchtime 30x -count 3
func BenchmarkConfigcheckAdmission1000(b *testing.B) {
	cb := startConfigcheckBench(b)
	dir := b.TempDir()
	writePublished(b, cb, dir)
	b.Run("miss", func(b *testing.B) {
		for i := range b.N {
			host := fmt.Sprintf("miss-%d-%d.example", time.Now().UnixNano(), i)
			cb.admit(b, cb.review(b, clustertest.Ingress(ccBenchNamespace, "new", "haproxy", host, "svc-0001", 80), fmt.Sprint("miss-", i)))
		}
	})
	b.Run("hit", func(b *testing.B) {
		// An annotation no template reads: the same rendering each time.
		ing := clustertest.Ingress(ccBenchNamespace, "same", "haproxy", "same.example", "svc-0001", 80)
		cb.admit(b, cb.review(b, ing, "hit")) // the first one runs haproxy
		b.ResetTimer()
		for i := range b.N {
			ing.Annotations = map[string]string{"revision": fmt.Sprint(i)}
			cb.admit(b, cb.review(b, ing, "hit"))
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		// A label-only UPDATE of a stored Ingress: the config ignores
		// labels, so what the templates see does not change.
		stored := &networkingv1.Ingress{}
		if err := cb.c.Get(context.Background(), client.ObjectKey{Namespace: ccBenchNamespace, Name: "ing-0003"}, stored); err != nil {
			b.Fatal(err)
		}
		for i := range b.N {
			changed := stored.DeepCopy()
			changed.Labels = map[string]string{"revision": fmt.Sprint(i)}
			cb.admit(b, cb.updateReview(b, stored, changed))
		}
	})
	b.Run("haproxy-c", func(b *testing.B) {
		for range b.N {
			cmd := exec.Command("haproxy", "-c", "-f", "haproxy.cfg")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("haproxy -c: %v: %s", err, out)
			}
		}
	})
}

// writePublished writes the published rendering into dir as the checker
// lays it out.
func writePublished(b *testing.B, cb *ccBench, dir string) {
	cm := &corev1.ConfigMap{}
	if err := cb.c.Get(context.Background(), types.NamespacedName{Namespace: ccBenchLB, Name: configcheck.RenderedConfigMapName("edge")}, cm); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "maps"), 0o755); err != nil {
		b.Fatal(err)
	}
	for key, text := range cm.Data {
		path := filepath.Join(dir, key)
		if name, ok := cutPrefix(key, "map."); ok {
			path = filepath.Join(dir, "maps", name)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return "", false
}

// BenchmarkConfigcheckBurst50: 50 Ingresses created at once through the
// real kube-apiserver (each a new host, so 50 distinct renderings and haproxy
// -c runs, two at a time), with 1,000 Ingresses in the stores. The config
// judges them one at a time, its namespace's party holding at most 8
// waiting, and refuses the rest at once (503: the webhook's failurePolicy
// applies; before issue 35, the module's concurrency of 8 refused them at
// the server); none may wait out kube-apiserver's 10 s, as they did while the
// refusals carried a Retry-After that client-go obeys by sending the review
// again every second. Reports the p50 and p99 of the creates as the client
// sees them, and how many were admitted.
//
//	go test ./test/bench -run '^$' -bench ConfigcheckBurst50 -benchtime 1x -count 3
func BenchmarkConfigcheckBurst50(b *testing.B) {
	cb := startConfigcheckBench(b)
	ctx := context.Background()
	var (
		lat      []time.Duration
		admitted int
	)
	b.ResetTimer()
	for round := range b.N {
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			errs []error
		)
		names := make([]string, 50)
		for i := range names {
			names[i] = fmt.Sprintf("burst-%d-%d-%s", round, i, randSuffix())
			wg.Add(1)
			go func(name string) {
				defer wg.Done()
				start := time.Now()
				err := cb.c.Create(ctx, clustertest.Ingress(ccBenchNamespace, name, "haproxy", name+".example", "svc-0002", 80))
				mu.Lock()
				defer mu.Unlock()
				lat = append(lat, time.Since(start))
				if err != nil {
					errs = append(errs, err)
				}
			}(names[i])
		}
		wg.Wait()
		b.StopTimer()
		admitted += 50 - len(errs)
		for _, err := range errs {
			// Refused by Gatehouse at once: kube-apiserver reports the 503
			// as a service unavailable (the server's refusals) or with its
			// Status's message (the party's bound); a wait until its own
			// deadline says "context deadline exceeded".
			if !strings.Contains(err.Error(), "the server is currently unable to handle the request") &&
				!strings.Contains(err.Error(), "waiting for their turn, the most it may have waiting") {
				b.Fatalf("%d of 50 creates failed, one of them not by the module's fast refusal: %v", len(errs), err)
			}
		}
		for _, name := range names {
			_ = cb.c.Delete(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ccBenchNamespace, Name: name}}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}
		b.StartTimer()
	}
	reportPercentiles(b, lat)
	b.ReportMetric(float64(admitted)/float64(b.N), "admitted/50")
}
