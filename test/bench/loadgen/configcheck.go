package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/testing/devenv"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

const (
	ccApp       = "bench-cc"
	ccLB        = "bench-cc-lb"
	ccIngresses = 100
	ccPath      = "/validate/configcheck/" + ccLB + "/edge/ingresses"
)

// configcheckFixture is examples/configcheck's config over 100 Ingresses
// and their Services; its scenarios share one setup.
type configcheckFixture struct {
	// stored are the Ingresses as kube-apiserver returned them, the old
	// objects of the UPDATE reviews.
	stored []*networkingv1.Ingress
	setup  func(context.Context, *devenv.Env) error
}

func newConfigcheckFixture() *configcheckFixture {
	f := &configcheckFixture{}
	f.setup = once(f.create)
	return f
}

func (f *configcheckFixture) create(ctx context.Context, env *devenv.Env) error {
	c := env.ControlPlane.Client
	for _, ns := range []string{ccApp, ccLB} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	cfg, err := exampleConfig()
	if err != nil {
		return err
	}
	cfg.SetNamespace(ccLB)
	if err := client.IgnoreAlreadyExists(createRetrying(ctx, c, cfg)); err != nil {
		return fmt.Errorf("create the config: %w", err)
	}
	for i := 0; i < ccIngresses; i++ {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ccApp, Name: fmt.Sprintf("svc-%03d", i)},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "x"}},
		}
		if err := client.IgnoreAlreadyExists(createRetrying(ctx, c, svc)); err != nil {
			return err
		}
		if err := client.IgnoreAlreadyExists(createRetrying(ctx, c, ccIngress(fmt.Sprintf("ing-%03d", i), "haproxy", fmt.Sprintf("h%03d.example", i), svc.Name))); err != nil {
			return err
		}
	}
	// The published rendering holds every backend: the stores are full.
	// It is the ConfigMap <config>-haproxy (docs/configcheck.md), named
	// here rather than imported: the load generator drives Gatehouse from
	// outside, as a user does.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, types.NamespacedName{Namespace: ccLB, Name: "edge-haproxy"}, cm)
		n := bytes.Count([]byte(cm.Data["haproxy.cfg"]), []byte("\nbackend be_"+ccApp))
		if err == nil && n == ccIngresses {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the rendering of %d Ingresses was not published (%d backends, %v)", ccIngresses, n, err)
		}
	}
	list := &networkingv1.IngressList{}
	if err := c.List(ctx, list, client.InNamespace(ccApp)); err != nil {
		return err
	}
	for i := range list.Items {
		ing := &list.Items[i]
		ing.APIVersion, ing.Kind = "networking.k8s.io/v1", "Ingress"
		f.stored = append(f.stored, ing)
	}
	return nil
}

func exampleConfig() (*unstructured.Unstructured, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "configcheck", "config.yaml"))
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	return u, yaml.Unmarshal(data, &u.Object)
}

// createRetrying creates obj, again for a minute while a just-installed CRD
// or a just-started webhook is not served yet. An object that exists is
// not retried: the error says so.
func createRetrying(ctx context.Context, c client.Client, obj client.Object) error {
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if err = c.Create(ctx, obj); err == nil || apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return err
}

func ccIngress(name, class, host, service string) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ccApp, Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(class),
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: service, Port: networkingv1.ServiceBackendPort{Number: 80}},
				}}},
			}}}},
		},
	}
}

// labelOnlyUpdate changes a label no template reads: admitted by the
// unchanged-input path, no rendering.
func (f *configcheckFixture) labelOnlyUpdate() scenario {
	return scenario{
		Name: "configcheck-ingress-label-update", Path: ccPath, Setup: f.setup,
		Next: func(i int) request {
			old := f.stored[i%len(f.stored)]
			updated := old.DeepCopy()
			updated.Labels = map[string]string{"bench": fmt.Sprint(i)}
			return request{Stream: "configcheck-label-update", Want: allowed, Body: ingressReview(i, "UPDATE", updated, old)}
		},
	}
}

// otherClassCreate creates an Ingress of another class: outside the
// config's fieldSelector before and after, admitted without rendering.
func (f *configcheckFixture) otherClassCreate() scenario {
	return scenario{
		Name: "configcheck-ingress-other-class", Path: ccPath, Setup: f.setup,
		Next: func(i int) request {
			ing := ccIngress(fmt.Sprintf("other-%d", i), "nginx", fmt.Sprintf("o%d.example", i), "absent")
			return request{Stream: "configcheck-other-class", Want: allowed, Body: ingressReview(i, "CREATE", ing, nil)}
		},
	}
}

// newHostUpdate moves an Ingress to a host never seen before: the whole
// path, rendering 100 Ingresses, haproxy -c (no verdict cache can answer)
// and the embedded tests' verdict.
func (f *configcheckFixture) newHostUpdate() scenario {
	var hosts atomic.Int64 // never the same host twice, across runs
	return scenario{
		Name: "configcheck-ingress-new-host", Path: ccPath, Setup: f.setup,
		Rate: 10, Requests: 500,
		// A backend Service that does not exist is refused with the
		// template's fail text: the probe shows rendering runs.
		Probe: func() []byte {
			old := f.stored[0]
			updated := old.DeepCopy()
			updated.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "absent"
			return ingressReview(-1, "UPDATE", updated, old)
		},
		ProbeWant: "Service 'absent' not found",
		Next: func(i int) request {
			old := f.stored[i%len(f.stored)]
			updated := old.DeepCopy()
			updated.Spec.Rules[0].Host = fmt.Sprintf("n%d.example", hosts.Add(1))
			return request{Stream: "configcheck-new-host", Want: allowed, Body: ingressReview(i, "UPDATE", updated, old)}
		},
	}
}

func ingressReview(i int, operation string, object, old *networkingv1.Ingress) []byte {
	obj, _ := json.Marshal(object)
	oldObj := []byte("null")
	if old != nil {
		oldObj, _ = json.Marshal(old)
	}
	return fmt.Appendf(nil, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-%d",`+
		`"kind":{"group":"networking.k8s.io","version":"v1","kind":"Ingress"},"resource":{"group":"networking.k8s.io","version":"v1","resource":"ingresses"},`+
		`"namespace":%q,"name":%q,"operation":%q,"userInfo":{"username":"bench"},"object":%s,"oldObject":%s}}`,
		i, object.Namespace, object.Name, operation, obj, oldObj)
}
