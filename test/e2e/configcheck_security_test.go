package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck"
)

// tenantClient is a client acting as a user who may only edit namespace
// (ClusterRole edit bound there), through kube-apiserver's impersonation.
func tenantClient(t *testing.T, namespace string) (client.Client, string) {
	t.Helper()
	user := "tenant-" + randSuffix()
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := controlPlane.Client.Create(context.Background(), binding); err != nil {
		t.Fatal(err)
	}
	return impersonated(t, user), user
}

// postObjectReview posts an AdmissionReview for obj straight to Gatehouse's port,
// as a client without any Kubernetes identity would, and returns the
// response.
func postObjectReview(t *testing.T, g interface {
	Post(string, string, io.Reader) (*http.Response, error)
}, url string, kind metav1.GroupVersionKind, resource metav1.GroupVersionResource, namespace string, user authenticationv1.UserInfo, obj runtime.Object) *admissionv1.AdmissionResponse {
	t.Helper()
	body := createReview(t, kind, resource, namespace, user, obj)
	resp, err := g.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	out := admissionv1.AdmissionReview{}
	if err := json.Unmarshal(data, &out); err != nil || out.Response == nil {
		t.Fatalf("response %s: %v", data, err)
	}
	return out.Response
}

// TestConfigcheckLuaInAConfigRunsNothing plays the attacker of the review: a
// client with no Kubernetes identity posts a config CREATE whose rendering
// loads Lua that writes files and starts a process. Before, haproxy -c ran
// it as Gatehouse's user while checking the embedded tests.
func TestConfigcheckLuaInAConfigRunsNothing(t *testing.T) {
	g := startConfigcheckGatehouse(t)
	marker := filepath.Join(os.TempDir(), "gatehouse-lua-"+randSuffix())
	t.Cleanup(func() { _ = os.Remove(marker); _ = os.Remove(marker + "-exec") })
	lua := fmt.Sprintf(`local f = io.open(%q, "w") if f then f:write("ran") f:close() end
os.execute("touch %s-exec")
`, marker, marker)
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatehousev1alpha1.GroupVersion.String(), Kind: "HAProxyTemplateConfig"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "attacker", Name: "lua"},
		Spec: gatehousev1alpha1.HAProxyTemplateConfigSpec{
			WatchedResources: map[string]gatehousev1alpha1.WatchedResource{
				"services": {APIVersion: "v1", Resources: "services"},
			},
			HAProxyConfig: gatehousev1alpha1.Template{Template: "global\n  default-path config\n  lua-load general/x.lua\ndefaults\n  mode http\n  timeout client 5s\n  timeout server 5s\n  timeout connect 5s\n"},
			Files:         map[string]gatehousev1alpha1.Template{"x.lua": {Template: lua}},
			ValidationTests: map[string]gatehousev1alpha1.ValidationTest{
				"runs-haproxy": {Assertions: []gatehousev1alpha1.Assertion{{Type: "haproxy_valid"}}},
			},
		},
	}
	post := func(user authenticationv1.UserInfo) *admissionv1.AdmissionResponse {
		return postObjectReview(t, g.HTTPClient, g.URL+configcheck.ConfigWebhookPath,
			metav1.GroupVersionKind{Group: gatehousev1alpha1.GroupVersion.Group, Version: gatehousev1alpha1.GroupVersion.Version, Kind: "HAProxyTemplateConfig"},
			metav1.GroupVersionResource{Group: gatehousev1alpha1.GroupVersion.Group, Version: gatehousev1alpha1.GroupVersion.Version, Resource: "haproxytemplateconfigs"},
			"attacker", user, cfg)
	}
	// No identity at all: refused before anything is compiled or run.
	if resp := post(authenticationv1.UserInfo{}); resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "names no user") {
		t.Errorf("a config posted without a user: %+v", resp.Result)
	}
	// The port authenticates no client yet, so the attacker forges a
	// cluster administrator: the embedded tests run, haproxy -c with them.
	resp := post(authenticationv1.UserInfo{Username: "system:admin", Groups: []string{"system:masters"}})
	if resp.Allowed {
		t.Errorf("a config loading Lua was admitted")
	}
	if resp.Result == nil || !strings.Contains(resp.Result.Message, "lua-load") || !strings.Contains(resp.Result.Message, "haproxy.cfg:3") {
		t.Errorf("the denial does not name the lua-load line: %+v", resp.Result)
	}

	// The same config without tests is refused too, through the API
	// server: its rendering of the cluster's current state meets the
	// policy.
	if err := gatehousev1alpha1.AddToScheme(controlPlane.Client.Scheme()); err != nil {
		t.Fatal(err)
	}
	stored := cfg.DeepCopy()
	stored.Namespace = namespace(t, "lua")
	stored.Spec.ValidationTests = nil
	eventually(t, "the config without tests is refused", func() error {
		// A dry run: whatever answers, nothing is stored.
		err := controlPlane.Client.Create(context.Background(), stored.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "current state fails") || !strings.Contains(err.Error(), "lua-load") {
			return fmt.Errorf("got %v", err)
		}
		return nil
	})
	// One that loads Lua only once a Service it watches exists is stored;
	// when one does, the leader's publication meets the policy: nothing is
	// checked, published or run, and the status says why.
	stored.Spec.WatchedResources = map[string]gatehousev1alpha1.WatchedResource{
		"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"kubernetes.io/metadata.name": stored.Namespace}}},
	}
	// (With a listener: haproxy -c refuses a configuration without one.)
	stored.Spec.HAProxyConfig.Template = strings.Replace(stored.Spec.HAProxyConfig.Template,
		"  lua-load general/x.lua\n", "{{ if .resources.services.List }}  lua-load general/x.lua\n{{ end }}", 1) +
		"frontend f\n  bind :8080\n  http-request return status 200\n"
	eventually(t, "the config without tests is stored", func() error { return controlPlane.Client.Create(context.Background(), stored) })
	if err := controlPlane.Client.Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: stored.Namespace, Name: "trigger"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "its status says the policy refused the rendering", func() error {
		got := &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := controlPlane.Client.Get(context.Background(), client.ObjectKeyFromObject(stored), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, gatehousev1alpha1.ConditionPublished)
		if c == nil || c.Reason != "PolicyRefused" || !strings.Contains(c.Message, "lua-load") {
			return fmt.Errorf("Published condition %+v", c)
		}
		return nil
	})
	cm := &corev1.ConfigMap{}
	if err := controlPlane.Client.Get(context.Background(), types.NamespacedName{Namespace: stored.Namespace, Name: configcheck.RenderedConfigMapName(stored.Name)}, cm); err == nil {
		t.Errorf("a rendering loading Lua was published: %v", cm.Data)
	}
	for _, path := range []string{marker, marker + "-exec"} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the config's Lua ran inside Gatehouse: %s exists (%v)", path, err)
		}
	}
}

