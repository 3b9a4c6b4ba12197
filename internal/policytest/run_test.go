package policytest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// probe is a module made for these tests: its decisions say what its
// caches and optional kind show, so that a test sees what the offline host
// gave it.
type probe struct {
	teams  cache.Cache
	widget module.Kind
}

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

func (p *probe) Name() string                      { return "probe" }
func (p *probe) AddToScheme(*runtime.Scheme) error { return nil }

func (p *probe) Setup(_ context.Context, host module.Host) error {
	var err error
	// Scoped to one namespace: a ConfigMap elsewhere must stay unseen.
	p.teams, err = host.NewCache("teams", cache.Options{
		DefaultNamespaces: map[string]cache.Config{"team-a": {}},
		ByObject:          map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {}},
	})
	if err != nil {
		return err
	}
	w := &metav1.PartialObjectMetadata{}
	w.SetGroupVersionKind(widgetGVK)
	p.widget, err = host.FollowKind(w, module.Scope{}, nil)
	return err
}

func (p *probe) Webhooks() []module.Webhook {
	rule := func(resource string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}},
		}}
	}
	return []module.Webhook{{
		Name: "probe-label.test", Path: "/mutate-probe", Type: module.Mutating, Rules: rule("pods"),
		FailurePolicy: admissionregistrationv1.Fail, SideEffects: admissionregistrationv1.SideEffectClassNone, TimeoutSeconds: 5,
		Admit: func(_ context.Context, req admission.Request) admission.Response {
			return admission.Response{
				Patches:           []jsonPatchOp{{Operation: "add", Path: "/metadata/labels", Value: map[string]any{"probed": "yes"}}},
				AdmissionResponse: admissionAllowed(),
			}
		},
	}, {
		Name: "probe.test", Path: "/validate-probe", Type: module.Validating, Rules: rule("pods"),
		FailurePolicy: admissionregistrationv1.Fail, SideEffects: admissionregistrationv1.SideEffectClassNone, TimeoutSeconds: 5,
		Admit: p.admit,
	}}
}

// admit denies a Pod whose namespace's "policy" ConfigMap says deny, and
// answers the names "boom" (an error) and "later" (undecided).
func (p *probe) admit(ctx context.Context, req admission.Request) admission.Response {
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	switch req.Name {
	case "boom":
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("the probe broke"))
	case "later":
		return module.Undecided("the probe is not ready")
	}
	if pod.Labels["probed"] != "yes" {
		return admission.Denied("the mutating webhook did not run first")
	}
	var cm corev1.ConfigMap
	err := p.teams.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: "policy"}, &cm)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil && strings.Contains(err.Error(), "unknown namespace for the cache"):
		// Outside the cache's scope, as in a cluster.
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	case cm.Data["deny"] == "true":
		return admission.Denied(fmt.Sprintf("namespace %s denies pods\nwidgets readable: %t", req.Namespace, p.widget.State() == module.KindServed))
	}
	return admission.Allowed("no policy denies")
}

const probeState = `apiVersion: gatehouse.dev/v1alpha1
kind: TestSuite
name: probe
objects:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: policy, namespace: team-a}, data: {deny: "true"}}
- {apiVersion: v1, kind: ConfigMap, metadata: {name: policy, namespace: team-b}, data: {deny: "true"}}
`

func pod(name, namespace string) string {
	return fmt.Sprintf("{apiVersion: v1, kind: Pod, metadata: {name: %s, namespace: %s}, spec: {containers: [{name: c, image: i}]}}", name, namespace)
}

func runProbe(t *testing.T, suite string) SuiteResult {
	t.Helper()
	return runSuite(t, suite, &probe{})
}

