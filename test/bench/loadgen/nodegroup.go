package main

import (
	"fmt"
	"strings"
)

// storedNodeGroup is a v1 Static group as kube-apiserver stores and sends
// it: defaults applied, managed fields and a status. generation tells
// two versions of it apart.
func storedNodeGroup(generation int, maxPods int) string {
	return fmt.Sprintf(`{"apiVersion":"deckhouse.io/v1","kind":"NodeGroup","metadata":{"name":"bench-workers","uid":"5f1b2c3d-0000-4000-8000-000000000001",`+
		`"resourceVersion":"%d","generation":%d,"creationTimestamp":"2026-01-02T03:04:05Z","labels":{"team":"platform"},`+
		`"managedFields":[{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"deckhouse.io/v1","time":"2026-01-02T03:04:05Z","fieldsType":"FieldsV1",`+
		`"fieldsV1":{"f:spec":{".":{},"f:nodeType":{},"f:nodeTemplate":{".":{},"f:labels":{".":{},"f:role":{}}},"f:kubelet":{".":{},"f:maxPods":{}}}}}]},`+
		`"spec":{"nodeType":"Static","cri":{"type":"Containerd","containerd":{"maxConcurrentDownloads":3}},`+
		`"nodeTemplate":{"labels":{"role":"worker","node.deckhouse.io/pool":"general"}},`+
		`"disruptions":{"approvalMode":"Manual"},`+
		`"kubelet":{"maxPods":%d,"containerLogMaxSize":"50Mi","containerLogMaxFiles":4,"resourceReservation":{"mode":"Auto"}},"chaos":{"mode":"Disabled"}},`+
		`"status":{"ready":3,"nodes":3,"instances":3,"desired":3,"upToDate":3,"kubernetesVersion":"1.33",`+
		`"conditionSummary":{"ready":"True","statusMessage":""},"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:06:05Z"}]}}`,
		1000+generation, generation, maxPods)
}

// nodegroupValidateUpdate is an UPDATE of a Static group's kubelet
// settings: the policy webhook's allow path, every rule evaluated against
// the cluster state from the caches (configuration Secrets, endpoints,
// nodes of the group).
func nodegroupValidateUpdate() scenario {
	old, updated := storedNodeGroup(3, 110), storedNodeGroup(4, 120)
	return scenario{
		Name: "nodegroup-validate-update",
		Path: "/validate-nodegroup",
		Probe: func() []byte {
			return nodegroupReview(-1, old, strings.Replace(updated, `"nodeType":"Static"`, `"nodeType":"CloudStatic"`, 1))
		},
		// A changed nodeType is refused: the probe shows the rules run.
		ProbeWant: `"allowed":false`,
		Next: func(i int) request {
			return request{Stream: "nodegroup-validate-update", Want: allowed, Body: nodegroupReview(i, old, updated)}
		},
	}
}

func nodegroupReview(i int, old, updated string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-%d",`+
		`"kind":{"group":"deckhouse.io","version":"v1","kind":"NodeGroup"},"resource":{"group":"deckhouse.io","version":"v1","resource":"nodegroups"},`+
		`"requestKind":{"group":"deckhouse.io","version":"v1","kind":"NodeGroup"},"name":"bench-workers","operation":"UPDATE",`+
		`"userInfo":{"username":"bench"},"object":%s,"oldObject":%s}}`, i, updated, old)
}

// nodegroupConvert is the ConversionReview kube-apiserver sends to read a
// stored v1 group through v1alpha1: one object per review, as a GET, a
// watch or a write's fan-out sends it.
func nodegroupConvert() scenario {
	stored := storedNodeGroup(3, 110)
	return scenario{
		Name: "nodegroup-convert-v1-to-v1alpha1",
		Path: "/convert-nodegroup",
		Next: func(i int) request {
			return request{Stream: "nodegroup-convert", Want: `"status":"Success"`, Body: fmt.Appendf(nil,
				`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u-%d","desiredAPIVersion":"deckhouse.io/v1alpha1","objects":[%s]}}`,
				i, stored)}
		},
	}
}