// TestConfigcheckTenantValueCannotAddLines plays the tenant of the review:
// a user who may only edit its own namespace puts line breaks into an
// annotation the template prints, to add `acl ... -f /etc/passwd` (a file
// read quoted back in the denial) or a Lua directive (which would also be
// published). The template prints the annotation verbatim, as the example
// used to: the engine's escaping must hold by itself.
func TestConfigcheckTenantValueCannotAddLines(t *testing.T) {
	e := startConfigcheckWith(t, func(cfg *gatehousev1alpha1.HAProxyTemplateConfig) {
		cfg.Spec.TemplateSnippets["backend-name"] = gatehousev1alpha1.Template{Template: `{{- $ing := index . 0 }}{{ $svc := index . 1 }}` +
			`{{- $ing.metadata.annotations | default dict | dig "haproxy.gatehouse.dev/backend-name" (printf "be_%s_%s_%v" $ing.metadata.namespace $svc.name $svc.port.number) }}`}
	})
	tenant, _ := tenantClient(t, e.app)
	ctx := context.Background()
	if err := tenant.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.app, Name: "api"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, injected := range []string{
		"be_leak\n  acl leak src -f /etc/passwd\n  http-request deny if leak",
		"be_lua\nglobal\n  lua-load /etc/passwd",
		"be_cr\r  acl leak src -f /proc/self/environ",
	} {
		ing := e.ingress("inject-"+randSuffix(), "haproxy", "inject.example", "api", 80)
		ing.Annotations = map[string]string{"haproxy.gatehouse.dev/backend-name": injected}
		err := tenant.Create(ctx, ing)
		if err == nil {
			t.Errorf("an Ingress whose annotation adds lines was admitted: %q", injected)
			continue
		}
		for _, leak := range []string{"root:x:0:0", "/bin/bash", "PATH="} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("the denial quotes a file outside the rendering (%q): %v", leak, err)
			}
		}
		if !strings.Contains(err.Error(), "line break or control character") {
			t.Errorf("the denial does not say the value may not add lines: %v", err)
		}
	}
	// Nothing of it was published.
	for key, text := range e.published() {
		if strings.Contains(text, "/etc/passwd") || strings.Contains(text, "lua-load") {
			t.Errorf("published %s holds the tenant's lines:\n%s", key, text)
		}
	}
}