// runSuite writes suite to a file, loads it and runs it with modules.
func runSuite(t *testing.T, suite string, modules ...module.Module) SuiteResult {
	t.Helper()
	file := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(file, []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return Run(context.Background(), s, Options{Modules: func() []module.Module { return modules }})
}

// TestRunDecidesThroughTheModulesCaches: the module reads the suite's state
// through a cache scoped as it asked, mutating webhooks run before
// validating ones, and an expectation is judged on the server's answer.
func TestRunDecidesThroughTheModulesCaches(t *testing.T) {
	res := runProbe(t, probeState+`tests:
- name: denied by the policy in its namespace
  request: {operation: CREATE, object: `+pod("p", "team-a")+`}
  expect: {allowed: false, code: 403, messageContains: ["namespace team-a denies pods", "widgets readable: false"]}
- name: team-b's policy lies outside the cache's scope
  request: {operation: CREATE, object: `+pod("p", "team-b")+`}
  expect: {allowed: true, noWarnings: true, patchedObject: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: team-b, labels: {probed: "yes"}}, spec: {containers: [{name: c, image: i}]}}}
- name: an error is not a denial
  request: {operation: CREATE, object: `+pod("boom", "team-c")+`}
  expect: {allowed: false}
- name: undecided is answered as the server answers it
  request: {operation: CREATE, object: `+pod("later", "team-c")+`}
  expect: {allowed: false, code: 503, messageContains: ["the probe is not ready"]}
`)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := map[string][]string{
		"denied by the policy in its namespace":          nil,
		"team-b's policy lies outside the cache's scope": nil,
		"an error is not a denial":                       {`code: expected a policy denial (403), got an error (500): "the probe broke"`},
		"undecided is answered as the server answers it": nil,
	}
	if len(res.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(res.Results), len(want), res.Results)
	}
	for _, r := range res.Results {
		if got := strings.Join(r.Failures, "\n"); got != strings.Join(want[r.Name], "\n") || r.Passed != (len(want[r.Name]) == 0) {
			t.Errorf("%s: passed %t, failures:\n%s\nwant:\n%s", r.Name, r.Passed, got, strings.Join(want[r.Name], "\n"))
		}
	}
}

// TestRunWarnModeAndOptionalKinds: in warn mode the server admits a denial
// with warnings, as it does in a cluster; a kind the suite's objects name
// is served, and its informer readable.
func TestRunWarnModeAndOptionalKinds(t *testing.T) {
	res := runProbe(t, probeState+`- {apiVersion: example.com/v1, kind: Widget, metadata: {name: w}}
modules:
  probe: {enforcement: warn}
tests:
- name: warned
  request: {operation: CREATE, object: `+pod("p", "team-a")+`}
  expect:
    allowed: true
    warningsContain: ["probe (enforcement: warn) would deny this request:", "namespace team-a denies pods", "widgets readable: true"]
`)
	if res.Err != nil || len(res.Results) != 1 || !res.Results[0].Passed {
		t.Fatalf("%v %+v", res.Err, res.Results)
	}
}

