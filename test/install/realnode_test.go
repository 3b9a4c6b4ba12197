package install

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// kubectl runs bin/kubectl as a cluster admin and returns its combined
// output: what a user of the cluster reads.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	b, err := controlPlane.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "bin", "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}

// createNamespace creates a namespace and waits for its default
// ServiceAccount, without which the ServiceAccount admission plugin refuses
// Pods.
func createNamespace(t *testing.T, name string) {
	t.Helper()
	if err := createNamespaceWithServiceAccount(name); err != nil {
		t.Fatal(err)
	}
}

func createNamespaceWithServiceAccount(name string) error {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := controlPlane.Client.Create(ctx, ns); err != nil && !errors.IsAlreadyExists(err) {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := controlPlane.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: "default"}, &corev1.ServiceAccount{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s has no default ServiceAccount after a minute: %w", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitPodReady waits for the Pod's Ready condition and fails the test with
// its status and the kubelet's view when it does not come.
func waitPodReady(t *testing.T, ns, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var pod corev1.Pod
	for {
		err := controlPlane.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &pod)
		if err == nil {
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return &pod
				}
			}
		}
		if time.Now().After(deadline) {
			logs, _ := kubectl(t, "-n", ns, "logs", name, "--all-containers")
			t.Fatalf("Pod %s/%s not Ready after %s: phase %s, conditions %+v, containers %+v\nlogs:\n%s",
				ns, name, timeout, pod.Status.Phase, pod.Status.Conditions, pod.Status.ContainerStatuses, logs)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestRealNodeRunsGatehouseImage: a Pod from the imported Gatehouse image
// runs on the real node (the fake ones never start a container), and its
// log comes back through kube-apiserver from the kubelet at the node's
// address.
func TestRealNodeRunsGatehouseImage(t *testing.T) {
	ctx := context.Background()
	ns := "real-node-image"
	createNamespace(t, ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "version"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{
				Name: "version", Image: gatehouseImage, ImagePullPolicy: imagePullPolicy(), Args: []string{"version"},
			}},
			// Something long-running: the sandbox image, imported beside it.
			Containers: []corev1.Container{{
				Name: "idle", Image: pauseImage, ImagePullPolicy: corev1.PullNever,
			}},
			AutomountServiceAccountToken: ptr.To(false),
		},
	}
	testenv.PlaceOnRealNode(&pod.Spec)
	if err := controlPlane.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	ready := waitPodReady(t, ns, pod.Name, 2*time.Minute)
	if ready.Spec.NodeName != controlPlane.RealNode.Name {
		t.Fatalf("the Pod ran on %q, not the real node %q", ready.Spec.NodeName, controlPlane.RealNode.Name)
	}
	if ready.Status.PodIP == "" || ready.Status.HostIP != controlPlane.RealNode.IP {
		t.Fatalf("pod IP %q, host IP %q: want an address on the bridge and the node's %s", ready.Status.PodIP, ready.Status.HostIP, controlPlane.RealNode.IP)
	}
	out, err := kubectl(t, "-n", ns, "logs", pod.Name, "-c", "version")
	if err != nil {
		t.Fatalf("kubectl logs: %v: %s", err, out)
	}
	if !strings.HasPrefix(out, "gatehouse ") {
		t.Fatalf("kubectl logs of the version container printed %q, want gatehouse's version line", out)
	}
}

// pauseImage is the sandbox image, also usable as an idle container.
var pauseImage string

// servingGatehouse runs Gatehouse from its image on the real node, as the
// chart would in its managed mode (webhook configurations pointing at the
// Service), with pvsafe only and a serving certificate held in a Secret,
// and returns its Pod (not waiting for Ready: its /readyz waits for its
// caches, which it fills through the `kubernetes` Service from inside the
// Pod) and what removes it all, webhook configurations included: the test
// runs that at its end (it runs once), and before its own clean-up where
// that needs pvsafe gone. Nothing of it is left for the suite's next test,
// which may install the chart under the same names (TestTryItOnYourCluster).
func servingGatehouse(t *testing.T) (*corev1.Pod, func()) {
	t.Helper()
	pod, objs, err := startServingGatehouse()
	stop := sync.OnceFunc(func() { stopServingGatehouse(t, pod, objs) })
	t.Cleanup(stop)
	if err != nil {
		t.Fatal(err)
	}
	return pod, stop
}

// stopServingGatehouse deletes the Pod and waits until it is gone (alive,
// its drift repair would write the webhook configurations again), then its
// webhook configurations and the rest.
func stopServingGatehouse(t *testing.T, pod *corev1.Pod, objs []client.Object) {
	if pod == nil { // nothing was created
		return
	}
	ctx := context.Background()
	c := controlPlane.Client
	if err := client.IgnoreNotFound(c.Delete(ctx, pod, client.GracePeriodSeconds(0))); err != nil {
		t.Errorf("delete the serving Gatehouse's Pod: %v", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}) == nil {
		if time.Now().After(deadline) {
			t.Errorf("the serving Gatehouse's Pod %s/%s is not gone after 2 minutes", pod.Namespace, pod.Name)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	validating, mutating := webhookconfig.ConfigurationNames("") // the Pod names no --instance
	objs = append(objs,
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: validating}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: mutating}})
	for _, o := range objs {
		if err := client.IgnoreNotFound(c.Delete(ctx, o)); err != nil {
			t.Errorf("delete the serving Gatehouse's %T %s: %v", o, o.GetName(), err)
		}
	}
}

