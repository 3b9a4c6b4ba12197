package configcheck

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/module/moduletest"
	"github.com/gatehouse-dev/gatehouse/internal/sandbox"
)

// TestSimulatedKernelFailsSetupBeforeAnything: with Kernel answering as a
// kernel without Landlock, Setup fails first, naming the simulation, and
// has asked the host for nothing (no worker, cache or controller to
// leave behind).
func TestSimulatedKernelFailsSetupBeforeAnything(t *testing.T) {
	m := New(Options{Kernel: func() sandbox.Capabilities {
		return sandbox.Capabilities{LandlockReason: "simulated", Seccomp: true}
	}})
	host := moduletest.New(runtime.NewScheme())
	err := m.Setup(context.Background(), host)
	if err == nil || !strings.Contains(err.Error(), "simulated") {
		t.Fatalf("Setup on a kernel without Landlock = %v, want the confinement refusal", err)
	}
	if len(host.Runnables) > 0 || m.renders != nil {
		t.Fatalf("Setup started %d runnables and render workers %v before refusing", len(host.Runnables), m.renders)
	}
}

// TestModuleFailedConditions: a config of a module that could not start
// says why (ModuleReady and WebhookActive False, ModuleFailed) and keeps
// what the module found before (Valid); once the module runs, its status
// write removes ModuleReady.
func TestModuleFailedConditions(t *testing.T) {
	status := &gatehousev1alpha1.HAProxyTemplateConfigStatus{}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: gatehousev1alpha1.ConditionValid, Status: metav1.ConditionTrue, Reason: "Valid"})
	markFailed(status, 3, "configcheck could not start: no Landlock")
	for _, kind := range []string{gatehousev1alpha1.ConditionModuleReady, gatehousev1alpha1.ConditionWebhookActive} {
		c := meta.FindStatusCondition(status.Conditions, kind)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != gatehousev1alpha1.ReasonModuleFailed || c.Message != "configcheck could not start: no Landlock" || c.ObservedGeneration != 3 {
			t.Fatalf("%s = %+v", kind, c)
		}
	}
	if !meta.IsStatusConditionTrue(status.Conditions, gatehousev1alpha1.ConditionValid) {
		t.Fatal("the Valid condition the module found was overwritten")
	}
	setReady(status, &configState{generation: 3})
	if c := meta.FindStatusCondition(status.Conditions, gatehousev1alpha1.ConditionModuleReady); c != nil {
		t.Fatalf("the running module kept %+v", c)
	}
}
