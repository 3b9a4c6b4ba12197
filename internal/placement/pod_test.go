package placement

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	if !module.IsUndecided(resp) || !strings.Contains(resp.Result.Message, "could not be decided") {
		t.Fatalf("undecidable Pod: allowed=%v result=%+v", resp.Allowed, resp.Result)
	}
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
