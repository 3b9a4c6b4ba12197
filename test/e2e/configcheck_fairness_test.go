package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// These tests are the three attacks of issue 26 on one shared config's
// render time: tenant A's huge Ingresses, a confined author's dry runs of a
// config whose test spins to its deadline, and huge reviews posted straight
// to the port without any identity. Tenant B, who shares the config, must
// go on being admitted. Its admission latency under each attack is
// measured against its idle latency in the same run, and logged: the
// figures are docs/security.md's; the test asserts behaviour, not time.

// hugePaths is the attack's Ingress size: 10,000 paths, about 0.95 MB.
const hugePaths = 10000

// hugeIngress is tenant A's Ingress of hugePaths paths to its Service api.
func hugeIngress(namespace, name string) *networkingv1.Ingress {
	ing := tenantIngress(namespace, name, name+".example", "")
	path := ing.Spec.Rules[0].HTTP.Paths[0]
	paths := make([]networkingv1.HTTPIngressPath, hugePaths)
	for i := range paths {
		paths[i] = *path.DeepCopy()
		paths[i].Path = fmt.Sprintf("/very/long/path/segment/for/the/attack/%d", i)
	}
	ing.Spec.Rules[0].HTTP.Paths = paths
	return ing
}

// tenantLatency creates tenant B's Ingresses one by one and times each
// admission through the API server.
type tenantLatency struct {
	c         client.Client
	namespace string
	n         atomic.Int64
}

// create creates one more Ingress of B's and returns how long it took.
func (b *tenantLatency) create() (time.Duration, error) {
	name := fmt.Sprintf("b-%d", b.n.Add(1))
	start := time.Now()
	err := b.c.Create(context.Background(), tenantIngress(b.namespace, name, name+".example", ""))
	return time.Since(start), err
}

// sample creates n Ingresses and returns the median of their latencies;
// any refusal is an error of the test.
func (b *tenantLatency) sample(t *testing.T, what string, n int) time.Duration {
	t.Helper()
	var ds []time.Duration
	for range n {
		d, err := b.create()
		if err != nil {
			t.Errorf("tenant B's Ingress was refused %s: %v", what, err)
			continue
		}
		ds = append(ds, d)
	}
	return median(ds)
}

// sampleWhile samples while attack runs, until n samples: attack is given
// a context that ends when the samples are taken.
func (b *tenantLatency) sampleWhile(t *testing.T, what string, n int, attack func(ctx context.Context)) time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		attack(ctx)
	}()
	d := b.sample(t, what, n)
	cancel()
	<-done
	return d
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// confinedAuthor is a user who may write HAProxyTemplateConfigs in a
// namespace of its own and edit there, nothing else.
func confinedAuthor(t *testing.T) (string, client.Client) {
	t.Helper()
	ctx := context.Background()
	ns := namespace(t, "author")
	user := "author-" + randSuffix()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "haproxytemplateconfig-author"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{gatehousev1alpha1.GroupVersion.Group}, Resources: []string{"haproxytemplateconfigs"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}
	for _, obj := range []client.Object{
		role,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "config-author"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edit"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}},
	} {
		if err := controlPlane.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the author may list Services (edit is aggregated)", func() error {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "services", Namespace: ns}}}
		if err := controlPlane.Client.Create(ctx, sar); err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return errors.New("not yet")
		}
		return nil
	})
	return ns, impersonated(t, user)
}

// spinningConfig is a config whose embedded test renders a template that
// runs far past any deadline, within the rendering's limits (9 million
// range iterations, fewer than render.MaxIterations, each hashing 4 KiB).
func spinningConfig(namespace string) *gatehousev1alpha1.HAProxyTemplateConfig {
	return &gatehousev1alpha1.HAProxyTemplateConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "spin"},
		Spec: gatehousev1alpha1.HAProxyTemplateConfigSpec{
			WatchedResources: map[string]gatehousev1alpha1.WatchedResource{
				"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: onlyNamespace(namespace)},
			},
			HAProxyConfig: gatehousev1alpha1.Template{Template: authzTemplate + `{{ range until 3000 }}{{ range until 3000 }}{{ $_ := sha256sum (repeat 4096 "x") }}{{ end }}{{ end }}` + "\n"},
			ValidationTests: map[string]gatehousev1alpha1.ValidationTest{
				"spins": {Assertions: []gatehousev1alpha1.Assertion{{Type: "haproxy_valid"}}},
			},
		},
	}
}

