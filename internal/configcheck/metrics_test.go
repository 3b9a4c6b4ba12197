package configcheck

import (
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
)

func withConditions(conditions ...metav1.Condition) gatehousev1alpha1.HAProxyTemplateConfig {
	return gatehousev1alpha1.HAProxyTemplateConfig{Status: gatehousev1alpha1.HAProxyTemplateConfigStatus{Conditions: conditions}}
}

// The counts follow the configs' conditions; a reason Gatehouse never
// writes, as anyone allowed to write the status could, is counted as
// Other, so that the series stay a bounded set.
func TestConfigsAreCountedByConditionWithBoundedReasons(t *testing.T) {
	cond := func(kind string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: kind, Status: status, Reason: reason}
	}
	ready := withConditions(cond("Valid", "True", "Valid"), cond("Published", "True", "Published"), cond("Ready", "True", "Ready"))
	got := metrics.CountConfigs([]gatehousev1alpha1.HAProxyTemplateConfig{
		ready, ready,
		withConditions(cond("Valid", "False", "TestsFailed"), cond("Published", "False", "ConfigInvalid"), cond("Ready", "False", "NotReady")),
		withConditions(cond("Valid", "True", "Valid"), cond("Published", "False", strings.Repeat("x", 300)), cond("Ready", "Maybe", "NotReady")),
		withConditions(),
	})
	want := map[metrics.ConfigSeries]int{
		{"Valid", "True", "Valid"}:              3,
		{"Valid", "False", "TestsFailed"}:       1,
		{"Valid", "Unknown", "NotWritten"}:      1,
		{"Published", "True", "Published"}:      2,
		{"Published", "False", "ConfigInvalid"}: 1,
		{"Published", "False", "Other"}:         1,
		{"Published", "Unknown", "NotWritten"}:  1,
		{"Ready", "True", "Ready"}:              2,
		{"Ready", "False", "NotReady"}:          1,
		{"Ready", "Unknown", "NotReady"}:        1,
		{"Ready", "Unknown", "NotWritten"}:      1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("counts:\n got %v\nwant %v", got, want)
	}
}

// TestHapticConfigsAreCountedByValidity: haptic's configs have no status
// of Gatehouse's, so the gauge counts the states loaded, as Gatehouse's
// kind's Valid condition would say, and every validity has a series.
func TestHapticConfigsAreCountedByValidity(t *testing.T) {
	m := &Module{states: map[spec.Key]*configState{}}
	failing := suite.Report{Total: 2, Failed: 1}
	passing := suite.Report{Total: 2}
	for name, st := range map[string]*configState{
		"broken": {invalid: "does not compile"},
		"failed": {compiled: &spec.Compiled{}, report: &failing},
		"unrun":  {compiled: &spec.Compiled{}, invalid: "the embedded tests could not run"},
		"fine":   {compiled: &spec.Compiled{}, report: &passing},
		"fine2":  {compiled: &spec.Compiled{}, report: &passing},
	} {
		st.key = spec.Key{Kind: spec.HapticKind, NamespacedName: types.NamespacedName{Namespace: "lb", Name: name}}
		m.states[st.key] = st
	}
	ours := spec.GatehouseKey(types.NamespacedName{Namespace: "lb", Name: "fine"})
	m.states[ours] = &configState{key: ours, invalid: "not counted here"}
	m.countHapticConfigs()
	for validity, want := range map[string]float64{"valid": 2, "spec-invalid": 1, "tests-failed": 1, "tests-not-run": 1} {
		if got := testutil.ToFloat64(metrics.HapticConfigs.WithLabelValues(validity)); got != want {
			t.Errorf("%s: %v, want %v", validity, got, want)
		}
	}
	m.states = map[spec.Key]*configState{}
	m.countHapticConfigs()
	if got := testutil.CollectAndCount(metrics.HapticConfigs); got != len(metrics.HapticValidities) {
		t.Errorf("%d series without configs, want one per validity", got)
	}
}

// TestHapticConfigsAreReported: an invalid haptic config is a finding of
// the PolicyReport, named by its kind and reason only (the state's text
// may quote what the namespace's report readers may not read).
func TestHapticConfigsAreReported(t *testing.T) {
	key := spec.Key{Kind: spec.HapticKind, NamespacedName: types.NamespacedName{Namespace: "lb", Name: "edge"}}
	broken := &configState{key: key, uid: "u1", invalid: "spec.haproxyConfig: secret-word"}
	got := hapticFindings(broken)
	if len(got) != 1 || got[0].Subject.APIVersion != "haproxy-haptic.org/v1alpha1" || got[0].Subject.Name != "edge" || got[0].Rule != ValidRule ||
		!strings.Contains(got[0].Message, "spec-invalid") || strings.Contains(got[0].Message, "secret-word") {
		t.Fatalf("findings %+v", got)
	}
	passing := suite.Report{Total: 1}
	if got := hapticFindings(&configState{key: key, compiled: &spec.Compiled{}, report: &passing}); len(got) != 0 {
		t.Errorf("a valid config: %+v", got)
	}
	if got := hapticFindings(&configState{key: spec.GatehouseKey(key.NamespacedName), invalid: "x"}); len(got) != 0 {
		t.Errorf("Gatehouse's kind is reported from its status: %+v", got)
	}
}
