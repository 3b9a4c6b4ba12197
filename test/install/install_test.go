package install

import (
	"context"
	"encoding/json"
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
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
	"github.com/gatehouse-dev/gatehouse/internal/testing/admissionload"
	"github.com/gatehouse-dev/gatehouse/internal/testing/linediff"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

// release is the suite's main install.
const release = "gatehouse"

var allModules = []string{"pvsafe", "nodegroup", "placement", "configcheck"}

// fullValues turn every module on, on the real node. The CA rotation's
// phases take seconds instead of ten minutes, so that one fits in an
// upgrade.
func fullValues() map[string]any {
	return merge(onRealNode(), map[string]any{
		"modules": map[string]any{
			"nodegroup":   map[string]any{"enabled": true},
			"placement":   map[string]any{"enabled": true},
			"configcheck": map[string]any{"enabled": true, "publishNamespaces": []any{"load-lb"}},
		},
		// configcheck's two render workers (256Mi each) beside the caches.
		"resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}},
		"extraArgs": []any{"--self-managed-certs-rotation-grace=5s"},
	})
}

// TestInstallUpgradeKillDrainUninstall is the day-one life of a release in
// the order a platform engineer lives it, on one cluster: install of the
// previous chart with every module on, a replica killed under load, a node
// drain, the upgrade to this chart with --reuse-values (and a CA rotation)
// under load, uninstall. Each step needs the one before; the first failure
// ends the test.
func TestInstallUpgradeKillDrainUninstall(t *testing.T) {
	steps := []struct {
		name string
		f    func(*testing.T)
	}{
		{"1 install: every module answers through the Service", installEveryModule},
		{"3 a replica killed hard under load", killOneReplicaUnderLoad},
		{"4 a drain: the PDB refuses the second eviction", evictTwoOfThree},
		{"2 and 7 upgrade from the previous chart under load with a CA rotation: zero failed admissions", upgradeUnderLoad},
		{"5 uninstall leaves a working cluster", uninstallLeavesAWorkingCluster},
	}
	// A failed step leaves the release installed: remove it, so that the
	// next test's install never runs beside it (the pvsafe bypass
	// ClusterRole's name is the same for every install).
	t.Cleanup(func() {
		if t.Failed() {
			dumpPods(t, release)
		}
		if _, err := tool(t, "helm", "status", release, "--namespace", releaseNamespace); err == nil {
			tool(t, "helm", "uninstall", release, "--namespace", releaseNamespace, "--wait", "--timeout", "5m")
		}
	})
	for _, s := range steps {
		if !t.Run(s.name, s.f) {
			t.FailNow()
		}
	}
}

func installEveryModule(t *testing.T) {
	ctx := context.Background()
	// configcheck's publish namespace holds the chart's Role: the platform
	// makes it first, as it would for its load balancer.
	if err := controlPlane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "load-lb"}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// The previous chart: step 7 upgrades from it (previousChartFile).
	chart, version := firstChart(t)
	must(t, "helm", append(append([]string{"install", release}, chart...), "--namespace", releaseNamespace, "--create-namespace",
		"-f", valuesFile(t, fullValues()), "--wait", "--timeout", "5m")...)
	waitRolledOut(t, release, 3)
	t.Logf("helm install of chart %s to 3 Ready replicas: %v", version, time.Since(start).Round(time.Second))
	if got := releasedChart(t); got != "gatehouse-"+version {
		t.Fatalf("the release runs chart %s, want gatehouse-%s", got, version)
	}
	if published != nil {
		// The real node pulled the published image: nothing was imported.
		for _, p := range pods(t, release) {
			for _, c := range p.Status.ContainerStatuses {
				if !strings.HasSuffix(c.ImageID, "@"+published.imageDigest) {
					t.Errorf("Pod %s container %s runs image %s, not the published %s@%s", p.Name, c.Name, c.ImageID, published.repository, published.imageDigest)
				}
			}
		}
	}

	// Every webhook and the conversion point at the Service.
	service := release + "-webhook"
	var vwcs admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := controlPlane.Client.List(ctx, &vwcs); err != nil {
		t.Fatal(err)
	}
	hooks := 0
	for _, c := range vwcs.Items {
		for _, w := range c.Webhooks {
			hooks++
			if w.ClientConfig.Service == nil || w.ClientConfig.Service.Name != service || w.ClientConfig.Service.Namespace != releaseNamespace {
				t.Errorf("webhook %s of %s is called at %+v, not through Service %s/%s", w.Name, c.Name, w.ClientConfig, releaseNamespace, service)
			}
		}
	}
	if hooks == 0 {
		t.Fatal("no validating webhook configured")
	}

	if err := admissionload.Setup(ctx, controlPlane.Client, allModules...); err != nil {
		t.Fatal(err)
	}
	// What a user sees through kubectl, one module at a time.
	poll(t, "pvsafe refuses deleting a bound claim on a Delete volume", time.Minute, func() error {
		out, err := tool(t, "kubectl", "-n", "load-pvsafe", "delete", "pvc", "risky", "--dry-run=server")
		return wantDenial(out, err, admissionload.PVSafeDenial)
	})
	poll(t, "a NodeGroup stored as v1 is read through v1alpha1", time.Minute, func() error {
		out, err := tool(t, "kubectl", "get", "nodegroups.v1alpha1.deckhouse.io", "load-static", "-o", "jsonpath={.apiVersion} {.spec.nodeType}")
		if err != nil || out != "deckhouse.io/v1alpha1 Static" {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	poll(t, "placement refuses a release's Pod outside its class", time.Minute, func() error {
		out, err := tool(t, "kubectl", "-n", "load-tenant", "run", "stray", "--image=registry.example/app:1", "--labels=helm.toolkit.fluxcd.io/name=load-db", "--dry-run=server")
		return wantDenial(out, err, admissionload.PlacementDenial)
	})
	poll(t, "configcheck refuses an Ingress to a missing Service", time.Minute, func() error {
		out, err := tool(t, "kubectl", "-n", "load-app", "create", "ingress", "stray", "--class=haproxy", "--rule=stray.example/*=absent:80", "--dry-run=server")
		return wantDenial(out, err, admissionload.ConfigcheckDenial)
	})
	must(t, "kubectl", "-n", "load-app", "create", "ingress", "web", "--class=haproxy", "--rule=web.example/*=web:80")
	poll(t, "configcheck publishes the rendering with the Ingress's backend", time.Minute, func() error {
		out, err := tool(t, "kubectl", "-n", "load-lb", "get", "configmap", configcheck.RenderedConfigMapName("edge"), "-o", `jsonpath={.data.haproxy\.cfg}`)
		if err != nil || !strings.Contains(out, "backend be_load-app_web_80") {
			return fmt.Errorf("%v: no backend be_load-app_web_80 in the rendering", err)
		}
		return nil
	})
	// The chart's own check, as a platform engineer runs it after an
	// install: `gatehouse selftest` in a Pod on the node, through the API
	// server (pvsafe refuses the probe volume's dry-run deletion).
	out := must(t, "helm", "test", release, "--namespace", releaseNamespace, "--timeout", "3m", "--logs")
	if !strings.Contains(out, "pvsafe refused the dry-run deletion") {
		t.Errorf("helm test passed without pvsafe's check:\n%s", out)
	}
}

// wantDenial: kubectl failed with the module's message.
func wantDenial(out string, err error, msg string) error {
	if err == nil || !strings.Contains(out, "denied the request") || !strings.Contains(out, msg) {
		return fmt.Errorf("want a denial with %q; got %v: %s", msg, err, out)
	}
	return nil
}

func startLoad(t *testing.T) *admissionload.Run {
	t.Helper()
	r, err := admissionload.Start(controlPlane.Config, admissionload.Options{Rate: loadRate(t), MaxInFlightPerModule: maxInFlightPerModule, Modules: allModules})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop() })
	return r
}

// maxInFlightPerModule bounds each module's admissions awaiting an answer.
// The load's configcheck admissions are one tenant's against one config,
// which a replica takes in turn and of which it refuses a ninth waiter
// (configcheck's maxTenantWaiting): on a machine slowed by other work after
// the rate was measured (CI's niced background builds, 17d2862), an
// unbounded load piled more than that on a replica and one was shed for
// the load, not for the kill, drain or upgrade the test is about. Below the
// bound, a slower machine slows the load instead.
const maxInFlightPerModule = 4

// maxLoadRate is the load's rate on a machine with room: the admissions a
// second that a busy cluster's webhook sees.
const maxLoadRate = 60

var (
	loadRateOnce  sync.Once
	loadRateValue float64
)

// loadRate is the rate the load tests send at: maxLoadRate, or a third of
// what this machine answers with four admissions at a time (measured once,
// in this run, against the installed release), whichever is lower. What
// the tests claim (no admission fails while replicas are killed, drained,
// upgraded and given a new CA) is about those events, not about speed: at
// a fixed rate, a machine busy with other work (make test-loaded, a
// contributor's build) answers slower than the load arrives, and
// admissions time out whatever the events do.
func loadRate(t *testing.T) float64 {
	t.Helper()
	loadRateOnce.Do(func() {
		probe, err := admissionload.Start(controlPlane.Config, admissionload.Options{Rate: 1000, MaxInFlight: 4, Modules: allModules})
		if err != nil {
			t.Fatal(err)
		}
		waitForAnswers(t, probe, 200, true)
		capacity := probe.Stop().Rate()
		loadRateValue = min(maxLoadRate, capacity/3)
		t.Logf("load rate: %.1f admissions/s (this machine answered %.1f/s with four at a time)", loadRateValue, capacity)
	})
	if loadRateValue <= 0 {
		t.Fatal("the load's rate could not be measured")
	}
	return loadRateValue
}

// waitForLoad waits until the load has answered n more admissions, none
// failed.
func waitForLoad(t *testing.T, r *admissionload.Run, n int) {
	t.Helper()
	waitForAnswers(t, r, n, true)
}

// waitForAnswers waits until the load has answered n more admissions;
// with noFailure, a failed one ends the test.
func waitForAnswers(t *testing.T, r *admissionload.Run, n int, noFailure bool) {
	t.Helper()
	from := r.Report().Sent()
	poll(t, fmt.Sprintf("%d admissions answered", n), time.Minute, func() error {
		rep := r.Report()
		if noFailure && rep.Failed > 0 {
			t.Fatalf("admissions failed:\n%s", rep)
		}
		if rep.Sent() < from+n {
			return fmt.Errorf("%d answered", rep.Sent()-from)
		}
		return nil
	})
}

func killOneReplicaUnderLoad(t *testing.T) {
	r := startLoad(t)
	waitForLoad(t, r, 120)
	victim := pods(t, release)[0]
	if len(victim.Status.ContainerStatuses) == 0 {
		t.Fatal("no container status")
	}
	restarts := victim.Status.ContainerStatuses[0].RestartCount
	containerID := strings.TrimPrefix(victim.Status.ContainerStatuses[0].ContainerID, "containerd://")
	inFlight := r.InFlight()
	killed := time.Now()
	// SIGKILL to the container's process, through containerd: no preStop,
	// no drain, the connections reset.
	if out, err := exec.Command("ctr", "--address", controlPlane.RealNode.ContainerdAddress, "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", containerID).CombinedOutput(); err != nil {
		t.Fatalf("kill %s: %v: %s", containerID, err, out)
	}
	var endpointsUpdated time.Time
	poll(t, "the killed replica leaves the Service's ready endpoints", time.Minute, func() error {
		ready, err := readyEndpoint(t, release+"-webhook", victim.Status.PodIP)
		if err != nil || ready {
			return fmt.Errorf("still ready (%v)", err)
		}
		endpointsUpdated = time.Now()
		return nil
	})
	// The load goes on on the two others (the failures are counted
	// below), then the killed one returns.
	waitForAnswers(t, r, 120, false)
	poll(t, "the killed replica restarted and Ready", 3*time.Minute, func() error {
		p := &corev1.Pod{}
		if err := controlPlane.Client.Get(context.Background(), client.ObjectKeyFromObject(&victim), p); err != nil {
			return err
		}
		if p.Status.ContainerStatuses[0].RestartCount == restarts || !podReady(p) {
			return fmt.Errorf("restarts %d, ready %v", p.Status.ContainerStatuses[0].RestartCount, podReady(p))
		}
		return nil
	})
	rep := r.Stop()
	during := rep.EndedBetween(killed, endpointsUpdated.Add(time.Hour))
	failures := during.Failures()
	var afterUpdate []admissionload.Result
	for _, f := range failures {
		if f.Start.After(endpointsUpdated) {
			afterUpdate = append(afterUpdate, f)
		}
	}
	// What could fail: the admissions in flight at the kill and those
	// sent before kube-apiserver saw the replica leave the endpoints (it
	// retries no call refused by a dead replica).
	exposed := 0
	for _, res := range rep.Results {
		if !res.Start.Before(killed) && res.Start.Before(endpointsUpdated) {
			exposed++
		}
	}
	t.Logf("hard kill: %d admissions in flight at the kill and %d sent before the endpoints update %v after it; %d failed, %d of them sent after the update; whole run: %s",
		inFlight, exposed, endpointsUpdated.Sub(killed).Round(time.Millisecond), len(failures), len(afterUpdate), rep)
	if len(failures) > inFlight+exposed {
		t.Fatalf("%d admissions failed at the kill, more than the %d in flight at the kill or sent before the endpoints update", len(failures), inFlight+exposed)
	}
	if rep.EndedBetween(rep.From, killed).Failed > 0 {
		t.Fatalf("admissions failed before the kill:\n%s", rep)
	}
	if len(afterUpdate) > 0 {
		t.Fatalf("%d admissions sent after the killed replica left the endpoints failed; first: %s", len(afterUpdate), afterUpdate[0].Message)
	}
}

func evictTwoOfThree(t *testing.T) {
	ctx := context.Background()
	waitRolledOut(t, release, 3)
	poll(t, "the PDB allows one disruption", time.Minute, func() error {
		var pdb policyv1.PodDisruptionBudget
		if err := controlPlane.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: release}, &pdb); err != nil {
			return err
		}
		if pdb.Status.ObservedGeneration < pdb.Generation || pdb.Status.CurrentHealthy != 3 || pdb.Status.DisruptionsAllowed != 1 {
			return fmt.Errorf("status %+v", pdb.Status)
		}
		return nil
	})
	all := pods(t, release)
	evict := func(p corev1.Pod) error {
		return controlPlane.Client.SubResource("eviction").Create(ctx, &p, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}})
	}
	// As kubectl drain does, one after the other; the second before the
	// first one's replacement is Ready.
	if err := evict(all[0]); err != nil {
		t.Fatalf("the first eviction: %v", err)
	}
	err := evict(all[1])
	if err == nil || !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "disruption budget") {
		t.Fatalf("the second eviction: %v; want it refused by the disruption budget", err)
	}
	t.Logf("second eviction refused: %v", err)
	waitRolledOut(t, release, 3)
}