// anonymousReview is an AdmissionReview creating obj in namespace, with
// no user at all.
func anonymousReview(t *testing.T, kind metav1.GroupVersionKind, resource metav1.GroupVersionResource, namespace string, obj runtime.Object) []byte {
	t.Helper()
	return createReview(t, kind, resource, namespace, authenticationv1.UserInfo{}, obj)
}

// createReview is an AdmissionReview creating obj in namespace as user,
// as a client posting straight to the port writes it.
func createReview(t *testing.T, kind metav1.GroupVersionKind, resource metav1.GroupVersionResource, namespace string, user authenticationv1.UserInfo, obj runtime.Object) []byte {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("direct-" + randSuffix()), Kind: kind, Resource: resource, Namespace: namespace,
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}, UserInfo: user,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// errShed is Gatehouse's server refusing a review for its load (429, 503)
// before any module reads it.
var errShed = errors.New("shed by the server")

// postEncodedReview posts an encoded AdmissionReview to target.
func postEncodedReview(hc *http.Client, target string, body []byte) (*admissionv1.AdmissionResponse, error) {
	resp, err := hc.Post(target, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return nil, fmt.Errorf("%w: %d %s", errShed, resp.StatusCode, data)
	default:
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, data)
	}
	out := admissionv1.AdmissionReview{}
	if err := json.Unmarshal(data, &out); err != nil || out.Response == nil {
		return nil, fmt.Errorf("response %s: %v", data, err)
	}
	return out.Response, nil
}

// objectBoundsRefusal is what a per-object refusal says.
const objectBoundsRefusal = "accepts Ingress objects of watched resource ingresses up to 128.0 KiB"

