package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/testing/devenv"
)

// placementFixture is a release with a class and an application four
// ownership hops above a Pod: ReplicaSet → Deployment → Database (an
// operator's CR) → Application (CR, labelled by Flux with the release).
const placementFixture = `
apiVersion: v1
kind: Namespace
metadata: {name: bench-placement}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: databases.bench.gatehouse.dev}
spec:
  group: bench.gatehouse.dev
  scope: Namespaced
  names: {plural: databases, kind: Database, listKind: DatabaseList}
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: applications.bench.gatehouse.dev}
spec:
  group: bench.gatehouse.dev
  scope: Namespaced
  names: {plural: applications, kind: Application, listKind: ApplicationList}
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]
---
apiVersion: cozystack.io/v1alpha1
kind: AffinityClass
metadata: {name: bench-dc1}
spec: {nodeSelector: {topology.kubernetes.io/zone: zone-a}}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: bench-app
  namespace: bench-placement
  labels: {apps.cozystack.io/application.kind: Bench}
spec:
  values: {affinityClass: bench-dc1}
  interval: 1h
  chart: {spec: {chart: bench, sourceRef: {kind: HelmRepository, name: bench}}}
---
apiVersion: bench.gatehouse.dev/v1
kind: Application
metadata:
  name: app
  namespace: bench-placement
  labels: {helm.toolkit.fluxcd.io/name: bench-app}
---
apiVersion: bench.gatehouse.dev/v1
kind: Database
metadata: {name: db, namespace: bench-placement}
owner: Application/app
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: bench-placement}
owner: Database/db
spec:
  replicas: 0
  paused: true
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: registry.example/app:1}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-rs, namespace: bench-placement}
owner: Deployment/web
spec:
  replicas: 0
  selector: {matchLabels: {bench-rs: web}}
  template:
    metadata: {labels: {bench-rs: web}}
    spec: {containers: [{name: app, image: registry.example/app:1}]}
`

// placementPodCreate is the CREATE of a Pod made by the fixture's
// ReplicaSet that carries its class's selector: placement's allow path,
// a four-hop walk from the metadata caches, the release and the class from
// theirs, no API call.
func placementPodCreate() scenario {
	var rs *unstructured.Unstructured
	return scenario{
		Name: "placement-pod-create-4-hops",
		Path: "/validate-placement-pod",
		Setup: func(ctx context.Context, env *devenv.Env) error {
			var err error
			rs, err = applyWithOwners(ctx, env.ControlPlane.Client, placementFixture)
			if err != nil {
				return err
			}
			// Let Gatehouse's informers see the fixtures, and follow the
			// operator kinds the first Pods name (warm-up does that too).
			time.Sleep(2 * time.Second)
			return nil
		},
		// The same Pod without the class's selector is denied: the walk
		// reaches the release.
		Probe:     func() []byte { return podCreateReview(-1, string(rs.GetUID()), "") },
		ProbeWant: "missing required nodeSelector topology.kubernetes.io/zone=zone-a",
		Next: func(i int) request {
			return request{Stream: "placement-pod-create", Want: allowed,
				Body: podCreateReview(i, string(rs.GetUID()), `"nodeSelector":{"topology.kubernetes.io/zone":"zone-a"},`)}
		},
	}
}

// podCreateReview is the review kube-apiserver sends when the ReplicaSet
// controller creates a Pod of the fixture's ReplicaSet (uid).
func podCreateReview(i int, uid, nodeSelector string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-%d","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"bench-placement","operation":"CREATE","userInfo":{"username":"system:serviceaccount:kube-system:replicaset-controller"},"object":{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-rs-","namespace":"bench-placement","labels":{"bench-rs":"web"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-rs","uid":"%s","controller":true,"blockOwnerDeletion":true}]},"spec":{%s"containers":[{"name":"app","image":"registry.example/app:1","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","securityContext":{},"schedulerName":"default-scheduler","enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","priority":0}}}}`, i, uid, nodeSelector))
}

// applyWithOwners creates the documents in order; a document's top-level
// "owner: Kind/name" becomes an ownerReference to an object created before
// it. It returns the last object.
func applyWithOwners(ctx context.Context, c client.Client, docs string) (*unstructured.Unstructured, error) {
	created := map[string]*unstructured.Unstructured{}
	var last *unstructured.Unstructured
	for _, doc := range splitYAML(docs) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, err
		}
		if owner, ok := u.Object["owner"].(string); ok {
			delete(u.Object, "owner")
			o, found := created[owner]
			if !found {
				return nil, fmt.Errorf("owner %s not created before %s", owner, u.GetName())
			}
			u.SetOwnerReferences(append(u.GetOwnerReferences(), ownerRef(o)))
		}
		err := createRetrying(ctx, c, u)
		if apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, client.ObjectKeyFromObject(u), u)
		}
		if err != nil {
			return nil, fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		created[u.GetKind()+"/"+u.GetName()] = u
		last = u
	}
	return last, nil
}

func ownerRef(o *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID()}
}

func splitYAML(docs string) []string {
	var out []string
	for _, d := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(d) != "" {
			out = append(out, d)
		}
	}
	return out
}