func upgradeUnderLoad(t *testing.T) {
	ctx := context.Background()
	before := map[string]bool{}
	for _, p := range pods(t, release) {
		before[p.Name] = true
	}
	secret := release + "-serving-cert"
	caBefore := caBundle(t, secret)
	witnessBefore, err := admissionload.ReadWitness(ctx, controlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	r := startLoad(t)
	waitForLoad(t, r, 60)
	start := time.Now()
	// A CA rotation starts with the upgrade: its phases (new CA trusted,
	// served, old CA dropped) run across the leader's hand-over.
	must(t, "kubectl", "-n", releaseNamespace, "annotate", "secret", secret, certs.AnnotationRotateCA+"=now", "--overwrite")
	must(t, "helm", helmChart("upgrade", release, "--namespace", releaseNamespace, "--reuse-values",
		"--set-string", "podAnnotations.gatehouse\\.dev/restarted-at="+start.UTC().Format("20060102T150405Z"), "--wait", "--timeout", "8m")...)
	waitRolledOut(t, release, 3)
	if got, want := releasedChart(t), "gatehouse-"+currentChartVersion(t); got != want {
		t.Fatalf("after the upgrade the release runs chart %s, want %s", got, want)
	}
	for _, p := range pods(t, release) {
		if before[p.Name] {
			t.Fatalf("Pod %s was not replaced by the upgrade", p.Name)
		}
	}
	poll(t, "the CA rotation completed", 3*time.Minute, func() error {
		ca := caBundle(t, secret)
		if ca == caBefore || strings.Count(ca, "BEGIN CERTIFICATE") != 1 {
			return fmt.Errorf("the bundle holds %d CAs, changed: %v", strings.Count(ca, "BEGIN CERTIFICATE"), ca != caBefore)
		}
		return nil
	})
	took := time.Since(start)
	// The load goes on under the new replicas and the new CA alone.
	waitForLoad(t, r, 120)
	rep := r.Stop()
	witness, err := admissionload.ReadWitness(ctx, controlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	witness = witness.Sub(witnessBefore)
	t.Logf("upgrade of 3 replicas with a CA rotation: %v; load: %s; %s", took.Round(time.Second), rep, witness)
	if rep.Failed > 0 {
		t.Fatalf("%d admissions failed during the upgrade:\n%s", rep.Failed, rep)
	}
	if witness.Failures() > 0 {
		t.Fatalf("kube-apiserver counted failed webhook calls during the upgrade: %s", witness)
	}

	// --reset-then-reuse-values (the docs' upgrade command, which takes
	// today's defaults) renders what --reuse-values over the previous
	// chart's values rendered: every key that chart lacked was filled in
	// from today's defaults. Nothing changes, so nothing rolls.
	reused := must(t, "helm", "get", "manifest", release, "--namespace", releaseNamespace)
	must(t, "helm", helmChart("upgrade", release, "--namespace", releaseNamespace, "--reset-then-reuse-values", "--wait", "--timeout", "5m")...)
	reset := must(t, "helm", "get", "manifest", release, "--namespace", releaseNamespace)
	if reused != reset {
		t.Errorf("--reset-then-reuse-values renders otherwise than --reuse-values over the previous chart's values:\n%s", linediff.First("--reuse-values", reused, "--reset-then-reuse-values", reset))
	}
	// The chart's own check, on the chart upgraded to.
	out := must(t, "helm", "test", release, "--namespace", releaseNamespace, "--timeout", "3m", "--logs")
	if !strings.Contains(out, "pvsafe refused the dry-run deletion") {
		t.Errorf("helm test passed without pvsafe's check:\n%s", out)
	}
}

// releasedChart is the chart (name-version) the release runs, as helm
// list shows it.
func releasedChart(t *testing.T) string {
	t.Helper()
	out := must(t, "helm", "list", "--namespace", releaseNamespace, "--filter", "^"+release+"$", "--output", "json")
	var releases []struct {
		Chart string `json:"chart"`
	}
	if err := json.Unmarshal([]byte(out), &releases); err != nil || len(releases) != 1 {
		t.Fatalf("helm list: %v: %s", err, out)
	}
	return releases[0].Chart
}

// currentChartVersion is the version of the chart under test: the
// published release's, or charts/gatehouse's.
func currentChartVersion(t *testing.T) string {
	t.Helper()
	if published != nil {
		return published.version
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "charts", "gatehouse", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	return meta.Version
}

// caBundle is the CA bundle of the self-managed Secret.
func caBundle(t *testing.T, name string) string {
	t.Helper()
	var s corev1.Secret
	if err := controlPlane.Client.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	return string(s.Data["ca.crt"])
}

func uninstallLeavesAWorkingCluster(t *testing.T) {
	ctx := context.Background()
	must(t, "helm", "uninstall", release, "--namespace", releaseNamespace, "--wait", "--timeout", "5m")
	noWebhookPointsAtAMissingService(t)
	// A namespace with bound claims is deleted at once: no pvsafe left.
	if out, err := tool(t, "kubectl", "delete", "namespace", "load-pvsafe", "--wait=false"); err != nil {
		t.Fatalf("deleting a namespace with bound claims after uninstall: %v: %s", err, out)
	}
	// The kept NodeGroup CRD reads in every version.
	for _, v := range []string{"v1", "v1alpha2", "v1alpha1"} {
		if out, err := tool(t, "kubectl", "get", "nodegroups."+v+".deckhouse.io", "load-static", "-o", "name"); err != nil {
			t.Fatalf("reading a NodeGroup through %s after uninstall: %v: %s", v, err, out)
		}
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: "nodegroups.deckhouse.io"}, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Webhook != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		t.Fatalf("the kept CRD still converts through %+v", crd.Spec.Conversion.Webhook.ClientConfig)
	}
}

// noWebhookPointsAtAMissingService: every webhook configuration and CRD
// conversion that names a Service names one that exists.
func noWebhookPointsAtAMissingService(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	exists := func(ref *admissionregistrationv1.ServiceReference) bool {
		return controlPlane.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &corev1.Service{}) == nil
	}
	var vwcs admissionregistrationv1.ValidatingWebhookConfigurationList
	var mwcs admissionregistrationv1.MutatingWebhookConfigurationList
	if err := controlPlane.Client.List(ctx, &vwcs); err != nil {
		t.Fatal(err)
	}
	if err := controlPlane.Client.List(ctx, &mwcs); err != nil {
		t.Fatal(err)
	}
	for _, c := range vwcs.Items {
		for _, w := range c.Webhooks {
			if w.ClientConfig.Service != nil && !exists(w.ClientConfig.Service) {
				t.Errorf("ValidatingWebhookConfiguration %s, webhook %s: Service %s/%s is gone", c.Name, w.Name, w.ClientConfig.Service.Namespace, w.ClientConfig.Service.Name)
			}
		}
	}
	for _, c := range mwcs.Items {
		for _, w := range c.Webhooks {
			if w.ClientConfig.Service != nil && !exists(w.ClientConfig.Service) {
				t.Errorf("MutatingWebhookConfiguration %s, webhook %s: Service %s/%s is gone", c.Name, w.Name, w.ClientConfig.Service.Namespace, w.ClientConfig.Service.Name)
			}
		}
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := controlPlane.Client.List(ctx, &crds); err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds.Items {
		conv := crd.Spec.Conversion
		if conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil && conv.Webhook.ClientConfig.Service != nil {
			s := conv.Webhook.ClientConfig.Service
			if !exists(&admissionregistrationv1.ServiceReference{Namespace: s.Namespace, Name: s.Name}) {
				t.Errorf("CRD %s converts through Service %s/%s, which is gone", crd.Name, s.Namespace, s.Name)
			}
		}
	}
}

// TestInstallBesideAForeignNodeGroupCRD (6 and 7): a platform that owns
// nodegroups.deckhouse.io (Deckhouse) installs Gatehouse with nodegroup
// off and the serving certificate from its own Secret (certificates.mode
// secret): the install succeeds, leaves the foreign CRD alone, and
// Gatehouse serves through the Service.
func TestInstallBesideAForeignNodeGroupCRD(t *testing.T) {
	ctx := context.Background()
	const rel = "gatehouse-beside"
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: "nodegroups.deckhouse.io"}, crd); apierrors.IsNotFound(err) {
		// Alone (go test -run), the CRD comes from the repository.
		must(t, "kubectl", "apply", "-f", "config/crd/bases/deckhouse.io_nodegroups.yaml")
	} else if err != nil {
		t.Fatal(err)
	}
	// Another owner's: Deckhouse's release, as helm would mark it.
	must(t, "kubectl", "annotate", "crd", "nodegroups.deckhouse.io", "--overwrite",
		"meta.helm.sh/release-name=deckhouse", "meta.helm.sh/release-namespace=d8-system")
	must(t, "kubectl", "label", "crd", "nodegroups.deckhouse.io", "--overwrite", "app.kubernetes.io/managed-by=Helm", "heritage=deckhouse")
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: "nodegroups.deckhouse.io"}, crd); err != nil {
		t.Fatal(err)
	}
	owned := crd.ResourceVersion

	// The static certificate: a Secret the platform made for the Service.
	bundle, err := certs.SelfSigned(certs.ServiceDNSNames(deploymentName(rel)+"-webhook", releaseNamespace), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := controlPlane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	tlsSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: "platform-tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": bundle.ServingCert, "tls.key": bundle.ServingKey, "ca.crt": bundle.CACert},
	}
	if err := controlPlane.Client.Create(ctx, tlsSecret); err != nil {
		t.Fatal(err)
	}
	values := merge(onRealNode(), map[string]any{
		"replicaCount": 2,
		"modules":      map[string]any{"nodegroup": map[string]any{"enabled": false}},
		"certificates": map[string]any{"mode": "secret", "secret": map[string]any{"name": tlsSecret.Name}},
	})
	must(t, "helm", helmChart("install", rel, "--namespace", releaseNamespace, "-f", valuesFile(t, values), "--wait", "--timeout", "5m")...)
	waitRolledOut(t, rel, 2)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "beside-claims"}}
	if err := controlPlane.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	pv, pvc := testenv.PreBoundVolume(ns.Name, "data", "beside-pv", corev1.PersistentVolumeReclaimDelete)
	for _, obj := range []client.Object{pv, pvc} {
		if err := controlPlane.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, "pvsafe, served with the platform's certificate, refuses the claim's deletion", 2*time.Minute, func() error {
		out, err := tool(t, "kubectl", "-n", ns.Name, "delete", "pvc", pvc.Name, "--dry-run=server")
		return wantDenial(out, err, "would lose data permanently")
	})
	if err := controlPlane.Client.Get(ctx, client.ObjectKey{Name: "nodegroups.deckhouse.io"}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Annotations["meta.helm.sh/release-name"] != "deckhouse" {
		t.Fatalf("the foreign CRD changed hands: %v (resourceVersion %s, was %s)", crd.Annotations, crd.ResourceVersion, owned)
	}
	must(t, "helm", "uninstall", rel, "--namespace", releaseNamespace, "--wait", "--timeout", "5m")
	noWebhookPointsAtAMissingService(t)
	if err := controlPlane.Client.Delete(ctx, ns); err != nil {
		t.Fatalf("deleting a namespace with a bound claim after uninstall: %v", err)
	}
}
