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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// releaseNamespace is where the suite installs Gatehouse.
const releaseNamespace = "gatehouse-system"

// suite holds what the helpers share: the admin kubeconfig for helm and
// kubectl, and a directory for helm's state and values files.
var suite struct {
	once       sync.Once
	err        error
	dir        string
	kubeconfig string
}

func suiteDir(t *testing.T) string {
	t.Helper()
	suite.once.Do(func() {
		if suite.dir, suite.err = os.MkdirTemp("", "gatehouse-install-"); suite.err != nil {
			return
		}
		var kc []byte
		if kc, suite.err = controlPlane.AdminKubeconfig(); suite.err != nil {
			return
		}
		suite.kubeconfig = filepath.Join(suite.dir, "kubeconfig")
		suite.err = os.WriteFile(suite.kubeconfig, kc, 0o600)
	})
	if suite.err != nil {
		t.Fatal(suite.err)
	}
	return suite.dir
}

// tool runs a tool from bin/ (helm, kubectl) as cluster-admin of the
// suite's cluster and returns its combined output.
func tool(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd, cancel := toolCommand(t, name, args...)
	defer cancel()
	out, err := cmd.CombinedOutput()
	t.Logf("$ %s %s\n%s", name, strings.Join(args, " "), strings.TrimSpace(string(out)))
	return string(out), err
}

