package spec

import (
	"maps"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
)

func TestCompileExampleConfig(t *testing.T) {
	cfg := loadExample(t)
	c, errs := Compile(&cfg.Spec, inProcess)
	if len(errs) > 0 {
		t.Fatalf("the example config does not compile: %v", errs.ToAggregate())
	}
	if c.Policy != admissionregistrationv1.Fail || c.Timeout != 10 {
		t.Errorf("defaults: policy %q timeout %d, want Fail and 10", c.Policy, c.Timeout)
	}
	if c.Renderer == nil {
		t.Errorf("no renderer")
	}
	ing, svc := c.Watched["ingresses"], c.Watched["services"]
	if ing == nil || svc == nil || len(c.Watched) != 2 {
		t.Fatalf("watched %v, want ingresses and services", slices.Sorted(maps.Keys(c.Watched)))
	}
	if ing.GVR.Group != "networking.k8s.io" || ing.GVR.Version != "v1" || ing.GVR.Resource != "ingresses" || !ing.Webhook {
		t.Errorf("ingresses: gvr %v webhook %v", ing.GVR, ing.Webhook)
	}
	if svc.GVR.Group != "" || svc.GVR.Version != "v1" || svc.GVR.Resource != "services" {
		t.Errorf("services: gvr %v", svc.GVR)
	}
	if len(ing.fields) != 1 || ing.Namespaces != nil || !ing.Labels.Empty() {
		t.Errorf("ingresses selectors: fields %d nsSel %v labels %q", len(ing.fields), ing.Namespaces, ing.Labels)
	}
	for _, name := range []string{"_global", "ok-single-ingress", "shared-backend-once", "missing-service-is-rejected"} {
		if _, ok := c.Tests[name]; !ok {
			t.Errorf("test %s is missing (tests: %v)", name, slices.Sorted(maps.Keys(c.Tests)))
		}
	}
	if got := len(c.Tests["_global"].Fixtures["services"]); got != 1 {
		t.Errorf("_global has %d service fixtures, want 1", got)
	}
}

func TestCompileDefaultsAndSettings(t *testing.T) {
	cases := []struct {
		name       string
		webhook    gatehousev1alpha1.ValidationWebhook
		wantPolicy admissionregistrationv1.FailurePolicyType
		wantTime   int32
	}{
		{"defaults", gatehousev1alpha1.ValidationWebhook{}, admissionregistrationv1.Fail, 10},
		{"ignore", gatehousev1alpha1.ValidationWebhook{FailurePolicy: admissionregistrationv1.Ignore}, admissionregistrationv1.Ignore, 10},
		{"lowest timeout", gatehousev1alpha1.ValidationWebhook{TimeoutSeconds: 2}, admissionregistrationv1.Fail, 2},
		{"highest timeout", gatehousev1alpha1.ValidationWebhook{FailurePolicy: admissionregistrationv1.Fail, TimeoutSeconds: 30}, admissionregistrationv1.Fail, 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := minimalSpec()
			spec.ValidationWebhook = tc.webhook
			c, errs := Compile(spec, inProcess)
			if len(errs) > 0 {
				t.Fatalf("refused: %v", errs.ToAggregate())
			}
			if c.Policy != tc.wantPolicy || c.Timeout != tc.wantTime {
				t.Fatalf("policy %q timeout %d, want %q %d", c.Policy, c.Timeout, tc.wantPolicy, tc.wantTime)
			}
		})
	}
	t.Run("default indexBy", func(t *testing.T) {
		c, errs := Compile(minimalSpec(), inProcess)
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		if got := strings.Join(c.Watched["ingresses"].IndexBy, ","); got != "metadata.namespace,metadata.name" {
			t.Fatalf("indexBy %q", got)
		}
	})
	t.Run("extraContext object", func(t *testing.T) {
		spec := minimalSpec()
		spec.TemplatingSettings.ExtraContext = rawJSON(`{"port": 8080, "name": "edge"}`)
		c, errs := Compile(spec, inProcess)
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		if c.ExtraContext["name"] != "edge" {
			t.Fatalf("extraContext %v", c.ExtraContext)
		}
	})
}

