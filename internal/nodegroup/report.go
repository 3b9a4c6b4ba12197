package nodegroup

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// PolicyRule is the rule of the periodic check's findings in nodegroup's
// ClusterPolicyReport.
const PolicyRule = "nodegroup-policy"

// auditPeriod is how often the leader re-checks the stored NodeGroups; the
// host's --report-interval overrides it.
const auditPeriod = 10 * time.Minute

// The periodic check lists the stored NodeGroups from the API server, a
// page at a time, on the leader only: caching every group on every replica
// for a check that runs every ten minutes would cost each replica memory
// for nothing.
// +kubebuilder:rbac:groups=deckhouse.io,resources=nodegroups,verbs=list

// audit re-checks every stored NodeGroup with today's policy: the checks an
// UPDATE that changes nothing would meet, against the cluster state as the
// caches hold it now. A group found here is one whose next write (a label,
// a scale) is refused until it is mended: a Secret or ModuleConfig that
// changed since the group was written, a node relabelled, a rule added in
// an upgrade.
func (m *Module) audit(host module.Host) module.Audit {
	return module.Audit{Period: auditPeriod, Run: func(ctx context.Context) ([]module.Finding, error) {
		if !host.Served(v1.GroupVersion.WithKind(kind)) {
			return nil, nil
		}
		var findings []module.Finding
		opts := []client.ListOption{client.Limit(200)}
		for {
			list := &v1.NodeGroupList{}
			if err := host.APIReader().List(ctx, list, opts...); err != nil {
				return nil, fmt.Errorf("list NodeGroups: %w", err)
			}
			for i := range list.Items {
				f, err := m.judge(&list.Items[i])
				if err != nil {
					return nil, err
				}
				if f != nil {
					findings = append(findings, *f)
				}
			}
			if list.Continue == "" {
				return findings, nil
			}
			opts = []client.ListOption{client.Limit(200), client.Continue(list.Continue)}
		}
	}}
}

// judge runs the validating policy on one stored group. The message holds
// the group's own fields and node names, as the webhook's denial does;
// ClusterPolicyReports are read by cluster administrators only.
func (m *Module) judge(ng *v1.NodeGroup) (*module.Finding, error) {
	state, err := m.val.state.snapshot(ng.Name)
	if err != nil {
		return nil, fmt.Errorf("NodeGroup %s cannot be checked: %w", ng.Name, err)
	}
	errs, _ := Validate(Request{Operation: admissionv1.Update, ClientVersion: hubVersion, Old: ng, New: ng}, state)
	if len(errs) == 0 {
		return nil, nil
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Field + ": " + e.Detail
	}
	return &module.Finding{
		Subject: corev1.ObjectReference{APIVersion: hubVersion, Kind: kind, Name: ng.Name, UID: ng.UID},
		Rule:    PolicyRule,
		Result:  module.ResultFail,
		Message: "the next write of this NodeGroup would be refused: " + strings.Join(lines, "\n"),
	}, nil
}
