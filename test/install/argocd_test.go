package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// TestInstallAsArgoCDAndDeleteAsArgoCD installs the chart as Argo CD does
// (helm template, no cluster seen and no Helm hook run; the rendered
// objects applied server-side, the PreDelete hooks left out of the sync),
// checks Gatehouse serves through the Service, then deletes the
// Application as Argo CD does: its PreDelete hooks first (the uninstall
// Job, with its ServiceAccount and roles), removed once the Job succeeds
// (HookSucceeded), then every synced object. The cluster is left working:
// no webhook configuration of this install, no hook identity, and a
// deletion pvsafe refused before goes through.
func TestInstallAsArgoCDAndDeleteAsArgoCD(t *testing.T) {
	ctx := context.Background()
	const rel = "gatehouse-argo"
	fullname := deploymentName(rel)
	values := merge(onRealNode(), map[string]any{"replicaCount": 2})
	rendered := must(t, "helm", "template", rel, "charts/gatehouse", "--namespace", releaseNamespace, "--skip-tests",
		"-f", valuesFile(t, values))

	// Argo CD's split: hooks run at their phase, the rest is synced.
	var synced, preDelete []*unstructured.Unstructured
	docs, err := testenv.YAMLDocuments([]byte(rendered))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatal(err)
		}
		if len(obj.Object) == 0 {
			continue
		}
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
	if err := controlPlane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
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