// startServingGatehouse creates what servingGatehouse runs: the Pod, and
// the objects beside it.
func startServingGatehouse() (*corev1.Pod, []client.Object, error) {
	ctx := context.Background()
	const ns, name = "gatehouse-system", "gatehouse"
	c := controlPlane.Client
	bundle, err := certs.SelfSigned(certs.ServiceDNSNames(name, ns), 24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	labels := map[string]string{"app.kubernetes.io/name": name}
	if err := createNamespaceWithServiceAccount(ns); err != nil {
		return nil, nil, err
	}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		// The chart's own roles are the chart suite's to prove; here the
		// path from the Pod to the API server is.
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "real-node-gatehouse"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-tls"},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"tls.crt": bundle.ServingCert, "tls.key": bundle.ServingKey, "ca.crt": bundle.CACert},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{
				Selector: labels,
				Ports:    []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(9443)}},
			},
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			ServiceAccountName: name,
			Containers: []corev1.Container{{
				Name: "gatehouse", Image: gatehouseImage, ImagePullPolicy: imagePullPolicy(),
				Args: []string{"serve", "--modules=pvsafe", "--namespace=" + ns,
					"--cert-secret=" + ns + "/" + name + "-tls", "--webhook-service=" + name,
					"--metrics-bind-address=0"},
				Ports: []corev1.ContainerPort{{Name: "https", ContainerPort: 9443}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(9443), Scheme: corev1.URISchemeHTTPS}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	testenv.PlaceOnRealNode(&pod.Spec)
	for _, o := range append(objs, pod) {
		if err := c.Create(ctx, o); err != nil && !errors.IsAlreadyExists(err) {
			return pod, objs, fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return pod, objs, nil
}

// TestPodReachesAPIServerThroughKubernetesService: Gatehouse in a Pod on
// the real node, with the in-cluster configuration (KUBERNETES_SERVICE_HOST,
// the `kubernetes` Service's ClusterIP, and the service-account token and
// CA), syncs its caches and becomes Ready.
func TestPodReachesAPIServerThroughKubernetesService(t *testing.T) {
	pod, _ := servingGatehouse(t)
	waitPodReady(t, pod.Namespace, pod.Name, 2*time.Minute)
	var svc corev1.Service
	if err := controlPlane.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &svc); err != nil {
		t.Fatal(err)
	}
	// The kubelet hands the Pod the Service's address: the path proven is
	// that one, not a host address.
	out, err := kubectl(t, "-n", pod.Namespace, "get", "pod", pod.Name, "-o", "jsonpath={.spec.nodeName}")
	if err != nil || out != controlPlane.RealNode.Name {
		t.Fatalf("gatehouse runs on %q (%v), want the real node %q", out, err, controlPlane.RealNode.Name)
	}
	if svc.Spec.ClusterIP == "" || strings.HasPrefix(svc.Spec.ClusterIP, "127.") {
		t.Fatalf("the kubernetes Service's ClusterIP is %q", svc.Spec.ClusterIP)
	}
}

// TestAPIServerCallsWebhookPodThroughService: kube-apiserver calls the
// webhook Service whose only endpoint is the Gatehouse Pod on the real
// node, and pvsafe's own denial (not a failed call, which failurePolicy
// Fail would also turn into a refusal) comes back through kubectl.
func TestAPIServerCallsWebhookPodThroughService(t *testing.T) {
	ctx := context.Background()
	pod, stop := servingGatehouse(t)
	waitPodReady(t, pod.Namespace, pod.Name, 2*time.Minute)
	ns := "real-node-data"
	createNamespace(t, ns)
	pv, pvc := testenv.PreBoundVolume(ns, "data", "real-node-data", corev1.PersistentVolumeReclaimDelete)
	for _, o := range []client.Object{pv, pvc} {
		if err := controlPlane.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// pvsafe would refuse these deletions: it goes first.
	t.Cleanup(func() {
		stop()
		for _, o := range []client.Object{pvc, pv, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}} {
			if err := client.IgnoreNotFound(controlPlane.Client.Delete(ctx, o)); err != nil {
				t.Errorf("delete %T %s: %v", o, o.GetName(), err)
			}
		}
	})
	// Until the claim is bound, pvsafe has nothing to protect; until the
	// managed configuration is written, nothing calls it.
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := kubectl(t, "delete", "namespace", ns, "--dry-run=server")
		if err != nil && strings.Contains(out, `admission webhook "pvsafe.gatehouse.dev" denied the request: DELETION BLOCKED:`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleting a namespace with a bound claim: err %v, output:\n%s\nwant pvsafe's denial, made by the Pod on the real node", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