func TestCompileRefusesAndAccepts(t *testing.T) {
	secret := func(w gatehousev1alpha1.WatchedResource) func(*gatehousev1alpha1.HAProxyTemplateConfigSpec) {
		return func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			w.APIVersion, w.Resources = "v1", "secrets"
			s.WatchedResources["secrets"] = w
		}
	}
	ingress := func(edit func(*gatehousev1alpha1.WatchedResource)) func(*gatehousev1alpha1.HAProxyTemplateConfigSpec) {
		return func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			w := s.WatchedResources["ingresses"]
			edit(&w)
			s.WatchedResources["ingresses"] = w
		}
	}
	template := func(kind, name string) func(*gatehousev1alpha1.HAProxyTemplateConfigSpec) {
		return func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			m := map[string]gatehousev1alpha1.Template{name: {Template: "x"}}
			switch kind {
			case "maps":
				s.Maps = m
			case "files":
				s.Files = m
			case "sslCertificates":
				s.SSLCertificates = m
			}
		}
	}
	webhook := func(policy admissionregistrationv1.FailurePolicyType, timeout int32) func(*gatehousev1alpha1.HAProxyTemplateConfigSpec) {
		return func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.ValidationWebhook = gatehousev1alpha1.ValidationWebhook{FailurePolicy: policy, TimeoutSeconds: timeout}
		}
	}
	extra := func(raw string) func(*gatehousev1alpha1.HAProxyTemplateConfigSpec) {
		return func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) { s.TemplatingSettings.ExtraContext = rawJSON(raw) }
	}
	cases := []struct {
		name string
		edit func(*gatehousev1alpha1.HAProxyTemplateConfigSpec)
		// wantField is the path of the expected error, "" when the spec
		// must compile.
		wantField string
		wantType  field.ErrorType
		wantText  string
	}{
		{name: "example as is", edit: func(*gatehousev1alpha1.HAProxyTemplateConfigSpec) {}},

		// Secrets are never all cached.
		{name: "secrets without selectors", edit: secret(gatehousev1alpha1.WatchedResource{}),
			wantField: "spec.watchedResources[secrets].labelSelector", wantType: field.ErrorTypeRequired, wantText: "never caches every Secret"},
		{name: "secrets with only a namespaceSelector (it filters after caching)", edit: secret(gatehousev1alpha1.WatchedResource{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}),
			wantField: "spec.watchedResources[secrets].labelSelector", wantType: field.ErrorTypeRequired},
		{name: "secrets with an empty labelSelector", edit: secret(gatehousev1alpha1.WatchedResource{LabelSelector: &metav1.LabelSelector{}}),
			wantField: "spec.watchedResources[secrets].labelSelector", wantType: field.ErrorTypeRequired},
		{name: "secrets with a labelSelector", edit: secret(gatehousev1alpha1.WatchedResource{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"haproxy.gatehouse.dev/cert": "true"}}})},
		// Only a positive requirement narrows: an unlabelled Secret meets
		// NotIn and DoesNotExist.
		{name: "secrets with a DoesNotExist selector only", edit: secret(gatehousev1alpha1.WatchedResource{
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpDoesNotExist}}}}),
			wantField: "spec.watchedResources[secrets].labelSelector", wantType: field.ErrorTypeRequired, wantText: "positive requirement"},
		{name: "secrets with NotIn and DoesNotExist only", edit: secret(gatehousev1alpha1.WatchedResource{
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "x", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a"}},
				{Key: "y", Operator: metav1.LabelSelectorOpDoesNotExist}}}}),
			wantField: "spec.watchedResources[secrets].labelSelector", wantType: field.ErrorTypeRequired, wantText: "positive requirement"},
		{name: "secrets with an Exists selector", edit: secret(gatehousev1alpha1.WatchedResource{
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpExists}}}})},
		{name: "secrets with an In selector", edit: secret(gatehousev1alpha1.WatchedResource{
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpIn, Values: []string{"a"}}}}})},
		{name: "secrets with DoesNotExist beside a positive requirement", edit: secret(gatehousev1alpha1.WatchedResource{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"cert": "true"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpDoesNotExist}}}})},
		// Discovery resolves "Secret" and "secret" to Secrets too.
		{name: "Secret (singular, capitalised) without a positive requirement", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.WatchedResources["secrets"] = gatehousev1alpha1.WatchedResource{APIVersion: "v1", Resources: "Secret",
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpDoesNotExist}}}}
		}, wantField: "spec.watchedResources[secrets].labelSelector", wantType: field.ErrorTypeRequired, wantText: "positive requirement"},
		{name: "secrets of another group are not Secrets", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.WatchedResources["vaultsecrets"] = gatehousev1alpha1.WatchedResource{APIVersion: "example.com/v1", Resources: "secrets"}
		}},

		// Watched names are template identifiers.
		{name: "watched name with a dash", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.WatchedResources["my-ingresses"] = s.WatchedResources["ingresses"]
		}, wantField: "spec.watchedResources[my-ingresses]", wantType: field.ErrorTypeInvalid, wantText: ".resources.<name>"},
		{name: "watched name starting with a digit", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.WatchedResources["1st"] = s.WatchedResources["ingresses"]
		}, wantField: "spec.watchedResources[1st]", wantType: field.ErrorTypeInvalid},
		{name: "watched name with a dot", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.WatchedResources["a.b"] = s.WatchedResources["ingresses"]
		}, wantField: "spec.watchedResources[a.b]", wantType: field.ErrorTypeInvalid},
		{name: "watched name with an underscore", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.WatchedResources["_ingresses2"] = s.WatchedResources["ingresses"]
		}},
		{name: "no watched resource", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.WatchedResources = nil
			s.ValidationTests = nil
		}, wantField: "spec.watchedResources", wantType: field.ErrorTypeRequired},

		// apiVersion.
		{name: "apiVersion with two slashes", edit: ingress(func(w *gatehousev1alpha1.WatchedResource) { w.APIVersion = "networking.k8s.io/v1/x" }),
			wantField: "spec.watchedResources[ingresses].apiVersion", wantType: field.ErrorTypeInvalid},
		{name: "apiVersion empty", edit: ingress(func(w *gatehousev1alpha1.WatchedResource) { w.APIVersion = "" }),
			wantField: "spec.watchedResources[ingresses].apiVersion", wantType: field.ErrorTypeInvalid},
		{name: "apiVersion without version", edit: ingress(func(w *gatehousev1alpha1.WatchedResource) { w.APIVersion = "networking.k8s.io/" }),
			wantField: "spec.watchedResources[ingresses].apiVersion", wantType: field.ErrorTypeInvalid},

		// indexBy, selectors.
		{name: "indexBy with an empty step", edit: ingress(func(w *gatehousev1alpha1.WatchedResource) { w.IndexBy = []string{"metadata..name"} }),
			wantField: "spec.watchedResources[ingresses].indexBy", wantType: field.ErrorTypeInvalid},
		{name: "indexBy with an unterminated quote", edit: ingress(func(w *gatehousev1alpha1.WatchedResource) {
			w.IndexBy = []string{"metadata.namespace", "metadata.labels['x"}
		}), wantField: "spec.watchedResources[ingresses].indexBy", wantType: field.ErrorTypeInvalid},
		{name: "fieldSelector term without operator", edit: ingress(func(w *gatehousev1alpha1.WatchedResource) { w.FieldSelector = "spec.ingressClassName" }),
			wantField: "spec.watchedResources[ingresses].fieldSelector", wantType: field.ErrorTypeInvalid, wantText: "want path=value"},
		{name: "fieldSelector term without path", edit: ingress(func(w *gatehousev1alpha1.WatchedResource) { w.FieldSelector = "=haproxy" }),
			wantField: "spec.watchedResources[ingresses].fieldSelector", wantType: field.ErrorTypeInvalid, wantText: "the path is empty"},
		{name: "fieldSelector with an empty term", edit: ingress(func(w *gatehousev1alpha1.WatchedResource) { w.FieldSelector = "spec.ingressClassName=haproxy," }),
			wantField: "spec.watchedResources[ingresses].fieldSelector", wantType: field.ErrorTypeInvalid},
		{name: "labelSelector with an unknown operator", edit: ingress(func(w *gatehousev1alpha1.WatchedResource) {
			w.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
		}), wantField: "spec.watchedResources[ingresses].labelSelector", wantType: field.ErrorTypeInvalid},
		{name: "namespaceSelector with an unknown operator", edit: ingress(func(w *gatehousev1alpha1.WatchedResource) {
			w.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
		}), wantField: "spec.watchedResources[ingresses].namespaceSelector", wantType: field.ErrorTypeInvalid},

		// Output names become ConfigMap and Secret keys.
		{name: "map name with a slash", edit: template("maps", "a/b.map"),
			wantField: "spec.maps[a/b.map]", wantType: field.ErrorTypeInvalid},
		{name: "file name with a slash", edit: template("files", "pages/404.http"),
			wantField: "spec.files[pages/404.http]", wantType: field.ErrorTypeInvalid},
		{name: "certificate name with a slash", edit: template("sslCertificates", "../site.pem"),
			wantField: "spec.sslCertificates[../site.pem]", wantType: field.ErrorTypeInvalid},
		{name: "map name ..", edit: template("maps", ".."), wantField: "spec.maps[..]", wantType: field.ErrorTypeInvalid},
		{name: "file name too long", edit: template("files", strings.Repeat("f", 201)),
			wantField: "spec.files[" + strings.Repeat("f", 201) + "]", wantType: field.ErrorTypeInvalid},
		{name: "good output names", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.Files = map[string]gatehousev1alpha1.Template{"404.http": {Template: "x"}}
			s.SSLCertificates = map[string]gatehousev1alpha1.Template{"site_a-b.pem": {Template: "x"}}
		}},

		// The webhook's settings.
		{name: "unknown failurePolicy", edit: webhook("Sometimes", 0),
			wantField: "spec.validationWebhook.failurePolicy", wantType: field.ErrorTypeNotSupported},
		{name: "timeout 1", edit: webhook("", 1), wantField: "spec.validationWebhook.timeoutSeconds", wantType: field.ErrorTypeInvalid},
		{name: "timeout 31", edit: webhook("", 31), wantField: "spec.validationWebhook.timeoutSeconds", wantType: field.ErrorTypeInvalid},
		{name: "timeout negative", edit: webhook("", -5), wantField: "spec.validationWebhook.timeoutSeconds", wantType: field.ErrorTypeInvalid},
		{name: "timeout 2 and Ignore", edit: webhook(admissionregistrationv1.Ignore, 2)},
		{name: "timeout 30", edit: webhook(admissionregistrationv1.Fail, 30)},

		// Templates.
		{name: "unknown engine", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) { s.TemplatingSettings.Engine = "jinja2" },
			wantField: "spec.templatingSettings.engine", wantType: field.ErrorTypeNotSupported},
		{name: "explicit gotemplate engine", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) { s.TemplatingSettings.Engine = "gotemplate" }},
		{name: "empty haproxyConfig template", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) { s.HAProxyConfig.Template = " \n\t" },
			wantField: "spec.haproxyConfig.template", wantType: field.ErrorTypeRequired},
		{name: "haproxyConfig does not compile", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.HAProxyConfig.Template = "global\n{{ if .resources }}\n"
		}, wantField: "spec", wantType: field.ErrorTypeInvalid},
		{name: "map template does not compile", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			s.Maps["hosts.map"] = gatehousev1alpha1.Template{Template: "{{ range }}"}
		}, wantField: "spec", wantType: field.ErrorTypeInvalid, wantText: "hosts.map"},

		// Tests.
		{name: "fixture of an unknown watched resource", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			test := s.ValidationTests["ok-single-ingress"]
			test.Fixtures = map[string][]apiextensionsv1.JSON{"endpoints": {*rawJSON(`{"metadata":{"name":"a","namespace":"app"}}`)}}
			s.ValidationTests["ok-single-ingress"] = test
		}, wantField: "spec.validationTests[ok-single-ingress].fixtures[endpoints]", wantType: field.ErrorTypeNotSupported},
		{name: "fixture that is not an object", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			test := s.ValidationTests["ok-single-ingress"]
			test.Fixtures = map[string][]apiextensionsv1.JSON{"ingresses": {*rawJSON(`["a"]`)}}
			s.ValidationTests["ok-single-ingress"] = test
		}, wantField: "spec.validationTests[ok-single-ingress].fixtures[ingresses][0]", wantType: field.ErrorTypeInvalid},
		{name: "test without assertions", edit: func(s *gatehousev1alpha1.HAProxyTemplateConfigSpec) {
			test := s.ValidationTests["ok-single-ingress"]
			test.Assertions = nil
			s.ValidationTests["ok-single-ingress"] = test
		}, wantField: "spec.validationTests[ok-single-ingress].assertions", wantType: field.ErrorTypeRequired},

		// extraContext.
		{name: "extraContext a list", edit: extra(`[1, 2]`),
			wantField: "spec.templatingSettings.extraContext", wantType: field.ErrorTypeInvalid, wantText: "extraContext must be an object"},
		{name: "extraContext a string", edit: extra(`"x"`),
			wantField: "spec.templatingSettings.extraContext", wantType: field.ErrorTypeInvalid},
		{name: "extraContext an object", edit: extra(`{"a": {"b": [1]}}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadExample(t)
			tc.edit(&cfg.Spec)
			c, errs := Compile(&cfg.Spec, inProcess)
			if tc.wantField == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs.ToAggregate())
				}
				if c == nil {
					t.Fatalf("no compilation and no error")
				}
				return
			}
			if c != nil {
				t.Errorf("a refused spec returned a compilation")
			}
			for _, e := range errs {
				if e.Field == tc.wantField && e.Type == tc.wantType && strings.Contains(e.Error(), tc.wantText) {
					return
				}
			}
			t.Fatalf("no %s error at %s containing %q; got: %v", tc.wantType, tc.wantField, tc.wantText, errs.ToAggregate())
		})
	}
}

// TestOnDemandWatchesAreIndexedByNameAndHaveNoWebhook: an on-demand store
// fetches by namespace and name, and holds too little to judge changes by.
func TestOnDemandWatchesAreIndexedByNameAndHaveNoWebhook(t *testing.T) {
	cfgSpec := &hapticv1alpha1.HAProxyTemplateConfigSpec{
		WatchedResources: map[string]hapticv1alpha1.WatchedResource{
			"secrets": {APIVersion: "v1", Resources: "secrets", IndexBy: []string{"metadata.labels.team"}, Store: "on-demand", EnableValidationWebhook: true},
		},
		HAProxyConfig: hapticv1alpha1.Template{Template: "global\n"},
	}
	_, errs := CompileHaptic(cfgSpec, inProcess)
	text := errs.ToAggregate().Error()
	for _, want := range []string{"spec.watchedResources[secrets].indexBy", "spec.watchedResources[secrets].enableValidationWebhook"} {
		if !strings.Contains(text, want) {
			t.Errorf("errors %q lack %q", text, want)
		}
	}
}
