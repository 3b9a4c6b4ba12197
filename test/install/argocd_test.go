package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/testing/admissionload"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// TestInstallAsArgoCDAndDeleteAsArgoCD installs the chart as Argo CD does
// (helm template, no cluster seen and no Helm hook run; the rendered
// objects applied server-side, the PreDelete hooks left out of the sync),
// checks Gatehouse serves through the Service, turns configcheck off with
// pruning on as Argo CD and Flux prune (its CRD, its config and the
// configuration it published stay: docs/gitops.md), then deletes the
// Application as Argo CD does: its PreDelete hooks first (the uninstall
// Job, with its ServiceAccount and roles), removed once the Job succeeds
// (HookSucceeded), then every synced object. The cluster is left working:
// no webhook configuration of this install, no hook identity, and a
// deletion pvsafe refused before goes through.
func TestInstallAsArgoCDAndDeleteAsArgoCD(t *testing.T) {
	ctx := context.Background()
	const rel = "gatehouse-argo"
	fullname := deploymentName(rel)
	// configcheck on, so that turning it off under pruning has data to lose.
	values := merge(onRealNode(), map[string]any{
		"replicaCount": 2,
		"modules":      map[string]any{"configcheck": map[string]any{"enabled": true, "publishNamespaces": []any{"load-lb"}}},
		"resources":    map[string]any{"limits": map[string]any{"memory": "1Gi"}},
	})
	synced, preDelete := renderAsArgoCD(t, rel, values)
	dir := t.TempDir()
	write := func(name string, objs []*unstructured.Unstructured) string {
		t.Helper()
		var buf bytes.Buffer
		for _, o := range objs {
			data, err := yaml.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			buf.WriteString("---\n")
			buf.Write(data)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	syncedFile, hooksFile := write("synced.yaml", synced), write("predelete.yaml", preDelete)
	// configcheck's publish namespace holds the chart's Role: the platform
	// makes it first.
	for _, ns := range []string{releaseNamespace, "load-lb"} {
		if err := controlPlane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	// The config CRD is left behind on purpose (Prune=false,Delete=false):
	// the test removes it when it made it, so that a later helm install can
	// own it.
	crdName := "haproxytemplateconfigs.gatehouse.dev"
	crdBefore := controlPlane.Client.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{}) == nil
	t.Cleanup(func() {
		if err := admissionload.Teardown(context.Background(), controlPlane.Client); err != nil {
			t.Error(err)
		}
		if !crdBefore {
			_ = controlPlane.Client.Delete(context.Background(), &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName}})
		}
	})
	// A failure leaves nothing for the next test.
	t.Cleanup(func() {
		if t.Failed() {
			dumpPods(t, rel)
			tool(t, "kubectl", "delete", "-f", hooksFile, "--ignore-not-found", "--wait=false")
			tool(t, "kubectl", "delete", "-f", syncedFile, "--ignore-not-found", "--wait=false")
			for _, name := range []string{fullname + "-validating", fullname + "-mutating"} {
				_ = controlPlane.Client.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}})
				_ = controlPlane.Client.Delete(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}})
			}
		}
	})

	// Sync: server-side apply, as Argo CD's ServerSideApply=true does.
	must(t, "kubectl", "apply", "--server-side", "--field-manager=argocd-controller", "-f", syncedFile)
	waitRolledOut(t, rel, 2)
	validating, _ := webhookconfig.ConfigurationNames(fullname)
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: validating}, &admissionregistrationv1.ValidatingWebhookConfiguration{}); err != nil {
		t.Fatalf("Gatehouse wrote no configuration %s: %v", validating, err)
	}
	// pvsafe answers through the Service: a volume it protects.
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: rel + "-probe"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "argo-probe",
			ClaimRef:                      &corev1.ObjectReference{Namespace: releaseNamespace, Name: rel + "-probe"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "probe.gatehouse.dev", VolumeHandle: rel}},
		},
	}
	if err := controlPlane.Client.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = controlPlane.Client.Patch(context.Background(), pv, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}`)))
		_ = controlPlane.Client.Delete(context.Background(), pv)
	})
	poll(t, "pvsafe refuses deleting an Available volume with reclaimPolicy Delete", 2*time.Minute, func() error {
		out, err := tool(t, "kubectl", "delete", "pv", pv.Name, "--dry-run=server")
		if err == nil || !strings.Contains(out, "reclaimPolicy Delete deletes the volume") {
			return fmt.Errorf("want pvsafe's denial: %v: %s", err, out)
		}
		return nil
	})

	// Turn configcheck off, with auto-prune on: Argo CD applies the new
	// render, then deletes what the Application had and the render no
	// longer has, but for what says Prune=false; Flux's kustomize-controller
	// the same, but for what says kustomize.toolkit.fluxcd.io/prune:
	// disabled. The CRD carries both, so the config and the configuration
	// it published stay (their owner, the CRD, is not deleted).
	if err := admissionload.Setup(ctx, controlPlane.Client, "configcheck"); err != nil {
		t.Fatal(err)
	}
	published := configcheck.RenderedConfigMapName("edge")
	poll(t, "configcheck publishes the example config's rendering", 2*time.Minute, func() error {
		return controlPlane.Client.Get(ctx, client.ObjectKey{Namespace: "load-lb", Name: published}, &corev1.ConfigMap{})
	})
	off := merge(values, map[string]any{"modules": map[string]any{"configcheck": map[string]any{"enabled": false}}})
	syncedOff, preDeleteOff := renderAsArgoCD(t, rel, off)
	syncedOffFile := write("synced-off.yaml", syncedOff)
	must(t, "kubectl", "apply", "--server-side", "--field-manager=argocd-controller", "-f", syncedOffFile)
	pruned := prunedAsArgoCDAndFlux(t, synced, syncedOff)
	if len(pruned) == 0 {
		t.Fatal("turning configcheck off prunes nothing: its RBAC at least should go")
	}
	must(t, "kubectl", "delete", "--wait", "--timeout=5m", "-f", write("pruned.yaml", pruned))
	waitRolledOut(t, rel, 2)
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Fatalf("configcheck's CRD was pruned with the module: %v", err)
	}
	config := &unstructured.Unstructured{}
	config.SetGroupVersionKind(gatehousev1alpha1.GroupVersion.WithKind("HAProxyTemplateConfig"))
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Namespace: "load-lb", Name: "edge"}, config); err != nil {
		t.Errorf("the config went with the module: %v", err)
	}
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Namespace: "load-lb", Name: published}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the published configuration went with the module: %v", err)
	}
	// The hooks as docs/gitops.md has a user render them where Argo CD
	// runs no PreDelete hook: helm template --show-only.
	hooksOff := render(t, helmChart("template", rel, "--namespace", releaseNamespace,
		"-f", valuesFile(t, off), "--show-only", "templates/uninstall-hook.yaml")...)
	if got, want := objectKeys(t, hooksOff), objectKeys(t, "", preDeleteOff...); !slices.Equal(got, want) {
		t.Fatalf("--show-only templates/uninstall-hook.yaml renders %v, the PreDelete hooks are %v", got, want)
	}
	hooksFile = filepath.Join(dir, "uninstall.yaml")
	if err := os.WriteFile(hooksFile, []byte(hooksOff), 0o600); err != nil {
		t.Fatal(err)
	}
	syncedFile = syncedOffFile

	// Delete the Application: PreDelete hooks, then the synced objects.
	must(t, "kubectl", "apply", "--server-side", "--field-manager=argocd-controller", "-f", hooksFile)
	must(t, "kubectl", "-n", releaseNamespace, "wait", "--for=condition=Complete", "job/"+fullname+"-uninstall", "--timeout=5m")
	must(t, "kubectl", "delete", "-f", hooksFile, "--wait")
	must(t, "kubectl", "delete", "-f", syncedFile, "--wait", "--timeout=5m")

	for _, name := range []string{fullname + "-validating", fullname + "-mutating"} {
		if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingWebhookConfiguration{}); err == nil {
			t.Errorf("ValidatingWebhookConfiguration %s outlived the Application", name)
		}
		if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.MutatingWebhookConfiguration{}); err == nil {
			t.Errorf("MutatingWebhookConfiguration %s outlived the Application", name)
		}
	}
	noWebhookPointsAtAMissingService(t)
	if out, err := tool(t, "kubectl", "delete", "pv", pv.Name, "--dry-run=server"); err != nil {
		t.Errorf("deleting the volume pvsafe guarded, after the Application is gone: %v: %s", err, out)
	}
	if out, err := tool(t, "kubectl", "get", "clusterroles,clusterrolebindings,serviceaccounts,roles,rolebindings", "-A",
		"-l", "app.kubernetes.io/instance="+rel, "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("RBAC of the install left behind: %v: %s", err, out)
	}
}

// renderAsArgoCD renders the chart as Argo CD does and splits it as Argo
// CD does: hooks run at their phase, the rest is synced.
func renderAsArgoCD(t *testing.T, rel string, values map[string]any) (synced, preDelete []*unstructured.Unstructured) {
	t.Helper()
	rendered := render(t, helmChart("template", rel, "--namespace", releaseNamespace, "--skip-tests",
		"-f", valuesFile(t, values))...)
	for _, obj := range decodeObjects(t, rendered) {
		a := obj.GetAnnotations()
		switch {
		case a["argocd.argoproj.io/hook"] == "PreDelete":
			preDelete = append(preDelete, obj)
		case a["argocd.argoproj.io/hook"] != "" || a["helm.sh/hook"] != "":
			t.Fatalf("%s %s: a hook Argo CD would run at another phase: %v", obj.GetKind(), obj.GetName(), a)
		default:
			synced = append(synced, obj)
		}
	}
	if len(preDelete) == 0 {
		t.Fatal("no PreDelete hook rendered")
	}
	return synced, preDelete
}

// prunedAsArgoCDAndFlux are the objects of before that after no longer has
// and that pruning deletes: Argo CD keeps what says Prune=false among its
// sync options, Flux's kustomize-controller what says
// kustomize.toolkit.fluxcd.io/prune: disabled. The chart marks the same
// objects for both; an object one tool would keep and the other delete is
// an error.
func prunedAsArgoCDAndFlux(t *testing.T, before, after []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	key := func(o *unstructured.Unstructured) string {
		return o.GroupVersionKind().GroupKind().String() + "/" + o.GetNamespace() + "/" + o.GetName()
	}
	kept := map[string]bool{}
	for _, o := range after {
		kept[key(o)] = true
	}
	var pruned []*unstructured.Unstructured
	for _, o := range before {
		if kept[key(o)] {
			continue
		}
		a := o.GetAnnotations()
		argo := slices.Contains(strings.Split(strings.ReplaceAll(a["argocd.argoproj.io/sync-options"], " ", ""), ","), "Prune=false")
		flux := a["kustomize.toolkit.fluxcd.io/prune"] == "disabled"
		if argo != flux {
			t.Errorf("%s: Argo CD keeps it %v, Flux keeps it %v", key(o), argo, flux)
		}
		if !argo {
			pruned = append(pruned, o)
		}
	}
	return pruned
}

// objectKeys are the kinds and names of the objects rendered in text and
// of objs, sorted.
func objectKeys(t *testing.T, text string, objs ...*unstructured.Unstructured) []string {
	t.Helper()
	objs = append(objs, decodeObjects(t, text)...)
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	slices.Sort(keys)
	return keys
}

// decodeObjects are the objects of a multi-document YAML text, empty
// documents left out.
func decodeObjects(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	docs, err := testenv.YAMLDocuments([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatal(err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	return objs
}
