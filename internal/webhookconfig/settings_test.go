package webhookconfig

import (
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

var settingsPath = field.NewPath("modules").Key("m").Child("webhook")

func TestSettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{FailurePolicy: ptr.To(admissionregistrationv1.FailurePolicyType("Open"))}, `modules[m].webhook.failurePolicy: Unsupported value: "Open": supported values: "Fail", "Ignore"`},
		{Settings{TimeoutSeconds: ptr.To[int32](0)}, "modules[m].webhook.timeoutSeconds: Invalid value: 0: must be between 1 and 30 seconds"},
		{Settings{TimeoutSeconds: ptr.To[int32](31)}, "must be between 1 and 30 seconds"},
		{Settings{NamespaceExclusions: []string{"ok", "Not_A_Namespace"}}, `modules[m].webhook.namespaceExclusions[1]: Invalid value: "Not_A_Namespace": not a namespace name`},
		{Settings{ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}}, "modules[m].webhook.objectSelector.matchExpressions[0].operator"},
	} {
		errs := tc.s.Validate(settingsPath)
		if errs.ToAggregate() == nil || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%+v: errors %v, want %q", tc.s, errs, tc.want)
		}
	}
	ok := Settings{FailurePolicy: ptr.To(admissionregistrationv1.Ignore), TimeoutSeconds: ptr.To[int32](30), NamespaceExclusions: []string{"tenant-a"},
		ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
	if errs := ok.Validate(settingsPath); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestSettingsApplyToRenderedWebhooks(t *testing.T) {
	s := &Settings{
		FailurePolicy:       ptr.To(admissionregistrationv1.Ignore),
		TimeoutSeconds:      ptr.To[int32](2),
		NamespaceExclusions: []string{"tenant-b", "tenant-a", "kube-system"},
		ObjectSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}},
	}
	var applied []module.Webhook
	for _, h := range hooks() {
		h, err := s.Apply(h, settingsPath)
		if err != nil {
			t.Fatal(err)
		}
		applied = append(applied, h)
	}
	r := Render(applied, Target{URL: "https://gh", Namespace: "gh", Instance: "second"})
	if r.Validating.Name != "second-validating" || r.Mutating.Name != "second-mutating" || r.Validating.Labels[InstanceLabel] != "second" {
		t.Fatalf("names %s %s, labels %v", r.Validating.Name, r.Mutating.Name, r.Validating.Labels)
	}
	v, m := r.Validating.Webhooks[0], r.Mutating.Webhooks[0]
	for _, got := range []struct {
		policy  admissionregistrationv1.FailurePolicyType
		timeout int32
		ns, obj *metav1.LabelSelector
	}{{*v.FailurePolicy, *v.TimeoutSeconds, v.NamespaceSelector, v.ObjectSelector}, {*m.FailurePolicy, *m.TimeoutSeconds, m.NamespaceSelector, m.ObjectSelector}} {
		if got.policy != admissionregistrationv1.Ignore || got.timeout != 2 || got.obj.MatchLabels["team"] != "x" {
			t.Errorf("policy %s timeout %d object selector %v", got.policy, got.timeout, got.obj)
		}
		// One exclusion by name, sorted, without duplicates.
		want := []metav1.LabelSelectorRequirement{{Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn,
			Values: []string{"gh", "kube-node-lease", "kube-system", "tenant-a", "tenant-b"}}}
		if !reflect.DeepEqual(got.ns.MatchExpressions, want) {
			t.Errorf("namespace selector %+v, want %+v", got.ns.MatchExpressions, want)
		}
	}
	if c := r.Conversions["things.example.com"]; c == nil {
		t.Fatal("the conversion webhook was dropped")
	}
	if h := hooks()[0]; h.FailurePolicy != admissionregistrationv1.Fail || h.NamespaceSelector != nil {
		t.Fatal("Apply changed the declaration")
	}
}

func TestSettingsRefusedByALockedWebhook(t *testing.T) {
	guard := hooks()[0]
	guard.Locked = module.Locked{FailurePolicy: "it keeps a boundary", ObjectSelector: "tenants set labels"}
	_, err := (&Settings{FailurePolicy: ptr.To(admissionregistrationv1.Ignore), ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}).Apply(guard, settingsPath)
	for _, want := range []string{
		"modules[m].webhook.failurePolicy: Forbidden: webhook v.test must stay Fail: it keeps a boundary",
		"modules[m].webhook.objectSelector: Forbidden: webhook v.test takes no objectSelector: tenants set labels",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
	// The declared policy itself, a timeout and exclusions stay allowed.
	if _, err := (&Settings{FailurePolicy: ptr.To(admissionregistrationv1.Fail), TimeoutSeconds: ptr.To[int32](3), NamespaceExclusions: []string{"x"}}).Apply(guard, settingsPath); err != nil {
		t.Fatal(err)
	}
}

func TestSettingsObjectSelectorContradictingTheDeclaration(t *testing.T) {
	h := hooks()[0]
	h.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	_, err := (&Settings{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "y"}}}).Apply(h, settingsPath)
	if err == nil || !strings.Contains(err.Error(), "it would match nothing: app=y (declared app=x)") {
		t.Fatalf("error %v", err)
	}
	got, err := (&Settings{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "y"}}}).Apply(h, settingsPath)
	if err != nil || !reflect.DeepEqual(got.ObjectSelector.MatchLabels, map[string]string{"app": "x", "team": "y"}) {
		t.Fatalf("merged %v, %v", got.ObjectSelector, err)
	}
}

// A webhook that locks its exclusions (configcheck's author and config
// webhooks) refuses namespaceExclusions: it sees every namespace but the
// always-excluded ones.
func TestSettingsLockedNamespaceExclusions(t *testing.T) {
	guard := hooks()[0]
	guard.Locked = module.Locked{NamespaceExclusions: "records nobody checked"}
	_, err := (&Settings{NamespaceExclusions: []string{"tenant-a"}}).Apply(guard, settingsPath)
	want := "modules[m].webhook.namespaceExclusions: Forbidden: webhook v.test excludes only kube-system, kube-node-lease and Gatehouse's namespace: records nobody checked"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
	if _, err := (&Settings{TimeoutSeconds: ptr.To[int32](3)}).Apply(guard, settingsPath); err != nil {
		t.Fatal(err)
	}
}
