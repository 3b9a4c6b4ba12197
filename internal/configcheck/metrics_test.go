package configcheck

import (
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
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
	got := countConfigs([]gatehousev1alpha1.HAProxyTemplateConfig{
		ready, ready,
		withConditions(cond("Valid", "False", "TestsFailed"), cond("Published", "False", "ConfigInvalid"), cond("Ready", "False", "NotReady")),
		withConditions(cond("Valid", "True", "Valid"), cond("Published", "False", strings.Repeat("x", 300)), cond("Ready", "Maybe", "NotReady")),
		withConditions(),
	})
	want := map[configSeries]int{
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
