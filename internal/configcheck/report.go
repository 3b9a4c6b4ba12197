package configcheck

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// Rules of configcheck's findings in its PolicyReports.
const (
	// ValidRule: the config itself is invalid, or its embedded tests fail.
	ValidRule = "config-valid"
	// RenderRule: the cluster's current state does not render, or its
	// rendering fails the check policy or haproxy -c.
	RenderRule = "current-state-renders"
)

// auditPeriod is how often the leader reports the configs; the host's
// --report-interval overrides it.
const auditPeriod = 5 * time.Minute

// audit reports the configs that are invalid or whose rendering of the
// cluster's current state fails now. The leader's publisher renders and
// checks each config whenever a watched resource changes and writes the
// outcome to the config's status; the audit reads those outcomes from the
// module's config cache rather than rendering again.
//
// A finding's message names the outcome's reason, never the status
// message: that quotes the template's fail text and haproxy's lines, which
// may carry data of the watched resources (a certificate, a Secret's
// value) that the config's author may read and a reader of the namespace's
// reports may not (docs/security.md).
func (m *Module) audit() module.Audit {
	return module.Audit{Period: auditPeriod, Run: func(ctx context.Context) ([]module.Finding, error) {
		var list gatehousev1alpha1.HAProxyTemplateConfigList
		if err := m.configs.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("list HAProxyTemplateConfigs from the cache: %w", err)
		}
		var findings []module.Finding
		for i := range list.Items {
			findings = append(findings, configFindings(&list.Items[i])...)
		}
		for _, st := range m.allStates() {
			findings = append(findings, hapticFindings(st)...)
		}
		return findings, nil
	}}
}

// renderFailures are the Published reasons that mean the current state's
// rendering fails, and what each says.
var renderFailures = map[string]string{
	"RenderFailed":       "the templates fail to render the cluster's current state",
	"PolicyRefused":      "the rendering of the cluster's current state breaks the check policy",
	"HAProxyCheckFailed": "haproxy -c rejects the rendering of the cluster's current state",
}

// configFindings are one config's findings, from the conditions of its
// current generation.
func configFindings(cfg *gatehousev1alpha1.HAProxyTemplateConfig) []module.Finding {
	subject := corev1.ObjectReference{
		APIVersion: gatehousev1alpha1.GroupVersion.String(), Kind: "HAProxyTemplateConfig",
		Namespace: cfg.Namespace, Name: cfg.Name, UID: cfg.UID,
	}
	current := func(kind string) *metav1.Condition {
		c := meta.FindStatusCondition(cfg.Status.Conditions, kind)
		if c == nil || c.ObservedGeneration != cfg.Generation {
			return nil
		}
		return c
	}
	var out []module.Finding
	if c := current(gatehousev1alpha1.ConditionValid); c != nil && c.Status == metav1.ConditionFalse {
		out = append(out, module.Finding{Subject: subject, Rule: ValidRule, Result: module.ResultFail,
			Message: fmt.Sprintf("the config is not valid (%s): it validates and publishes nothing; its Valid condition says why (kubectl -n %s get haproxytemplateconfig %s -o yaml)",
				c.Reason, cfg.Namespace, cfg.Name)})
	}
	if c := current(gatehousev1alpha1.ConditionPublished); c != nil && c.Status == metav1.ConditionFalse {
		if what, ok := renderFailures[c.Reason]; ok {
			out = append(out, module.Finding{Subject: subject, Rule: RenderRule, Result: module.ResultFail,
				Message: fmt.Sprintf("%s (%s): the last accepted rendering stays published; its Published condition says why (kubectl -n %s get haproxytemplateconfig %s -o yaml)",
					what, c.Reason, cfg.Namespace, cfg.Name)})
		}
	}
	return out
}

// hapticFindings are a haptic config's findings: it has no status of
// Gatehouse's, so its validity comes from the state loaded (validityOf).
// Its rendering of the cluster's state is haptic's controller's to judge
// and deploy: no RenderRule finding.
func hapticFindings(st *configState) []module.Finding {
	if st.key.Kind != spec.HapticKind {
		return nil
	}
	validity := validityOf(st)
	if validity == metrics.ValidityValid {
		return nil
	}
	what := "its watched resources are not validated"
	if st.compiled != nil {
		what = "changes to its watched resources are admitted with the failure as a warning"
	}
	return []module.Finding{{
		Subject: corev1.ObjectReference{APIVersion: hapticv1alpha1.GroupVersion.String(), Kind: "HAProxyTemplateConfig",
			Namespace: st.key.Namespace, Name: st.key.Name, UID: st.uid},
		Rule: ValidRule, Result: module.ResultFail,
		Message: fmt.Sprintf("the config is not valid in Gatehouse (%s): %s; Gatehouse's log (\"config loaded\") and `gatehouse configcheck test -f` on it say why",
			validity, what),
	}}
}
