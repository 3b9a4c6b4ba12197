package admissionload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// Names of the fixtures, all prefixed "load-": cluster-scoped ones are
// shared by every Load of one cluster, as are the namespaces.
const (
	pvsafeNamespace = "load-pvsafe"
	tenantNamespace = "load-tenant"
	lbNamespace     = "load-lb"
	appNamespace    = "load-app"
	affinityClass   = "load-zone-a"
	releaseName     = "load-db"
	storedNodeGroup = "load-static"
	zoneKey         = "topology.kubernetes.io/zone"
)

// The modules' own words for the denials the load expects. A denial without
// them is a failure: Gatehouse denied for a reason nobody asked about.
const (
	PVSafeDenial      = "would lose data permanently"
	NodeGroupDenial   = "it is forbidden to set cri type to Docker"
	PlacementDenial   = "missing required nodeSelector " + zoneKey + "=zone-a"
	ConfigcheckDenial = "Service 'absent' not found"
)

// placementFixtures: a class, a tenant allowed to use it and a release of
// that tenant with it. Pods labelled with the release are checked against
// the class (placement's lineage ends at the release at once).
const placementFixtures = `
apiVersion: v1
kind: Namespace
metadata: {name: load-tenant}
---
apiVersion: cozystack.io/v1alpha1
kind: AffinityClass
metadata: {name: load-zone-a}
spec: {nodeSelector: {topology.kubernetes.io/zone: zone-a}}
---
apiVersion: v1
kind: Secret
metadata: {name: cozystack-values, namespace: load-tenant}
stringData:
  values.yaml: |
    _namespace:
      defaultAffinityClass: load-zone-a
      allowedAffinityClasses: [load-zone-a]
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: load-db
  namespace: load-tenant
  labels: {apps.cozystack.io/application.kind: Postgres}
spec:
  interval: 1h
  chart: {spec: {chart: postgres, sourceRef: {kind: HelmRepository, name: cozystack}}}
  values: {affinityClass: load-zone-a}
`

// nodegroupFixtures: a Static group stored (as v1), read through the older
// versions by the load.
const nodegroupFixtures = `
apiVersion: deckhouse.io/v1
kind: NodeGroup
metadata: {name: load-static}
spec: {nodeType: Static, nodeTemplate: {labels: {role: load}}}
`

// configcheckFixtures: the namespaces and the Service the example config's
// Ingresses route to; the config itself is examples/configcheck's, moved to
// load-lb.
const configcheckFixtures = `
apiVersion: v1
kind: Namespace
metadata: {name: load-lb}
---
apiVersion: v1
kind: Namespace
metadata: {name: load-app}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: load-app}
spec: {ports: [{port: 80}], selector: {app: web}}
`

// Setup creates the fixtures of the enabled modules (names as in
// --modules: pvsafe, nodegroup, placement, configcheck) through c, each
// retried for a few minutes while a webhook or a CRD is not served yet, and
// existing ones kept, so that several loads share them. It waits until
// what the operations read is in place (claims bound).
func Setup(ctx context.Context, c client.Client, modules ...string) error {
	for _, m := range modules {
		var err error
		switch m {
		case "pvsafe":
			err = setupPVSafe(ctx, c)
		case "nodegroup":
			err = apply(ctx, c, nodegroupFixtures)
		case "placement":
			err = apply(ctx, c, placementFixtures)
		case "configcheck":
			err = setupConfigcheck(ctx, c)
		default:
			err = fmt.Errorf("unknown module %q", m)
		}
		if err != nil {
			return fmt.Errorf("admissionload: %s fixtures: %w", m, err)
		}
	}
	return nil
}

// setupPVSafe makes two bound claims: "risky" on a volume deleted with it
// (its deletion must be refused), "kept" on a volume that is retained (its
// deletion is allowed).
func setupPVSafe(ctx context.Context, c client.Client) error {
	if err := createOrKeep(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pvsafeNamespace}}); err != nil {
		return err
	}
	for claim, policy := range map[string]corev1.PersistentVolumeReclaimPolicy{
		"risky": corev1.PersistentVolumeReclaimDelete,
		"kept":  corev1.PersistentVolumeReclaimRetain,
	} {
		pv, pvc := testenv.PreBoundVolume(pvsafeNamespace, claim, "load-pv-"+claim, policy)
		for _, obj := range []client.Object{pv, pvc} {
			if err := createOrKeep(ctx, c, obj); err != nil {
				return err
			}
		}
	}
	// pvsafe decides from the claim's phase: wait for the binder.
	return poll(ctx, 2*time.Minute, func() error {
		for _, claim := range []string{"risky", "kept"} {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: pvsafeNamespace, Name: claim}, pvc); err != nil {
				return err
			}
			if pvc.Status.Phase != corev1.ClaimBound {
				return fmt.Errorf("claim %s is %q, not Bound", claim, pvc.Status.Phase)
			}
		}
		return nil
	})
}

func setupConfigcheck(ctx context.Context, c client.Client) error {
	if err := apply(ctx, c, configcheckFixtures); err != nil {
		return err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "configcheck", "config.yaml"))
	if err != nil {
		return err
	}
	cfg := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &cfg.Object); err != nil {
		return err
	}
	cfg.SetNamespace(lbNamespace)
	return createOrKeep(ctx, c, cfg)
}

// apply creates the YAML documents in order, keeping those that exist.
func apply(ctx context.Context, c client.Client, docs string) error {
	for _, doc := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return err
		}
		if err := createOrKeep(ctx, c, u); err != nil {
			return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// createOrKeep creates obj, retrying for three minutes while its CRD or a
// webhook it goes through is not served yet; an existing object is kept.
func createOrKeep(ctx context.Context, c client.Client, obj client.Object) error {
	return poll(ctx, 3*time.Minute, func() error {
		err := c.Create(ctx, obj.DeepCopyObject().(client.Object))
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// poll calls f until it succeeds or timeout passes, and returns its last
// error then.
func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
