package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/app"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/pvsafe"
	"github.com/gatehouse-dev/gatehouse/internal/selftest"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// TestHelmTestChecksThroughTheAPIServer runs what the chart's helm test Pod
// runs (`gatehouse selftest`), as the test's own ServiceAccount bound to
// exactly the roles the chart renders for it, against a Gatehouse serving
// pvsafe through the real kube-apiserver: it passes, pvsafe's denial of the
// probe volume's dry-run deletion included, and leaves no volume. It fails
// when the webhook configuration is missing, and when the Deployment's
// replicas are not Ready. Its identity reaches nothing but its names.
func TestHelmTestChecksThroughTheAPIServer(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "helm-selftest")
	release := "st-" + randSuffix()
	fullname := release + "-gatehouse"
	testSA := fullname + "-selftest"

	// The chart's test identity, created as helm test would.
	for _, obj := range renderChartAs(t, release, ns) {
		if obj.GetAnnotations()["helm.sh/hook"] != "test" || obj.GetKind() == "Pod" {
			continue
		}
		if err := controlPlane.Client.Create(ctx, obj); err != nil {
			t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		t.Cleanup(func() { _ = controlPlane.Client.Delete(context.Background(), obj) })
	}
	cfg := rest.CopyConfig(controlPlane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + testSA,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}

	// The install's Deployment; its Pods are made Ready as a kubelet would
	// report them (the e2e control plane runs no kubelet), and the
	// Deployment's status follows through the controllers.
	labels := map[string]string{"app": fullname}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fullname},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "gatehouse", Image: "registry.example/gatehouse:test"}}},
			},
		},
	}
	if err := controlPlane.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	makeReady := func() {
		t.Helper()
		eventually(t, "the Deployment's Pods Ready", func() error {
			var pods corev1.PodList
			if err := controlPlane.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
				return err
			}
			if len(pods.Items) != 2 {
				return fmt.Errorf("%d Pods", len(pods.Items))
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				p.Status.Phase = corev1.PodRunning
				p.Status.Conditions = []corev1.PodCondition{
					{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
					{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
				}
				if err := controlPlane.Client.Status().Update(ctx, p); err != nil {
					return err
				}
			}
			return nil
		})
	}
	probe := selftest.Options{
		Config: cfg, Namespace: ns, Deployment: fullname, Volume: testSA, Timeout: 30 * time.Second,
	}
	probe.ValidatingConfiguration, _ = webhookconfig.ConfigurationNames(fullname)

	// No Pod Ready: the test fails, naming the replicas.
	if err := selftest.Run(ctx, withTimeout(probe, 2*time.Second)); err == nil || !strings.Contains(err.Error(), "0 of 2 replicas Ready") {
		t.Fatalf("selftest with no replica Ready: %v", err)
	}
	makeReady()
	// No webhook configuration (Gatehouse not running): the test fails.
	if err := selftest.Run(ctx, probe); err == nil || !strings.Contains(err.Error(), "validating webhook configuration") || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("selftest without a webhook configuration: %v", err)
	}

	startGatehouse(t, app.Options{
		Instance:  fullname,
		Catalogue: []module.Module{pvsafe.New(pvsafe.Options{})},
		Modules:   map[string]app.ModuleConfig{"pvsafe": {Enabled: true}},
	})
	var out bytes.Buffer
	probe.Out = &out
	if err := selftest.Run(ctx, probe); err != nil {
		t.Fatalf("selftest against a serving Gatehouse: %v\n%s", err, out.String())
	}
	for _, want := range []string{"every replica of deployment", "validating webhook configuration " + probe.ValidatingConfiguration, "pvsafe refused the dry-run deletion of probe volume " + testSA} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("selftest output lacks %q:\n%s", want, out.String())
		}
	}
	// Run again at once: the same name, while the first run's volume may
	// still be held by its protection finalizer.
	out.Reset()
	if err := selftest.Run(ctx, probe); err != nil {
		t.Fatalf("selftest run twice: %v\n%s", err, out.String())
	}

	// Deleted: gone once the volume protection controller lets it go.
	eventually(t, "the probe volume is gone", func() error {
		pv := &corev1.PersistentVolume{}
		if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: testSA}, pv); !apierrors.IsNotFound(err) {
			return fmt.Errorf("probe volume left behind (deleting since %v): %v", pv.DeletionTimestamp, err)
		}
		return nil
	})

	// As an attacker holding the test's token: nothing but its names.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	other := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "selftest-victim-" + randSuffix()},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "selftest.gatehouse.dev", VolumeHandle: "victim"}},
		},
	}
	if err := controlPlane.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = controlPlane.Client.Delete(context.Background(), other) })
	for what, err := range map[string]error{
		"delete another volume": cs.CoreV1().PersistentVolumes().Delete(ctx, other.Name, metav1.DeleteOptions{}),
		"create a volume by POST": func() error {
			_, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "selftest-intruder"}, Spec: other.Spec}, metav1.CreateOptions{})
			return err
		}(),
		"read another Deployment": func() error {
			_, err := cs.AppsV1().Deployments(ns).Get(ctx, "another", metav1.GetOptions{})
			return err
		}(),
		"read another webhook configuration": func() error {
			_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, webhookconfig.ValidatingName, metav1.GetOptions{})
			return err
		}(),
		"list Secrets": func() error {
			_, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		}(),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the helm test's identity could %s: %v", what, err)
		}
	}
}

func withTimeout(o selftest.Options, d time.Duration) selftest.Options {
	o.Timeout = d
	return o
}

// renderChartAs is renderChart with another release name.
func renderChartAs(t *testing.T, release, ns string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", release, "charts/gatehouse", "--namespace", ns}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return decodeRender(t, args)
}
