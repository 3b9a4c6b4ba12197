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

// The operator's match conditions are checked as kube-apiserver checks a
// webhook configuration's (names, and CEL that compiles to a bool), follow
// the declared conditions, and are refused where an objectSelector is.
func TestSettingsMatchConditions(t *testing.T) {
	notCI := admissionregistrationv1.MatchCondition{Name: "not-ci", Expression: `request.userInfo.username != "system:serviceaccount:ci:deployer"`}
	for _, tc := range []struct {
		conds []admissionregistrationv1.MatchCondition
		want  string
	}{
		{[]admissionregistrationv1.MatchCondition{{Name: "", Expression: "true"}}, "modules[m].webhook.matchConditions[0].name: Required value"},
		{[]admissionregistrationv1.MatchCondition{{Name: "a b", Expression: "true"}}, `modules[m].webhook.matchConditions[0].name: Invalid value: "a b"`},
		{[]admissionregistrationv1.MatchCondition{notCI, notCI}, `modules[m].webhook.matchConditions[1].name: Duplicate value: "not-ci"`},
		{[]admissionregistrationv1.MatchCondition{{Name: "x", Expression: " "}}, "modules[m].webhook.matchConditions[0].expression: Required value"},
		// Not CEL, not a bool, an undeclared variable: kube-apiserver
		// would refuse each in the configuration.
		{[]admissionregistrationv1.MatchCondition{{Name: "x", Expression: "request.userInfo.username =="}}, "modules[m].webhook.matchConditions[0].expression: Invalid value"},
		{[]admissionregistrationv1.MatchCondition{{Name: "x", Expression: `request.userInfo.username`}}, "modules[m].webhook.matchConditions[0].expression"},
		{[]admissionregistrationv1.MatchCondition{{Name: "x", Expression: `params.enabled`}}, "modules[m].webhook.matchConditions[0].expression"},
	} {
		errs := (&Settings{MatchConditions: tc.conds}).Validate(settingsPath)
		if errs.ToAggregate() == nil || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%+v: errors %v, want %q", tc.conds, errs, tc.want)
		}
	}
	ok := &Settings{MatchConditions: []admissionregistrationv1.MatchCondition{notCI,
		{Name: "labelled", Expression: `has(object.metadata.labels) && "team" in object.metadata.labels`},
		{Name: "may-delete", Expression: `authorizer.group("").resource("pods").check("delete").allowed()`}}}
	if errs := ok.Validate(settingsPath); len(errs) > 0 {
		t.Fatal(errs)
	}

	h := hooks()[0]
	h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "declared", Expression: "true"}}
	got, err := ok.Apply(h, settingsPath)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got.MatchConditions {
		names = append(names, c.Name)
	}
	if want := []string{"declared", "not-ci", "labelled", "may-delete"}; !reflect.DeepEqual(names, want) {
		t.Errorf("conditions %v, want %v", names, want)
	}
	if len(hooks()[0].MatchConditions) != 0 || len(h.MatchConditions) != 1 {
		t.Error("Apply changed the declaration")
	}
	rendered := Render([]module.Webhook{got}, Target{URL: "https://gh", Namespace: "gh"})
	if n := len(rendered.Validating.Webhooks[0].MatchConditions); n != 4 {
		t.Errorf("rendered with %d conditions, want 4", n)
	}

	clash := &Settings{MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "declared", Expression: "false"}}}
	if _, err := clash.Apply(h, settingsPath); err == nil || !strings.Contains(err.Error(), "webhook v.test declares conditions named declared already") {
		t.Errorf("a condition named as a declared one: %v", err)
	}
	guard := hooks()[0]
	guard.Locked = module.Locked{ObjectSelector: "tenants set labels"}
	if _, err := ok.Apply(guard, settingsPath); err == nil || !strings.Contains(err.Error(),
		"modules[m].webhook.matchConditions: Forbidden: webhook v.test takes no matchConditions: tenants set labels") {
		t.Errorf("a guard that refuses an objectSelector: %v", err)
	}
}
