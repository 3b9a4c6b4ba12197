package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

func podModule() *Module {
	return &Module{view: view{
		classes: testClasses,
		releases: memReleases{
			{"app", "web-app"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-app", Labels: map[string]string{classLabel: "dc1"}}},
			{"app", "gpu-app"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "gpu-app", Labels: map[string]string{classLabel: "gpu"}}},
			{"app", "ghost"}:   {ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "ghost", Labels: map[string]string{classLabel: "dc9"}}},
			{"app", "free"}:    {ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "free"}},
		}},
		owners: ownerGraph{objects: map[string]*metav1.ObjectMeta{
			"Deployment/app/web":   owned("web", "d1", flux("web-app")),
			"ReplicaSet/app/web-1": owned("web-1", "r1", nil, ref("Deployment", "web", "d1")),
			"Deployment/app/ml":    owned("ml", "d2", flux("gpu-app")),
		}},
	}
}

func podOf(generateName string, selector map[string]string, owners ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: generateName, OwnerReferences: owners, Labels: map[string]string{}},
		Spec: corev1.PodSpec{NodeSelector: selector}}
}

func TestDecidePod(t *testing.T) {
	m := podModule()
	zone := map[string]string{"topology.kubernetes.io/zone": "dc1"}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		wants []string
	}{
		{"compliant through ReplicaSet and Deployment", podOf("web-1-", zone, ref("ReplicaSet", "web-1", "r1")), nil},
		{"the seed's message, named by generateName", podOf("web-1-", nil, ref("ReplicaSet", "web-1", "r1")),
			[]string{`pod app/web-1- belongs to application with AffinityClass "dc1" but missing required nodeSelector topology.kubernetes.io/zone=dc1`, "HelmRelease app/web-app"}},
		{"every missing pair named", podOf("ml-", nil, ref("Deployment", "ml", "d2")),
			[]string{`missing required nodeSelector gpu=true`, "does not guarantee the class's node affinity"}},
		{"node affinity guaranteed by an In subset", func() *corev1.Pod {
			p := podOf("ml-", map[string]string{"gpu": "true"}, ref("Deployment", "ml", "d2"))
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu-model", Operator: corev1.NodeSelectorOpIn, Values: []string{"h100"}}}}},
			}}}
			return p
		}(), nil},
		{"an unknown class", func() *corev1.Pod { p := podOf("x-", nil); p.Labels[fluxNameLabel] = "ghost"; return p }(),
			[]string{`AffinityClass "dc9" not found`}},
		{"a release without a class", func() *corev1.Pod { p := podOf("x-", nil); p.Labels[fluxNameLabel] = "free"; return p }(), nil},
		{"no release", podOf("x-", nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := m.decidePod(context.Background(), m.view, "app", tc.pod)
			if v.Err != nil {
				t.Fatal(v.Err)
			}
			got := strings.Join(v.Denials, "\n")
			if len(tc.wants) == 0 && got != "" {
				t.Fatalf("denied: %s", got)
			}
			for _, w := range tc.wants {
				if !strings.Contains(got, w) {
					t.Errorf("denial %q lacks %q", got, w)
				}
			}
		})
	}
}

func TestPodDenialIsConfirmedLive(t *testing.T) {
	ctx := context.Background()
	m := podModule()
	pod := podOf("web-1-", nil, ref("ReplicaSet", "web-1", "r1"))
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "app", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}}
	if resp := m.admitPod(ctx, req); resp.Allowed {
		t.Fatal("a Pod without its class's selector was admitted")
	}
	// The release left its class a moment ago; the cache has not seen it.
	m.live = &view{classes: testClasses, releases: memReleases{
		{"app", "web-app"}: {ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web-app"}},
	}}
	if resp := decideBy(t, m, PodWebhookName, ctx, req); !resp.Allowed {
		t.Fatalf("denied from a stale cache: %v", resp.Result.Message)
	}
	// A Pod that cannot be judged is answered undecided: the webhook's
	// failure policy decides, not Gatehouse.
	m.classes = failingClasses{}
	resp := decideBy(t, m, PodWebhookName, ctx, req)
	if module.ClassOf(resp) != module.ClassUndecided || !strings.Contains(resp.Result.Message, "could not be decided") {
		t.Fatalf("undecidable Pod: allowed=%v result=%+v", resp.Allowed, resp.Result)
	}
}

