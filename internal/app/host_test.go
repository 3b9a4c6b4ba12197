package app

import (
	"slices"
	"testing"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

func TestRuleKindsNameTheKindsOfTheRulesResources(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	service := schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	ingress := schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}
	mapper.Add(service, meta.RESTScopeNamespace)
	mapper.Add(ingress, meta.RESTScopeNamespace)
	rule := func(group, version, resource string) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{
			APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}}}
	}
	for _, tc := range []struct {
		name  string
		rules []admissionregistrationv1.RuleWithOperations
		want  []schema.GroupVersionKind
	}{
		{"resources", []admissionregistrationv1.RuleWithOperations{rule("", "v1", "services"), rule("networking.k8s.io", "v1", "ingresses")}, []schema.GroupVersionKind{service, ingress}},
		// Every kind: these rules' reviews carry kinds no mapping names.
		{"a wildcard resource", []admissionregistrationv1.RuleWithOperations{rule("", "v1", "services"), rule("", "v1", "*")}, nil},
		{"a wildcard group", []admissionregistrationv1.RuleWithOperations{rule("*", "v1", "services")}, nil},
		{"a subresource", []admissionregistrationv1.RuleWithOperations{rule("", "v1", "services"), rule("", "v1", "services/status")}, nil},
		{"a resource discovery does not know", []admissionregistrationv1.RuleWithOperations{rule("", "v1", "services"), rule("example.com", "v1", "widgets")}, nil},
		{"no rules", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ruleKinds(mapper, module.Webhook{Name: "w.test", Rules: tc.rules}, logr.Discard())
			if !slices.Equal(got, tc.want) {
				t.Fatalf("kinds %v, want %v", got, tc.want)
			}
		})
	}
}