// TestExpectDiff: a wrong expectation says where and how the answer
// differs.
func TestExpectDiff(t *testing.T) {
	yes, no := true, false
	got := answer{allowed: false, code: 403, message: "line one\nline two", webhook: "w.test",
		patched:   map[string]any{"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "1"}}, "spec": []any{int64(1), int64(2)}},
		converted: []map[string]any{{"spec": map[string]any{"nodeType": "CloudStatic"}}}}
	failures := Expect{
		Allowed: &yes, MessageContains: []string{"line three"}, MessageNotContains: []string{"line two"},
		WarningsContain:  []string{"careful"},
		PatchedObject:    map[string]any{"metadata": map[string]any{"name": "b", "annotations": map[string]any{"k": "v"}}, "spec": []any{1, 3}},
		ConvertedObjects: []map[string]any{{"spec": map[string]any{"nodeType": "CloudPermanent"}}},
	}.compare(got)
	want := []string{
		"allowed: expected true (allowed), got false (denied) by w.test with code 403: \n        | line one\n        | line two",
		"message: expected to contain \"line three\", got \n        | line one\n        | line two",
		"message: expected not to contain \"line two\", got \n        | line one\n        | line two",
		`warnings: expected one to contain "careful", got no warnings`,
		`patchedObject.metadata.annotations: expected {"k":"v"}, missing`,
		`patchedObject.metadata.labels: unexpected {"x":"1"}`,
		`patchedObject.metadata.name: expected "b", got "a"`,
		`patchedObject.spec[1]: expected 3, got 2`,
		`convertedObjects[0].spec.nodeType: expected "CloudPermanent", got "CloudStatic"`,
	}
	if strings.Join(failures, "\n") != strings.Join(want, "\n") {
		t.Errorf("failures:\n%s\nwant:\n%s", strings.Join(failures, "\n"), strings.Join(want, "\n"))
	}
	if f := (Expect{Allowed: &no, MessageContains: []string{"line one"}}).compare(got); len(f) != 0 {
		t.Errorf("a met expectation failed: %q", f)
	}
}

// TestLoadRefusesWithTheLine: what decoding and checking refuse names its
// line, and a suite's object files are read.
func TestLoadRefusesWithTheLine(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.yaml"), []byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head := "apiVersion: gatehouse.dev/v1alpha1\nkind: TestSuite\n"
	ok := "tests:\n- name: x\n  request: {operation: DELETE, kind: Namespace, name: a}\n  expect: {allowed: true}\n"
	for _, tc := range []struct{ body, want string }{
		{head + "objectFiles: [state.yaml]\n" + ok, ""},
		{head + "objectFiles: [missing.yaml]\n" + ok, "line 3: objectFiles[0]: missing.yaml: no such file in "},
		{head + "objects:\n- {kind: Namespace, metadata: {name: a}}\n" + ok, "line 4: objects[0]: an object needs apiVersion and kind"},
		{head + "modules: {pvsafe: {enforcement: audit}}\n" + ok, `line 3: modules.pvsafe.enforcement "audit": want enforce or warn`},
		{head + "tests:\n- name: x\n  request: {operation: PATCH, kind: Namespace, name: a}\n  expect: {allowed: true}\n", `line 4: tests[0] (x): request.operation "PATCH": want CREATE, UPDATE, DELETE or CONNECT`},
		{head + "tests:\n- name: x\n  request: {operation: CREATE, kind: Namespace, name: a}\n  expect: {allowed: true}\n", "line 4: tests[0] (x): request.object is required for CREATE"},
		{head + "tests:\n- name: x\n  request: {operation: DELETE, kind: Namespace, name: a}\n  expect: {allowed: true}\n  bogus: 1\n", "line 7: field bogus not found"},
		{head + ok + "---\n" + head, "one suite per file"},
	} {
		file := filepath.Join(dir, "suite.yaml")
		if err := os.WriteFile(file, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Load(file)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.body, err)
		case tc.want == "" && len(s.objects) != 2:
			t.Errorf("objects %v, want the List's and the second document's", s.objects)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want one containing %q", tc.body, err, tc.want)
		}
	}
}

