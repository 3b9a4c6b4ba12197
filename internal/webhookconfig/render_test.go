package webhookconfig

import (
	"context"
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

func hooks() []module.Webhook {
	admit := func(context.Context, admission.Request) admission.Response { return admission.Allowed("") }
	rule := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"persistentvolumeclaims"}}}}
	return []module.Webhook{
		{Name: "v.test", Path: "/v", Type: module.Validating, Rules: rule, FailurePolicy: admissionregistrationv1.Fail,
			SideEffects: admissionregistrationv1.SideEffectClassNone, TimeoutSeconds: 10, Admit: admit},
		{Name: "empty.test", Path: "/validate", Type: module.Validating, FailurePolicy: admissionregistrationv1.Fail,
			SideEffects: admissionregistrationv1.SideEffectClassNone, TimeoutSeconds: 10, Admit: admit},
		{Name: "m.test", Path: "/m", Type: module.Mutating, Rules: rule, FailurePolicy: admissionregistrationv1.Ignore,
			SideEffects: admissionregistrationv1.SideEffectClassNone, TimeoutSeconds: 3, Admit: admit},
		{Name: "c.test", Path: "/c", Type: module.Conversion, CRDs: []string{"things.example.com"},
			Convert: func(context.Context, *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error) {
				return nil, nil
			}},
	}
}

func TestRenderExcludesSystemAndOwnNamespacesEverywhere(t *testing.T) {
	r := Render(hooks(), Target{URL: "https://127.0.0.1:9443", CABundle: []byte("ca"), Namespace: "gh"})
	if len(r.Validating.Webhooks) != 1 || r.Validating.Webhooks[0].Name != "v.test" {
		t.Fatalf("validating webhooks %+v: a webhook without rules must be left out", r.Validating.Webhooks)
	}
	want := []string{"gh", "kube-node-lease", "kube-system"}
	for _, sel := range []*struct{ values []string }{
		{r.Validating.Webhooks[0].NamespaceSelector.MatchExpressions[0].Values},
		{r.Mutating.Webhooks[0].NamespaceSelector.MatchExpressions[0].Values},
	} {
		if !reflect.DeepEqual(sel.values, want) {
			t.Fatalf("excluded %v, want %v", sel.values, want)
		}
	}
	v := r.Validating.Webhooks[0]
	if *v.ClientConfig.URL != "https://127.0.0.1:9443/v" || string(v.ClientConfig.CABundle) != "ca" ||
		*v.MatchPolicy != admissionregistrationv1.Equivalent || *v.TimeoutSeconds != 10 {
		t.Fatalf("validating webhook %+v", v)
	}
	if m := r.Mutating.Webhooks[0]; *m.FailurePolicy != admissionregistrationv1.Ignore || *m.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy {
		t.Fatalf("mutating webhook %+v", m)
	}
	if c := r.Conversions["things.example.com"]; c == nil || *c.Webhook.ClientConfig.URL != "https://127.0.0.1:9443/c" {
		t.Fatalf("conversion %+v", c)
	}
}

func TestRenderInClusterUsesTheService(t *testing.T) {
	svc := &admissionregistrationv1.ServiceReference{Namespace: "gh", Name: "gatehouse-webhook", Port: ptr.To[int32](443)}
	r := Render(hooks(), Target{Service: svc, Namespace: "gh"})
	got := r.Validating.Webhooks[0].ClientConfig
	if got.URL != nil || got.Service.Name != "gatehouse-webhook" || *got.Service.Path != "/v" {
		t.Fatalf("client config %+v", got)
	}
	if svc.Path != nil {
		t.Fatal("Render changed the caller's service reference")
	}
	conv := r.Conversions["things.example.com"].Webhook.ClientConfig
	if conv.Service == nil || *conv.Service.Path != "/c" || conv.URL != nil {
		t.Fatalf("conversion client config %+v", conv)
	}
}

func TestRenderTakesSelectorsConditionsAndReinvocationFromTheDeclaration(t *testing.T) {
	admit := func(context.Context, admission.Request) admission.Response { return admission.Allowed("") }
	rule := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}
	tenants := &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "yes"}}
	conditions := []admissionregistrationv1.MatchCondition{{Name: "has-class", Expression: "has(object.metadata.labels)"}}
	hooks := []module.Webhook{
		{Name: "v.test", Path: "/v", Type: module.Validating, Rules: rule, FailurePolicy: admissionregistrationv1.Ignore,
			SideEffects: admissionregistrationv1.SideEffectClassNone, TimeoutSeconds: 3, Admit: admit,
			NamespaceSelector: tenants, ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			MatchConditions: conditions},
		{Name: "m.test", Path: "/m", Type: module.Mutating, Rules: rule, FailurePolicy: admissionregistrationv1.Fail,
			SideEffects: admissionregistrationv1.SideEffectClassNone, TimeoutSeconds: 5, Admit: admit,
			ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy},
	}
	r := Render(hooks, Target{URL: "https://gh", Namespace: "gh"})
	v := r.Validating.Webhooks[0]
	sel := v.NamespaceSelector
	if sel.MatchLabels["tenant"] != "yes" || len(sel.MatchExpressions) != 1 ||
		!reflect.DeepEqual(sel.MatchExpressions[0].Values, []string{"gh", "kube-node-lease", "kube-system"}) {
		t.Fatalf("namespace selector %+v: the declared one AND the exclusions", sel)
	}
	if tenants.MatchExpressions != nil {
		t.Fatal("Render changed the declaration's selector")
	}
	if v.ObjectSelector.MatchLabels["app"] != "x" || !reflect.DeepEqual(v.MatchConditions, conditions) {
		t.Fatalf("object selector %+v, match conditions %+v", v.ObjectSelector, v.MatchConditions)
	}
	if *v.Rules[0].Scope != admissionregistrationv1.AllScopes || rule[0].Scope != nil {
		t.Fatalf("scope %v: the API server's default, set on a copy", v.Rules[0].Scope)
	}
	if m := r.Mutating.Webhooks[0]; *m.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
		t.Fatalf("reinvocation %v", *m.ReinvocationPolicy)
	}
}
