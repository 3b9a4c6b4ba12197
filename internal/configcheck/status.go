package configcheck

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"
)

func setValidity(status *gatehousev1alpha1.HAProxyTemplateConfigStatus, st *configState) {
	// Not run (the templates do not compile, or the tests could not run):
	// no count at all, rather than 0 of 0.
	status.TestsPassed, status.TestsTotal = nil, nil
	if st.report != nil {
		status.TestsTotal = ptr.To(int32(st.report.Total))
		status.TestsPassed = ptr.To(int32(st.report.Total - st.report.Failed))
	}
	switch validityOf(st) {
	case metrics.ValiditySpecInvalid:
		status.ValidationStatus = gatehousev1alpha1.ValidationInvalid
		status.ValidationMessage = guard.Bounded(st.invalid, 4000)
		setCondition(status, st, gatehousev1alpha1.ConditionValid, metav1.ConditionFalse, "SpecInvalid", guard.Bounded(st.invalid, 4000))
	case metrics.ValidityTestsNotRun:
		status.ValidationStatus = gatehousev1alpha1.ValidationUnknown
		status.ValidationMessage = guard.Bounded(st.invalid, 4000)
		setCondition(status, st, gatehousev1alpha1.ConditionValid, metav1.ConditionUnknown, "TestsNotRun", guard.Bounded(st.invalid, 4000))
	case metrics.ValidityTestsFailed:
		status.ValidationStatus = gatehousev1alpha1.ValidationInvalid
		status.ValidationMessage = guard.Bounded(st.failedTests(), 4000)
		setCondition(status, st, gatehousev1alpha1.ConditionValid, metav1.ConditionFalse, "TestsFailed", guard.Bounded(st.failedTests(), 4000))
	default:
		status.ValidationStatus = gatehousev1alpha1.ValidationValid
		msg := fmt.Sprintf("the templates compile and %d/%d embedded tests pass", *status.TestsPassed, *status.TestsTotal)
		status.ValidationMessage = msg
		setCondition(status, st, gatehousev1alpha1.ConditionValid, metav1.ConditionTrue, "Valid", msg)
	}
	hooks := 0
	if st.compiled != nil {
		for _, w := range st.compiled.Watched {
			if w.Webhook {
				hooks++
			}
		}
	}
	switch {
	case st.compiled == nil:
		setCondition(status, st, gatehousev1alpha1.ConditionWebhookActive, metav1.ConditionFalse, "ConfigInvalid", "an invalid config validates nothing (its watched resources are admitted with a warning)")
	case hooks == 0:
		setCondition(status, st, gatehousev1alpha1.ConditionWebhookActive, metav1.ConditionFalse, "NoWebhookResources", "no watched resource has enableValidationWebhook")
	default:
		setCondition(status, st, gatehousev1alpha1.ConditionWebhookActive, metav1.ConditionTrue, "Registered",
			fmt.Sprintf("%d watched resources are validated at admission (failurePolicy %s, timeout %ds)", hooks, st.compiled.Policy, st.compiled.Timeout))
	}
}

// setAuthorized says what the access controller found (accesscontroller.go).
func setAuthorized(status *gatehousev1alpha1.HAProxyTemplateConfigStatus, st *configState) {
	a := st.access.Load()
	switch {
	case st.compiled == nil:
		return
	case a == nil:
		setCondition(status, st, gatehousev1alpha1.ConditionAuthorized, metav1.ConditionUnknown, "Checking", "the author's rights are being checked")
	case !st.hasAuthor:
		setCondition(status, st, gatehousev1alpha1.ConditionAuthorized, metav1.ConditionFalse, "NoAuthor", guard.Bounded(a.Outputs, 1000))
	case a.Complete() && a.LeftOutMessage() == "":
		setCondition(status, st, gatehousev1alpha1.ConditionAuthorized, metav1.ConditionTrue, "Authorized",
			fmt.Sprintf("%s, the config's author, may have Gatehouse read everything it selects and publish it", a.Author))
	case a.Complete():
		setCondition(status, st, gatehousev1alpha1.ConditionAuthorized, metav1.ConditionTrue, "CheckedPerNamespace", guard.Bounded(a.LeftOutMessage(), 2000))
	default:
		setCondition(status, st, gatehousev1alpha1.ConditionAuthorized, metav1.ConditionFalse, "LeftOut", guard.Bounded(a.LeftOutMessage(), 2000))
	}
}

func setReady(status *gatehousev1alpha1.HAProxyTemplateConfigStatus, st *configState) {
	// The module runs: the condition written while it could not start
	// (failed.go) goes.
	meta.RemoveStatusCondition(&status.Conditions, gatehousev1alpha1.ConditionModuleReady)
	valid := meta.IsStatusConditionTrue(status.Conditions, gatehousev1alpha1.ConditionValid)
	pub := meta.IsStatusConditionTrue(status.Conditions, gatehousev1alpha1.ConditionPublished)
	if valid && pub {
		setCondition(status, st, gatehousev1alpha1.ConditionReady, metav1.ConditionTrue, "Ready", "valid, and the current rendering is published")
		return
	}
	setCondition(status, st, gatehousev1alpha1.ConditionReady, metav1.ConditionFalse, "NotReady", "see the Valid and Published conditions")
}

func setCondition(status *gatehousev1alpha1.HAProxyTemplateConfigStatus, st *configState, kind string, value metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: kind, Status: value, Reason: reason, Message: message, ObservedGeneration: st.generation,
	})
}