// A Pod the caches refuse keeps its denial when the API server cannot be
// read in time to confirm it: the Pod webhook fails open (Ignore), so an
// undecided answer would admit, for good, a Pod outside its class whenever
// the API server is slow for a moment (the install suite's upgrade on
// Kubernetes 1.34 saw two). The answer is the cached denial, counted as an
// undecided confirmation. An API no longer served is read live, and leaves
// the Pod undecided.
func TestPodDenialStandsWhenTheAPIServerCannotBeReadInTime(t *testing.T) {
	m := podModule()
	pod := podOf("web-1-", nil, ref("ReplicaSet", "web-1", "r1"))
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "app", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}}
	var hook module.Webhook
	for _, w := range m.Webhooks() {
		if w.Name == PodWebhookName {
			hook = w
		}
	}
	// The live read outlasts the confirmation's deadline (the caller's,
	// here, rather than the webhook's timeout less a second).
	m.live = &view{classes: testClasses, releases: stalledReleases{}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	d := hook.Decide(ctx, req)
	if d.Class != module.ClassDenied {
		t.Fatalf("a Pod outside its class, unconfirmable in time: allowed=%v result=%+v; want the cached denial", d.Response.Allowed, d.Response.Result)
	}
	if !strings.Contains(d.Response.Result.Message, `missing required nodeSelector topology.kubernetes.io/zone=dc1`) {
		t.Fatalf("answer %q is not the cached denial", d.Response.Result.Message)
	}
	if d.Confirmation != module.OutcomeUnconfirmed || d.Confirmation.Result() != module.ConfirmationUndecided {
		t.Fatalf("confirmation %s counted %q, want unconfirmed counted %q", d.Confirmation, d.Confirmation.Result(), module.ConfirmationUndecided)
	}
	// The class API no longer served, read live: undecided.
	m.live = &view{classes: failingClasses{}, releases: m.view.releases}
	d = hook.Decide(context.Background(), req)
	if d.Class != module.ClassUndecided {
		t.Fatalf("a Pod whose class API is gone: allowed=%v result=%+v; want undecided", d.Response.Allowed, d.Response.Result)
	}
}

// stalledReleases answers no read before its caller gives up, as an API
// server under load does.
type stalledReleases struct{ memReleases }

func (stalledReleases) get(ctx context.Context, k releaseKey) (*metav1.PartialObjectMetadata, bool, error) {
	<-ctx.Done()
	return nil, false, fmt.Errorf("read HelmRelease %s: %w", k, ctx.Err())
}

// decideBy decides req as the server does, through the declaration of the
// webhook named name (its confirmation included).
func decideBy(t *testing.T, m *Module, name string, ctx context.Context, req admission.Request) admission.Response {
	t.Helper()
	for _, w := range m.Webhooks() {
		if w.Name == name {
			return w.Decide(ctx, req).Response
		}
	}
	t.Fatalf("no webhook %s", name)
	return admission.Response{}
}

type failingClasses struct{}

func (failingClasses) get(context.Context, string) (*class, bool, error) {
	return nil, false, errClassAPI
}

type memNodes map[string]map[string]string

func (m memNodes) get(_ context.Context, name string) (map[string]string, bool, error) {
	l, ok := m[name]
	return l, ok, nil
}