// TestASuiteReadsOnlyItsOwnFiles plays a pull request's suite run by a CI
// job: it names files outside its directory (to read the runner's secrets,
// shown in the error), a device (to exhaust memory), a FIFO (to hang the
// job), a huge file. Each is refused before a byte is read, and the
// refusal shows none.
func TestASuiteReadsOnlyItsOwnFiles(t *testing.T) {
	outside := t.TempDir()
	const secret = "ci-token-4f1d9a"
	secretFile := filepath.Join(outside, "secret.yaml")
	if err := os.WriteFile(secretFile, []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: "+secret+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(outside, "suite")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secretFile, filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	huge, err := os.Create(filepath.Join(dir, "huge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := huge.Truncate(maxSuiteFile + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	huge.Close()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"../secret.yaml", "a path leading out of the suite's directory"},
		{secretFile, "an absolute path"},
		{"/etc/passwd", "an absolute path"},
		{"/dev/zero", "an absolute path"},
		{"sub/../../secret.yaml", "a path leading out of the suite's directory"},
		{"link.yaml", "not readable there"},
		{"zero.yaml", "not readable there"},
		{"fifo.yaml", "not a regular file"},
		{"huge.yaml", "16777217 bytes"},
		{"sub", "not a regular file"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := readRelative(dir, tc.name)
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("%s: still reading after a minute", tc.name)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "a suite reads only regular files inside its own directory") {
			t.Errorf("%s: %v; want refused: %s", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "root:") {
			t.Errorf("%s: the refusal shows the file's contents: %v", tc.name, err)
		}
	}
	// Control: a file of its own, also through a subdirectory, is read.
	if err := os.WriteFile(filepath.Join(dir, "sub", "own.yaml"), []byte("kind: List\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := readRelative(dir, "sub/own.yaml"); err != nil || string(data) != "kind: List\n" {
		t.Errorf("the suite's own file: %q, %v", data, err)
	}
}

// TestAPIServerAnswersAsKubeAPIServer: the in-memory API server serves
// selectors, metadata-only lists and NotFound to a real client, and
// answers access reviews from the suite's permissions.
func TestAPIServerAnswersAsKubeAPIServer(t *testing.T) {
	objs := []*unstructured.Unstructured{}
	for _, o := range []map[string]any{
		{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "a", "namespace": "n", "labels": map[string]any{"app": "x"}}, "spec": map[string]any{"nodeName": "node-1"}},
		{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "b", "namespace": "n"}, "spec": map[string]any{"nodeName": "node-2"}},
		{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "c"}},
		{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": "n"}, "stringData": map[string]any{"k": "v"}},
	} {
		u, err := toObject(o)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	scheme, err := module.NewScheme(nil)
	if err != nil {
		t.Fatal(err)
	}
	mapper := newMapper(scheme, nil, objs)
	api, err := newAPIServer(mapper, objs, []Permission{{Group: "ops", Verbs: []string{"delete"}, Resources: []string{"pods"}, Namespaces: []string{"n"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	env, err := newEnvironment(scheme, mapper, api, "gatehouse-system", discardLog())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := env.client

	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("n"), client.MatchingLabels{"app": "x"}); err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "a" {
		t.Errorf("label selector: %v %v", err, pods.Items)
	}
	if err := c.List(ctx, &pods, client.MatchingFields{"spec.nodeName": "node-2"}); err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "b" {
		t.Errorf("field selector: %v %v", err, pods.Items)
	}
	if err := c.List(ctx, &pods, client.InNamespace("default")); err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "c" {
		t.Errorf("a namespaced object without a namespace is in default: %v %v", err, pods.Items)
	}
	meta := &metav1.PartialObjectMetadataList{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := c.List(ctx, meta); err != nil || len(meta.Items) != 3 {
		t.Errorf("metadata-only list: %v %d items", err, len(meta.Items))
	}
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "n", Name: "s"}, &secret); err != nil || string(secret.Data["k"]) != "v" {
		t.Errorf("a Secret's stringData is stored as data: %v %v", err, secret.Data)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "n", Name: "nope"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("a missing object: %v, want NotFound", err)
	}
	if err := c.Delete(ctx, &pods.Items[0]); !apierrors.IsForbidden(err) {
		t.Errorf("a write: %v, want Forbidden", err)
	}
	for _, tc := range []struct {
		groups    []string
		namespace string
		want      bool
	}{{[]string{"ops"}, "n", true}, {[]string{"ops"}, "m", false}, {[]string{"dev"}, "n", false}, {[]string{"system:masters"}, "m", true}} {
		sar := module.AccessReview(authUser("u", tc.groups), authzAttrs("delete", "pods", tc.namespace))
		if allowed, err := module.Allowed(ctx, c, sar); err != nil || allowed != tc.want {
			t.Errorf("groups %v delete pods in %s: %t %v, want %t", tc.groups, tc.namespace, allowed, err, tc.want)
		}
	}
}

// TestUsedModulesInferred: a suite naming no module builds only the
// modules whose webhooks its requests would reach.
func TestUsedModulesInferred(t *testing.T) {
	file := filepath.Join(t.TempDir(), "suite.yaml")
	suite := "apiVersion: gatehouse.dev/v1alpha1\nkind: TestSuite\ntests:\n- name: x\n  request: {operation: CREATE, object: " + pod("p", "a") + "}\n  expect: {allowed: true}\n"
	if err := os.WriteFile(file, []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	used, err := s.usedModules([]module.Module{&probe{}, &bystander{}})
	if err != nil || !used["probe"] || used["bystander"] {
		t.Errorf("used %v, %v; want probe alone", used, err)
	}
}

// bystander judges Secrets only, and fails to set up.
type bystander struct{}

func (bystander) Name() string                      { return "bystander" }
func (bystander) AddToScheme(*runtime.Scheme) error { return nil }
func (bystander) Setup(context.Context, module.Host) error {
	return fmt.Errorf("bystander built")
}
func (bystander) Webhooks() []module.Webhook {
	return []module.Webhook{{Name: "bystander.test", Path: "/b", Type: module.Validating,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
		}}}}
}
