package module

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func TestParseGVK(t *testing.T) {
	for in, want := range map[string]schema.GroupVersionKind{
		"v1.Service":                                   {Version: "v1", Kind: "Service"},
		"networking.k8s.io/v1.Ingress":                 {Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
		"gatehouse.dev/v1alpha1.HAProxyTemplateConfig": {Group: "gatehouse.dev", Version: "v1alpha1", Kind: "HAProxyTemplateConfig"},
	} {
		got, err := ParseGVK(in)
		if err != nil || got != want {
			t.Errorf("ParseGVK(%q) = %v, %v; want %v", in, got, err, want)
		}
		if GVKString(got) != in {
			t.Errorf("GVKString(%v) = %q, want %q", got, GVKString(got), in)
		}
	}
	for _, bad := range []string{"", "Service", "v1.", ".Service", "/v1.Service", "apps/.Deployment"} {
		if _, err := ParseGVK(bad); err == nil {
			t.Errorf("ParseGVK(%q) accepted", bad)
		}
	}
}

func TestDispatchByKindResolvesResourcesAndRoutesByKind(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Cluster"}, meta.RESTScopeRoot)
	create := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	deny := func(msg string) AdmitFunc {
		return func(context.Context, admission.Request) admission.Response { return admission.Denied(msg) }
	}
	rules, admit, err := DispatchByKind(mapper, []KindValidator{
		{Kind: "v1.Service", Operations: create, Admit: deny("service")},
		{Kind: "example.com/v1.Cluster", Operations: create, Admit: deny("cluster")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rules[0].Resources[0] != "services" || *rules[0].Scope != admissionregistrationv1.NamespacedScope ||
		rules[1].Resources[0] != "clusters" || *rules[1].Scope != admissionregistrationv1.ClusterScope || rules[1].APIGroups[0] != "example.com" {
		t.Fatalf("rules %+v", rules)
	}
	request := func(group, version, kind string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Group: group, Version: version, Kind: kind}}}
	}
	if resp := admit(context.Background(), request("example.com", "v1", "Cluster")); resp.Allowed || resp.Result.Message != "cluster" {
		t.Fatalf("Cluster went to the wrong validator: %+v", resp)
	}
	if resp := admit(context.Background(), request("", "v1", "ConfigMap")); !resp.Allowed {
		t.Fatal("a kind without a validator must be allowed")
	}
	if _, _, err := DispatchByKind(mapper, []KindValidator{{Kind: "v1.Secret", Operations: create, Admit: deny("x")}}); err == nil {
		t.Fatal("a kind discovery does not know was accepted")
	}
	if _, _, err := DispatchByKind(mapper, []KindValidator{{Kind: "v1.Service", Admit: deny("a")}, {Kind: "v1.Service", Admit: deny("b")}}); err == nil {
		t.Fatal("two validators for one kind were accepted")
	}
}
