package pvsafe

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// InventoryRule is the rule of the inventory's findings in pvsafe's
// PolicyReports.
const InventoryRule = "deletion-loses-data"

// inventoryPeriod is how often the leader takes the inventory; the host's
// --report-interval overrides it.
const inventoryPeriod = 10 * time.Minute

// inventory is pvsafe's periodic check: the claims whose data a deletion
// would destroy now (of the claim, its namespace, or a StatefulSet that
// deletes its claims), judged by the decision the webhook makes, from the
// module's cache. A finding is a warning, not a violation: the webhook
// refuses the deletion; the report shows the platform team what it guards
// before anyone asks. The namespaces no webhook intercepts are left out.
func (m *Module) inventory(own string) module.Audit {
	excluded := map[string]bool{"kube-system": true, "kube-node-lease": true, own: true}
	return module.Audit{Period: inventoryPeriod, Run: func(ctx context.Context) ([]module.Finding, error) {
		claims, err := m.cached.Claims(ctx, "")
		if err != nil {
			return nil, err
		}
		byNamespace := map[string][]*corev1.PersistentVolumeClaim{}
		for _, pvc := range claims {
			if !excluded[pvc.Namespace] {
				byNamespace[pvc.Namespace] = append(byNamespace[pvc.Namespace], pvc)
			}
		}
		names := make([]string, 0, len(byNamespace))
		for ns := range byNamespace {
			names = append(names, ns)
		}
		sort.Strings(names)
		var findings []module.Finding
		for _, ns := range names {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// The rule a Namespace deletion applies to every claim in it.
			risks, err := assessClaims(ctx, byNamespace[ns], m.cached, ns)
			if err != nil {
				return nil, err
			}
			uids := map[string]*corev1.PersistentVolumeClaim{}
			for _, pvc := range byNamespace[ns] {
				uids[pvc.Name] = pvc
			}
			for _, r := range risks {
				findings = append(findings, claimFinding(uids[r.Claim], r))
			}
		}
		return findings, nil
	}}
}

// claimFinding is one claim at risk as its namespace's report shows it. The
// reason is the one a dry-run deletion of the claim gives anyone who may
// delete it (the volume's name and reclaim policy, the namespace's
// snapshots of it), so the report reveals nothing the namespace's tenant
// could not learn.
func claimFinding(pvc *corev1.PersistentVolumeClaim, r Risk) module.Finding {
	return module.Finding{
		Subject: corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
		Rule:    InventoryRule,
		Result:  module.ResultWarn,
		Message: fmt.Sprintf("deleting this claim, its namespace, or a StatefulSet that deletes its claims would destroy its data: %s. "+
			"pvsafe refuses such a deletion; to make it safe, take a VolumeSnapshot with a class that retains it, or set the volume's reclaimPolicy to Retain (docs/pvsafe.md)", r.Reason),
	}
}
