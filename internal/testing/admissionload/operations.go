package admissionload

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Operation is one admission the load sends, and what must come of it.
type Operation struct {
	// Name says what it does, e.g. "pvsafe: delete a claim on a Delete volume".
	Name   string
	Module string
	// Denial is the text a denial must carry; empty: it must be admitted.
	Denial string
	// Do sends it through kube-apiserver. An error wrapping errWrongAnswer
	// is an answer that came but is wrong (a conversion that did not
	// happen).
	Do func(ctx context.Context, c client.Client) error
}

// errWrongAnswer marks an answer kube-apiserver gave that a working
// Gatehouse would not have.
var errWrongAnswer = errors.New("wrong answer")

// Operations are the enabled modules' admissions, interleaved so that every
// few requests reach every module.
func Operations(modules ...string) []Operation {
	byModule := map[string][]Operation{
		"pvsafe":      pvsafeOperations(),
		"nodegroup":   nodegroupOperations(),
		"placement":   placementOperations(),
		"configcheck": configcheckOperations(),
	}
	var lists [][]Operation
	for _, m := range modules {
		lists = append(lists, byModule[m])
	}
	var out []Operation
	for i := 0; ; i++ {
		added := false
		for _, l := range lists {
			if i < len(l) {
				out = append(out, l[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

func pvsafeOperations() []Operation {
	deleteClaim := func(name string) func(context.Context, client.Client) error {
		return func(ctx context.Context, c client.Client) error {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: pvsafeNamespace, Name: name}}
			return c.Delete(ctx, pvc, client.DryRunAll)
		}
	}
	return []Operation{
		{Name: "pvsafe: delete a bound claim whose volume is deleted with it", Module: "pvsafe", Denial: PVSafeDenial, Do: deleteClaim("risky")},
		{Name: "pvsafe: delete a bound claim whose volume is retained", Module: "pvsafe", Do: deleteClaim("kept")},
	}
}

func nodeGroup(version string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "deckhouse.io", Version: version, Kind: "NodeGroup"})
	return u
}

func nodegroupOperations() []Operation {
	// read gets the stored v1 group through an older version: only the
	// conversion webhook can answer.
	read := func(version string) func(context.Context, client.Client) error {
		return func(ctx context.Context, c client.Client) error {
			ng := nodeGroup(version)
			if err := c.Get(ctx, client.ObjectKey{Name: storedNodeGroup}, ng); err != nil {
				return err
			}
			nodeType, _, _ := unstructured.NestedString(ng.Object, "spec", "nodeType")
			if ng.GetAPIVersion() != "deckhouse.io/"+version || nodeType != "Static" {
				return fmt.Errorf("%w: read through %s: apiVersion %s, nodeType %q", errWrongAnswer, version, ng.GetAPIVersion(), nodeType)
			}
			return nil
		}
	}
	create := func(version, cri string) func(context.Context, client.Client) error {
		return func(ctx context.Context, c client.Client) error {
			ng := nodeGroup(version)
			ng.SetName("load-dry-run")
			spec := map[string]any{"nodeType": "Static"}
			if cri != "" {
				spec["cri"] = map[string]any{"type": cri}
			}
			ng.Object["spec"] = spec
			return c.Create(ctx, ng, client.DryRunAll)
		}
	}
	return []Operation{
		{Name: "nodegroup: read a v1 group through v1alpha1", Module: "nodegroup", Do: read("v1alpha1")},
		{Name: "nodegroup: create a group with cri Docker", Module: "nodegroup", Denial: NodeGroupDenial, Do: create("v1", "Docker")},
		{Name: "nodegroup: create a Static group through v1alpha1", Module: "nodegroup", Do: create("v1alpha1", "")},
		{Name: "nodegroup: update a group through v1alpha2", Module: "nodegroup", Do: func(ctx context.Context, c client.Client) error {
			ng := nodeGroup("v1alpha2")
			if err := c.Get(ctx, client.ObjectKey{Name: storedNodeGroup}, ng); err != nil {
				return err
			}
			ng.SetLabels(map[string]string{"load": "update"})
			return c.Update(ctx, ng, client.DryRunAll)
		}},
		{Name: "nodegroup: read a v1 group through v1alpha2", Module: "nodegroup", Do: read("v1alpha2")},
	}
}

func placementOperations() []Operation {
	createPod := func(selector map[string]string) func(context.Context, client.Client) error {
		return func(ctx context.Context, c client.Client) error {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: "load-pod", Labels: map[string]string{"helm.toolkit.fluxcd.io/name": releaseName}},
				Spec:       corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			}
			return c.Create(ctx, pod, client.DryRunAll)
		}
	}
	return []Operation{
		{Name: "placement: create a release's Pod on its class's nodes", Module: "placement", Do: createPod(map[string]string{zoneKey: "zone-a"})},
		{Name: "placement: create a release's Pod anywhere", Module: "placement", Denial: PlacementDenial, Do: createPod(nil)},
	}
}

func configcheckOperations() []Operation {
	createIngress := func(service string) func(context.Context, client.Client) error {
		return func(ctx context.Context, c client.Client) error {
			ing := &networkingv1.Ingress{
				ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: "load-" + service},
				Spec: networkingv1.IngressSpec{
					IngressClassName: ptr.To("haproxy"),
					Rules: []networkingv1.IngressRule{{Host: service + ".load.example", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
						Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
							Service: &networkingv1.IngressServiceBackend{Name: service, Port: networkingv1.ServiceBackendPort{Number: 80}},
						}}},
					}}}},
				},
			}
			return c.Create(ctx, ing, client.DryRunAll)
		}
	}
	return []Operation{
		{Name: "configcheck: create an Ingress routing to its Service", Module: "configcheck", Do: createIngress("web")},
		{Name: "configcheck: create an Ingress routing to no Service", Module: "configcheck", Denial: ConfigcheckDenial, Do: createIngress("absent")},
	}
}