// TestConfigcheckRenderBombsAreBounded: a config author's template that
// allocates without bound, or loops without writing, is refused within the
// webhook's budget; Gatehouse's memory stays bounded and no CPU is spent
// after the answer. Before, `until 40000000` took 1.3 GB in one render and
// a non-writing loop kept a core busy 37 s after the API server gave up.
func TestConfigcheckRenderBombsAreBounded(t *testing.T) {
	e := startConfigcheckWith(t, func(cfg *gatehousev1alpha1.HAProxyTemplateConfig) {
		cfg.Spec.ValidationWebhook.TimeoutSeconds = 3
		// The bombs go off only for an Ingress named after them, so the
		// config itself is valid and its tests pass.
		cfg.Spec.HAProxyConfig.Template = `{{- range $ing := .resources.ingresses.List }}` +
			`{{- if eq $ing.metadata.name "memory-bomb" }}{{ len (until 40000000) }}{{ end }}` +
			// A hundred 10 MB strings held at once, each within the
			// engine's bound on one value: only the render worker's memory
			// budget stops it.
			`{{- if eq $ing.metadata.name "held-bomb" }}{{ $d := dict }}{{ range $i := until 100 }}{{ $_ := set $d (toString $i) (repeat 10000000 "x") }}{{ end }}{{ len $d }}{{ end }}` +
			// A loop that never writes and stays inside every bound the engine
			// checks (a million items, each building a 10 MB value): only the
			// deadline can stop it.
			`{{- if eq $ing.metadata.name "loop-bomb" }}{{ range until 1000000 }}{{ $x := repeat 10000000 "x" }}{{ end }}{{ end }}` +
			`{{- end }}` + "\n" + cfg.Spec.HAProxyConfig.Template
	})
	ctx := context.Background()
	e.service("api")

	for _, bomb := range []string{"memory-bomb", "held-bomb"} {
		before := peakRSS(t)
		start := time.Now()
		err := e.c.Create(ctx, e.ingress(bomb, "haproxy", bomb+".example", "api", 80))
		if err == nil {
			t.Fatalf("the %s was admitted", bomb)
		}
		t.Logf("%s: %v", bomb, err)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("the %s was answered after %v", bomb, took)
		}
		if grown := peakRSS(t) - before; grown > 300<<20 {
			t.Errorf("Gatehouse's peak RSS grew by %d MiB during the %s", grown>>20, bomb)
		}
	}

	err := e.c.Create(ctx, e.ingress("loop-bomb", "haproxy", "l.example", "api", 80))
	if err == nil {
		t.Fatal("the loop bomb was admitted")
	}
	// Within a second of the answer, this process (Gatehouse runs in it)
	// is idle again: nothing keeps rendering after the deadline.
	time.Sleep(time.Second)
	cpu := processCPU(t)
	time.Sleep(time.Second)
	if spent := processCPU(t) - cpu; spent > 300*time.Millisecond {
		t.Errorf("%v of CPU spent in the second after the refusal: the render still runs", spent)
	}
}

// peakRSS is this process's peak resident set (VmHWM).
func peakRSS(t *testing.T) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// processCPU is the CPU time used by this process (Gatehouse runs in it)
// and by its children still running that are Gatehouse's: the confined
// render workers (this binary re-executed) and haproxy -c (the control
// plane's processes are children too, and are left out).
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	binary, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	total := statCPU(t, "/proc/self/stat")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		if _, err := strconv.Atoi(entry.Name()); err != nil || entry.Name() == self {
			continue
		}
		exe, _ := os.Readlink("/proc/" + entry.Name() + "/exe")
		if exe != binary && filepath.Base(exe) != "haproxy" {
			continue
		}
		if fields := statFields("/proc/" + entry.Name() + "/stat"); len(fields) > 13 && fields[1] == self {
			total += statCPU(t, "/proc/"+entry.Name()+"/stat")
		}
	}
	return total
}

// statFields are the fields of a /proc/<pid>/stat after the command name,
// starting with the state; nil when the process is gone.
func statFields(path string) []string {
	stat, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 || i+2 > len(stat) {
		return nil
	}
	return strings.Fields(string(stat[i+2:]))
}

// statCPU is utime+stime of a /proc/<pid>/stat (fields 14 and 15, 12 and
// 13 after the state), in clock ticks of 10 ms.
func statCPU(t *testing.T, path string) time.Duration {
	t.Helper()
	fields := statFields(path)
	if len(fields) < 13 {
		return 0
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