// A Pod bound at creation (spec.nodeName) skips the scheduler: it is judged
// against its Node's labels too, whatever its nodeSelector says. The denial
// says whether the Node is in the class, never which of its labels are not.
func TestPodBoundToANodeIsJudgedByTheNode(t *testing.T) {
	m := podModule()
	m.nodes = memNodes{
		"dc1-node": {"topology.kubernetes.io/zone": "dc1", "secret-rack": "r7"},
		"dc2-node": {"topology.kubernetes.io/zone": "dc2", "secret-rack": "r9"},
		"h100":     {"gpu": "true", "gpu-model": "h100"},
		"t4":       {"gpu": "true", "gpu-model": "t4"},
	}
	zone := map[string]string{"topology.kubernetes.io/zone": "dc1"}
	gpu := func(node string) *corev1.Pod {
		p := podOf("ml-", map[string]string{"gpu": "true"}, ref("Deployment", "ml", "d2"))
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu-model", Operator: corev1.NodeSelectorOpIn, Values: []string{"h100"}}}}},
		}}}
		p.Spec.NodeName = node
		return p
	}
	bound := func(node string) *corev1.Pod {
		p := podOf("web-1-", zone, ref("ReplicaSet", "web-1", "r1"))
		p.Spec.NodeName = node
		return p
	}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		denied string
	}{
		{"on a node of the class", bound("dc1-node"), ""},
		{"the class's selector, a node of another zone", bound("dc2-node"),
			`pod app/web-1- belongs to application with AffinityClass "dc1" but is bound to node "dc2-node" (spec.nodeName), which is not in the class`},
		{"node affinity: a node the class allows", gpu("h100"), ""},
		{"node affinity: a node the class does not allow", gpu("t4"), `is bound to node "t4" (spec.nodeName), which is not in the class`},
		{"a node the cache does not hold is denied provisionally", bound("new-node"),
			`is bound to node "new-node" (spec.nodeName), which Gatehouse's cache does not hold yet`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := m.decidePod(context.Background(), m.view, "app", tc.pod)
			if v.Err != nil {
				t.Fatal(v.Err)
			}
			got := strings.Join(v.Denials, "\n")
			if tc.denied == "" && got != "" || !strings.Contains(got, tc.denied) {
				t.Fatalf("denials %q, want %q", got, tc.denied)
			}
			if strings.Contains(got, "secret-rack") || strings.Contains(got, "r9") || strings.Contains(got, "zone=dc2") {
				t.Fatalf("the denial tells the Node's labels: %q", got)
			}
		})
	}
}

// A Node missing from the cache is read from the API server before a Pod
// bound to it is denied: a Node that joined a moment ago is judged by its
// labels, and one that does not exist leaves the Pod judged on its
// selectors alone (it runs nowhere, and a Node of that name joining later
// is held to them by the kubelet).
func TestPodBoundToANodeTheCacheDoesNotHoldIsConfirmedLive(t *testing.T) {
	ctx := context.Background()
	request := func(node string, selector map[string]string) admission.Request {
		p := podOf("web-1-", selector, ref("ReplicaSet", "web-1", "r1"))
		p.Spec.NodeName = node
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Namespace: "app", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}}
	}
	zone := map[string]string{"topology.kubernetes.io/zone": "dc1"}
	m := podModule()
	m.nodes = memNodes{}
	live := m.view
	live.fromAPIServer = true
	live.nodes = memNodes{"joined-dc1": {"topology.kubernetes.io/zone": "dc1"}, "joined-dc2": {"topology.kubernetes.io/zone": "dc2"}}
	m.live = &live

	if resp := decideBy(t, m, PodWebhookName, ctx, request("joined-dc1", zone)); !resp.Allowed {
		t.Fatalf("a Pod on a new Node of its class: %v", resp.Result.Message)
	}
	resp := decideBy(t, m, PodWebhookName, ctx, request("joined-dc2", zone))
	if resp.Allowed || !strings.Contains(resp.Result.Message, `is bound to node "joined-dc2" (spec.nodeName), which is not in the class`) ||
		strings.Contains(resp.Result.Message, "cache") {
		t.Fatalf("a Pod on a new Node of another zone: allowed=%v %+v", resp.Allowed, resp.Result)
	}
	if resp := decideBy(t, m, PodWebhookName, ctx, request("nowhere", zone)); !resp.Allowed {
		t.Fatalf("a Pod bound to no existing Node, with its class's selector: %v", resp.Result.Message)
	}
	resp = decideBy(t, m, PodWebhookName, ctx, request("nowhere", nil))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "missing required nodeSelector") || strings.Contains(resp.Result.Message, "nowhere") {
		t.Fatalf("a Pod bound to no existing Node, without its class's selector: allowed=%v %+v", resp.Allowed, resp.Result)
	}
}