// TestConfigcheckFairShares: tenants A and B share the example config;
// each attack runs while B creates Ingresses. B is admitted throughout;
// A's huge Ingresses and the huge anonymous reviews are refused for their
// own size, and the author's dry runs wait their turn (the one too many is
// refused at once).
func TestConfigcheckFairShares(t *testing.T) {
	e := startConfigcheck(t)
	nsA, tenantA := e.tenantNamespace(t, "tenant-a")
	nsB, tenantB := e.tenantNamespace(t, "tenant-b")
	b := &tenantLatency{c: tenantB, namespace: nsB}
	// The first admission starts a render worker: not part of any figure.
	eventually(t, "tenant B's first Ingress is admitted", func() error { _, err := b.create(); return err })
	const samples = 7
	idle := b.sample(t, "while idle", samples)
	figures := map[string]time.Duration{}
	defer func() {
		for _, attack := range slices.Sorted(maps.Keys(figures)) {
			t.Logf("FIGURE tenant B's median admission latency: idle %v, under %s %v: ratio %.2f",
				idle.Round(time.Millisecond), attack, figures[attack].Round(time.Millisecond), float64(figures[attack])/float64(idle))
		}
	}()

	t.Run("tenant A's huge Ingresses are refused for their own size", func(t *testing.T) {
		var admitted, wrong []string
		var mu sync.Mutex
		attempt := func(round int) {
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					name := fmt.Sprintf("huge-%d-%d", round, i)
					err := tenantA.Create(context.Background(), hugeIngress(nsA, name))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						admitted = append(admitted, name)
					case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), objectBoundsRefusal) ||
						!strings.Contains(err.Error(), "spec.rules[0].http.paths of this Ingress has 10000 items"):
						wrong = append(wrong, err.Error())
					}
				}()
			}
			wg.Wait()
		}
		// The attack: six at once, then B's admissions.
		attempt(0)
		figures["(a) six huge Ingresses"] = b.sample(t, "after tenant A's six 0.95 MB Ingresses", samples)
		// Harsher: A keeps sending them while B's admissions are timed;
		// this also counts the API server's own work on each (decoding,
		// validating and tracking the fields of 10,000 paths), which no
		// webhook can spare it.
		figures["(a+) huge Ingresses sent without pause"] = b.sampleWhile(t, "while tenant A sends 0.95 MB Ingresses", samples, func(ctx context.Context) {
			for round := 1; ctx.Err() == nil; round++ {
				attempt(round)
			}
		})
		if len(admitted) > 0 {
			t.Errorf("tenant A's Ingresses of %d paths were admitted: %v", hugePaths, admitted)
		}
		for _, w := range wrong {
			t.Errorf("tenant A's huge Ingress was refused without saying its size and the bound: %s", cut(w))
		}
	})

	t.Run("an author's spinning dry runs wait their turn", func(t *testing.T) {
		nsAuthor, author := confinedAuthor(t)
		var errs []error
		var mu sync.Mutex
		figures["(b) spinning dry runs"] = b.sampleWhile(t, "while an author dry-runs spinning configs", samples, func(ctx context.Context) {
			var wg sync.WaitGroup
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := author.Create(context.Background(), spinningConfig(nsAuthor), client.DryRunAll)
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}()
			}
			wg.Wait()
		})
		tooMany := 0
		for _, err := range errs {
			t.Logf("a spinning dry run: %v", err)
			switch {
			case err == nil:
				t.Errorf("a config whose test spins past its deadline was admitted")
			case strings.Contains(err.Error(), "already has 1 waiting for their turn"):
				tooMany++
			}
		}
		if tooMany == 0 {
			t.Errorf("no dry run of the three was refused at once for the author's turn; got %v", errs)
		}
	})

	t.Run("huge reviews posted without identity are refused for their own size", func(t *testing.T) {
		target := e.g.URL + module.RuntimePath("configcheck") + url.PathEscape(e.cfgKey.Namespace) + "/" + url.PathEscape(e.cfgKey.Name) + "/ingresses"
		kind := metav1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}
		resource := metav1.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
		// Twelve reviews, encoded once: the attacker's own CPU is not
		// this machine's in a real attack.
		bodies := make([][]byte, 12)
		for i := range bodies {
			// Posed as tenant B's own namespace.
			bodies[i] = anonymousReview(t, kind, resource, nsB, hugeIngress(nsB, fmt.Sprintf("anon-%d", i)))
		}
		var wrong []string
		var refused, shed atomic.Int64
		var mu sync.Mutex
		figures["(c) anonymous huge reviews"] = b.sampleWhile(t, "while huge reviews are posted without identity", samples, func(ctx context.Context) {
			for ctx.Err() == nil {
				var wg sync.WaitGroup
				for _, body := range bodies {
					wg.Add(1)
					go func() {
						defer wg.Done()
						resp, err := postEncodedReview(e.g.HTTPClient, target, body)
						switch {
						case errors.Is(err, errShed):
							shed.Add(1)
							return
						case err == nil && !resp.Allowed && resp.Result != nil && strings.Contains(resp.Result.Message, objectBoundsRefusal):
							refused.Add(1)
							return
						}
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err != nil:
							wrong = append(wrong, err.Error())
						case resp.Allowed:
							wrong = append(wrong, "admitted")
						default:
							wrong = append(wrong, fmt.Sprintf("%+v", resp.Result))
						}
					}()
				}
				wg.Wait()
			}
		})
		t.Logf("huge anonymous reviews: %d refused for their size, %d shed by the server for its load", refused.Load(), shed.Load())
		if refused.Load() == 0 {
			t.Errorf("no huge anonymous review was refused for its size")
		}
		for _, w := range wrong {
			t.Errorf("a huge anonymous review was not refused for its size: %s", cut(w))
		}
	})

	// B's Ingresses are all published: nothing of the attacks got in.
	e.waitFor("tenant B's last Ingress is published", func() error {
		last := fmt.Sprintf("b-%d.example", b.n.Load())
		if !strings.Contains(e.published()["map.hosts.map"], last) {
			return fmt.Errorf("%s is not published", last)
		}
		return nil
	})
}

// cut cuts an error text for a test's log.
func cut(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}
