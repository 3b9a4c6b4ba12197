package policytest

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// picky denies every ConfigMap it is called for, and narrows what
// kube-apiserver calls it for in all three ways a webhook can: namespaces
// labelled picky=on, objects labelled picky=yes, and a match condition
// sparing the ConfigMap named "spared".
type picky struct{}

func (picky) Name() string                             { return "picky" }
func (picky) AddToScheme(*runtime.Scheme) error        { return nil }
func (picky) Setup(context.Context, module.Host) error { return nil }
func (picky) admit(context.Context, admission.Request) admission.Response {
	return admission.Denied("picky denies every ConfigMap it sees")
}

func (p picky) Webhooks() []module.Webhook {
	return []module.Webhook{{
		Name: "picky.test", Path: "/validate-picky", Type: module.Validating,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Delete},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"picky": "on"}},
		ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"picky": "yes"}},
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name: "not-spared", Expression: `(request.operation == 'DELETE' ? oldObject : object).metadata.name != 'spared'`,
		}},
		FailurePolicy: admissionregistrationv1.Fail, SideEffects: admissionregistrationv1.SideEffectClassNone, TimeoutSeconds: 5,
		Admit: p.admit,
	}}
}

func configMap(name, namespace, label string) string {
	labels := ""
	if label != "" {
		labels = ", labels: {picky: " + label + "}"
	}
	return "{apiVersion: v1, kind: ConfigMap, metadata: {name: " + name + ", namespace: " + namespace + labels + "}}"
}

// TestRunCallsWebhooksAsKubeAPIServerWould: a suite's request reaches a
// webhook only when kube-apiserver would call it: the namespaces every
// install excludes and its own are never called, nor a namespace, an
// object or a request the webhook's selectors and match conditions leave
// out; a namespace the state does not declare has only its name label.
// "called" says so, and a wrong "allowed" says why nothing was called.
func TestRunCallsWebhooksAsKubeAPIServerWould(t *testing.T) {
	suite := `apiVersion: gatehouse.dev/v1alpha1
kind: TestSuite
name: picky
namespace: gatehouse-own
objects:
- {apiVersion: v1, kind: Namespace, metadata: {name: team-a, labels: {picky: "on"}}}
- {apiVersion: v1, kind: Namespace, metadata: {name: kube-system, labels: {picky: "on"}}}
- {apiVersion: v1, kind: Namespace, metadata: {name: gatehouse-own, labels: {picky: "on"}}}
- ` + configMap("spared", "team-a", "yes") + `
tests:
- name: selected in every way, so called
  request: {operation: CREATE, object: ` + configMap("c", "team-a", "yes") + `}
  expect: {allowed: false, called: true, messageContains: ["picky denies every ConfigMap it sees"]}
- name: kube-system is never called
  request: {operation: CREATE, object: ` + configMap("c", "kube-system", "yes") + `}
  expect: {allowed: true, called: false}
- name: nor the install's own namespace
  request: {operation: CREATE, object: ` + configMap("c", "gatehouse-own", "yes") + `}
  expect: {allowed: true, called: false}
- name: an undeclared namespace has no picky label
  request: {operation: CREATE, object: ` + configMap("c", "team-b", "yes") + `}
  expect: {allowed: true, called: false}
- name: an object the objectSelector leaves out
  request: {operation: CREATE, object: ` + configMap("c", "team-a", "no") + `}
  expect: {allowed: true, called: false}
- name: a false match condition, on the old object of a DELETE
  request: {operation: DELETE, kind: ConfigMap, namespace: team-a, name: spared}
  expect: {allowed: true, called: false}
- name: a request no webhook's rules name, expected not to be called
  request: {operation: UPDATE, object: ` + configMap("c", "team-a", "yes") + `, oldObject: ` + configMap("c", "team-a", "yes") + `}
  expect: {called: false}
- name: a wrong expectation says why nothing was called
  request: {operation: CREATE, object: ` + configMap("c", "kube-system", "yes") + `}
  expect: {allowed: false, called: true}
`
	res := runSuite(t, suite, picky{})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	kubeSystem := `picky.test: its namespaceSelector does not select namespace "kube-system"`
	want := map[string]struct {
		got      string
		failures []string
	}{
		"selected in every way, so called":                             {got: "denied (code 403) by picky.test: picky denies every ConfigMap it sees"},
		"kube-system is never called":                                  {got: "allowed without calling Gatehouse; not called: " + kubeSystem},
		"nor the install's own namespace":                              {got: `allowed without calling Gatehouse; not called: picky.test: its namespaceSelector does not select namespace "gatehouse-own"`},
		"an undeclared namespace has no picky label":                   {got: `allowed without calling Gatehouse; not called: picky.test: its namespaceSelector does not select namespace "team-b"`},
		"an object the objectSelector leaves out":                      {got: "allowed without calling Gatehouse; not called: picky.test: its objectSelector selects neither the object's labels nor the old object's"},
		"a false match condition, on the old object of a DELETE":       {got: `allowed without calling Gatehouse; not called: picky.test: its match condition "not-spared" is false`},
		"a request no webhook's rules name, expected not to be called": {got: "allowed without calling Gatehouse; not called: the rules of no webhook of the suite's modules match"},
		"a wrong expectation says why nothing was called": {
			got: "allowed without calling Gatehouse; not called: " + kubeSystem,
			failures: []string{
				"allowed: expected false (denied), got true (allowed) without calling Gatehouse: " + kubeSystem,
				"called: expected true, got false: " + kubeSystem,
			},
		},
	}
	if len(res.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(res.Results), len(want), res.Results)
	}
	for _, r := range res.Results {
		w := want[r.Name]
		if r.Got != w.got {
			t.Errorf("%s: got %q, want %q", r.Name, r.Got, w.got)
		}
		if got := strings.Join(r.Failures, "\n"); got != strings.Join(w.failures, "\n") || r.Passed != (len(w.failures) == 0) {
			t.Errorf("%s: passed %t, failures:\n%s\nwant:\n%s", r.Name, r.Passed, got, strings.Join(w.failures, "\n"))
		}
	}
}

// TestRuleScopeOfANamespaceRequest: a Namespace's request carries its name
// as its namespace, as kube-apiserver sends it, and still matches a rule
// scoped to cluster-scoped resources only, not one scoped to namespaced
// ones.
func TestRuleScopeOfANamespaceRequest(t *testing.T) {
	req := &admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"},
		Name: "team-a", Namespace: "team-a", Operation: admissionv1.Delete,
	}
	rule := func(scope admissionregistrationv1.ScopeType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}, Scope: &scope},
		}}
	}
	if !ruleMatches(rule(admissionregistrationv1.ClusterScope), req) {
		t.Error("a Cluster-scoped rule does not match a Namespace's DELETE")
	}
	if ruleMatches(rule(admissionregistrationv1.NamespacedScope), req) {
		t.Error("a Namespaced-scoped rule matches a Namespace's DELETE")
	}
}