// render runs helm template (args after "template" by helmChart) and
// returns what it rendered: its standard output alone, since helm says on
// standard error what it pulled from a registry (make test-ci's install
// from a published chart).
func render(t *testing.T, args ...string) string {
	t.Helper()
	cmd, cancel := toolCommand(t, "helm", args...)
	defer cancel()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("$ helm %s\n%s", strings.Join(args, " "), strings.TrimSpace(stderr.String()))
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// toolCommand is the command tool and render run, with what cancels it.
func toolCommand(t *testing.T, name string, args ...string) (*exec.Cmd, context.CancelFunc) {
	t.Helper()
	dir := suiteDir(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", name), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+suite.kubeconfig, "HELM_CACHE_HOME="+filepath.Join(dir, "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(dir, "helm-config"), "HELM_DATA_HOME="+filepath.Join(dir, "helm-data"))
	return cmd, cancel
}

// must runs a tool that has to succeed.
func must(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := tool(t, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

// valuesFile writes chart values (YAML) for one helm call.
func valuesFile(t *testing.T, values map[string]any) string {
	t.Helper()
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(suiteDir(t), "values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// onRealNode are the values that put Gatehouse's Pods (and the chart's
// hook Jobs) on the real node, and pull a published release's image
// from where the suite published it.
func onRealNode() map[string]any {
	values := map[string]any{
		"nodeSelector": map[string]any{testenv.RealNodeLabel: "true"},
		"tolerations":  []any{map[string]any{"key": testenv.RealNodeTaint, "operator": "Exists", "effect": "NoSchedule"}},
	}
	if published != nil {
		// As docs/releasing.md installs a release from another registry
		// than the chart's default: the repository only (the tag is the
		// chart's appVersion).
		values["image"] = map[string]any{"repository": published.repository}
	}
	return values
}

// merge returns the maps merged, later ones winning, one level deep for
// nested maps (enough for chart values).
func merge(maps ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range maps {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				if prev, ok := out[k].(map[string]any); ok {
					out[k] = merge(prev, sub)
					continue
				}
			}
			out[k] = v
		}
	}
	return out
}

// poll calls f every 100 ms until it succeeds, for at most timeout: the
// suite waits for events, never for a fixed time.
func poll(t *testing.T, what string, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pods are the release's Gatehouse Pods.
func pods(t *testing.T, release string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := controlPlane.Client.List(context.Background(), &list, client.InNamespace(releaseNamespace),
		client.MatchingLabels{"app.kubernetes.io/instance": release, "app.kubernetes.io/name": "gatehouse"}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitRolledOut waits until the release's Deployment has replicas Pods,
// all Ready and of its current template, and no other.
func waitRolledOut(t *testing.T, release string, replicas int) {
	t.Helper()
	poll(t, "the Deployment rolled out", 5*time.Minute, func() error {
		var d appsv1.Deployment
		if err := controlPlane.Client.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: deploymentName(release)}, &d); err != nil {
			return err
		}
		s := d.Status
		if s.ObservedGeneration < d.Generation || int(s.UpdatedReplicas) != replicas || int(s.ReadyReplicas) != replicas || int(s.Replicas) != replicas {
			return fmt.Errorf("status %+v", s)
		}
		ready := 0
		all := pods(t, release)
		for i := range all {
			if podReady(&all[i]) {
				ready++
			}
		}
		if ready != replicas || len(all) != replicas {
			return fmt.Errorf("%d Pods, %d Ready", len(all), ready)
		}
		return nil
	})
}

// deploymentName is the chart's fullname for a release of chart
// "gatehouse": the release name when it contains the chart's name.
func deploymentName(release string) string {
	if strings.Contains(release, "gatehouse") {
		return release
	}
	return release + "-gatehouse"
}

// readyEndpoint says whether ip is a ready endpoint of the release's
// webhook Service, as kube-apiserver's endpoint routing sees it.
func readyEndpoint(t *testing.T, service, ip string) (bool, error) {
	var slices discoveryv1.EndpointSliceList
	if err := controlPlane.Client.List(context.Background(), &slices, client.InNamespace(releaseNamespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
		return false, err
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			for _, addr := range e.Addresses {
				if addr == ip {
					return e.Conditions.Ready == nil || *e.Conditions.Ready, nil
				}
			}
		}
	}
	return false, nil
}

// dumpPods logs what a failure needs: the release's Pods, their restarts
// and last termination, and the end of each container's previous and
// current log.
func dumpPods(t *testing.T, release string) {
	t.Helper()
	tool(t, "kubectl", "-n", releaseNamespace, "get", "pods,endpointslices", "-o", "wide")
	for _, p := range pods(t, release) {
		for _, c := range p.Status.ContainerStatuses {
			if term := c.LastTerminationState.Terminated; term != nil {
				t.Logf("Pod %s container %s restarted %d times; last: exit %d (%s) at %v", p.Name, c.Name, c.RestartCount, term.ExitCode, term.Reason, term.FinishedAt)
				tool(t, "kubectl", "-n", releaseNamespace, "logs", p.Name, "-c", c.Name, "--previous", "--tail=40")
			}
		}
		tool(t, "kubectl", "-n", releaseNamespace, "logs", p.Name, "--all-containers", "--tail=20")
	}
	// The node's and the API server's logs, kept where
	// GATEHOUSE_INSTALL_LOGS says (CI's artifacts): their directories go
	// with the control plane.
	if dir := os.Getenv("GATEHOUSE_INSTALL_LOGS"); dir != "" {
		for _, path := range []string{
			filepath.Join(controlPlane.RealNode.Dir, "kubelet.log"),
			filepath.Join(controlPlane.RealNode.Dir, "containerd.log"),
			filepath.Join(controlPlane.Dir, "kube-apiserver.log"),
		} {
			if b, err := os.ReadFile(path); err == nil {
				_ = os.WriteFile(filepath.Join(dir, filepath.Base(path)), b, 0o644)
			}
		}
	}
	// Why kube-apiserver failed its webhook calls, in its own words: the
	// load sees an admission a webhook with failurePolicy Ignore let
	// through only as "admitted"; the API server logs the call's error
	// (a timeout, a refused connection, Gatehouse's undecided answer).
	if b, err := os.ReadFile(filepath.Join(controlPlane.Dir, "kube-apiserver.log")); err == nil {
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "Failed calling webhook") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		t.Logf("kube-apiserver.log, its failed webhook calls (the last 20):\n%s", strings.Join(lines, "\n"))
	}
	// Why the kubelet stopped a container, in its own words.
	if b, err := os.ReadFile(filepath.Join(controlPlane.RealNode.Dir, "kubelet.log")); err == nil {
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, release+"-") && (strings.Contains(l, "ill") || strings.Contains(l, "robe") || strings.Contains(l, "xit")) {
				lines = append(lines, l)
			}
		}
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("kubelet.log, on the release's Pods:\n%s", strings.Join(lines, "\n"))
	}
}
