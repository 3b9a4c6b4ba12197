package pvsafe

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BypassLabel on the object being deleted allows the deletion.
const BypassLabel = "pv-safe.io/force-delete"

// Snapshot is what the decision needs to know about one VolumeSnapshot.
type Snapshot struct {
	Name string
	// Ready is status.readyToUse.
	Ready bool
	// Retained says the snapshot data outlives the VolumeSnapshot object:
	// deletionPolicy Retain on the bound content or, failing that, the class.
	Retained bool
	// Policy names where Retained came from, for messages.
	Policy string
	// Created is the VolumeSnapshot's creationTimestamp.
	Created metav1.Time
	// SourceVolumeHandle is the CSI volume handle the bound
	// VolumeSnapshotContent was taken of, or "" when that is not known: no
	// content (yet), a pre-provisioned content (snapshotHandle only), or a
	// content that is not bound back to this snapshot.
	SourceVolumeHandle string
}

// holds tells whether s holds the data of volume pv, now bound to a claim
// created at claimCreated (zero when the claim is not known). Snapshots are
// found by claim name, and a claim name outlives its claim: a snapshot of an
// earlier claim of the same name holds another volume's data. When the
// content says which volume it was taken of, that decides; when it cannot be
// known, only a snapshot taken after the claim was created can be of it.
// creationTimestamps have a resolution of one second, so a snapshot of the
// same second as the claim does not count.
func holds(s Snapshot, pv *corev1.PersistentVolume, claimCreated metav1.Time) (bool, string) {
	if handle := volumeHandle(pv); handle != "" && s.SourceVolumeHandle != "" {
		if s.SourceVolumeHandle == handle {
			return true, ""
		}
		return false, fmt.Sprintf("VolumeSnapshot %s was taken of another volume, not %s", s.Name, pv.Name)
	}
	if !claimCreated.IsZero() && s.Created.After(claimCreated.Time) {
		return true, ""
	}
	return false, fmt.Sprintf("VolumeSnapshot %s may hold an earlier claim's data: its content does not say which volume it was taken of, and it is not newer than the claim", s.Name)
}

// volumeHandle is pv's CSI volume handle, "" for other volumes.
func volumeHandle(pv *corev1.PersistentVolume) string {
	if pv == nil || pv.Spec.CSI == nil {
		return ""
	}
	return pv.Spec.CSI.VolumeHandle
}

// Lookup reads the cluster state a decision needs. One implementation reads
// informer caches, another the API server (to confirm denials).
type Lookup interface {
	// Volume returns the PV, or nil when it does not exist.
	Volume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
	// Volumes returns the PVs of the given names that exist, by name. For
	// many names a live reader lists once instead of asking one by one.
	Volumes(ctx context.Context, names []string) (map[string]*corev1.PersistentVolume, error)
	// Claims returns the PVCs of a namespace.
	Claims(ctx context.Context, namespace string) ([]*corev1.PersistentVolumeClaim, error)
	// Claim returns one PVC, or nil when it does not exist.
	Claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	// Snapshots returns the namespace's VolumeSnapshots by source PVC name.
	Snapshots(ctx context.Context, namespace string) (map[string][]Snapshot, error)
	// Namespace returns the namespace, or nil when it does not exist.
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
	// RetainedSnapshotClass names a VolumeSnapshotClass with deletionPolicy
	// Retain, for the advice in messages; "" if none.
	RetainedSnapshotClass(ctx context.Context) string
}

// Risk is one claim whose data a deletion would destroy.
type Risk struct {
	Namespace, Claim string
	Volume           string
	Reason           string
}

// Verdict is the outcome of one decision.
type Verdict struct {
	Allowed bool
	// Reason says why the deletion is safe (allowed) or the subject of the
	// risks (denied).
	Reason string
	Risks  []Risk
	// CascadeBypass marks a claim allowed because its namespace is being
	// deleted with the bypass label.
	CascadeBypass bool
}

func allow(format string, args ...any) Verdict {
	return Verdict{Allowed: true, Reason: fmt.Sprintf(format, args...)}
}

// assessClaim is the core rule for one claim. It returns "" when deleting the
// claim keeps its data, else the reason it does not.
func assessClaim(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, snapshots []Snapshot) (risk string, safe string) {
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return "", "it is not bound to a volume"
	}
	if pv == nil {
		return "", fmt.Sprintf("its volume %s no longer exists", pvc.Spec.VolumeName)
	}
	policy := pv.Spec.PersistentVolumeReclaimPolicy
	if policy == corev1.PersistentVolumeReclaimRetain {
		return "", fmt.Sprintf("volume %s has reclaimPolicy Retain", pv.Name)
	}
	if s, ok := qualifying(snapshots, pv, pvc.CreationTimestamp); ok {
		return "", fmt.Sprintf("VolumeSnapshot %s is ready and retained (%s) and holds this volume's data", s.Name, s.Policy)
	}
	return fmt.Sprintf("volume %s has reclaimPolicy %s and %s", pv.Name, policyName(policy), describeSnapshots(snapshots, pv, pvc.CreationTimestamp)), ""
}

func policyName(p corev1.PersistentVolumeReclaimPolicy) string {
	if p == "" {
		return "Delete"
	}
	return string(p)
}

func qualifying(snapshots []Snapshot, pv *corev1.PersistentVolume, claimCreated metav1.Time) (Snapshot, bool) {
	for _, s := range snapshots {
		if s.Ready && s.Retained {
			if ok, _ := holds(s, pv, claimCreated); ok {
				return s, true
			}
		}
	}
	return Snapshot{}, false
}

// describeSnapshots explains why none of the snapshots qualifies.
func describeSnapshots(snapshots []Snapshot, pv *corev1.PersistentVolume, claimCreated metav1.Time) string {
	if len(snapshots) == 0 {
		return "no VolumeSnapshot"
	}
	var parts []string
	for _, s := range snapshots {
		switch ok, other := holds(s, pv, claimCreated); {
		case !s.Ready:
			parts = append(parts, fmt.Sprintf("VolumeSnapshot %s is not ready", s.Name))
		case !s.Retained:
			parts = append(parts, fmt.Sprintf("VolumeSnapshot %s is not retained (%s)", s.Name, s.Policy))
		case !ok:
			parts = append(parts, other)
		}
	}
	return "no ready, retained VolumeSnapshot of this volume (" + strings.Join(parts, "; ") + ")"
}

// DecideClaim decides the deletion of a PVC.
func DecideClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim, l Lookup) (Verdict, error) {
	ns, err := l.Namespace(ctx, pvc.Namespace)
	if err != nil {
		return Verdict{}, err
	}
	if ns != nil && ns.DeletionTimestamp != nil && ns.Labels[BypassLabel] == "true" {
		v := allow("namespace %s is being deleted with %s=true", pvc.Namespace, BypassLabel)
		v.CascadeBypass = true
		return v, nil
	}
	var pv *corev1.PersistentVolume
	if pvc.Spec.VolumeName != "" && pvc.Status.Phase == corev1.ClaimBound {
		if pv, err = l.Volume(ctx, pvc.Spec.VolumeName); err != nil {
			return Verdict{}, err
		}
	}
	var snapshots []Snapshot
	if pv != nil && pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		byClaim, err := l.Snapshots(ctx, pvc.Namespace)
		if err != nil {
			return Verdict{}, err
		}
		snapshots = byClaim[pvc.Name]
	}
	risk, safe := assessClaim(pvc, pv, snapshots)
	if risk == "" {
		return allow("PersistentVolumeClaim %s/%s is safe to delete: %s", pvc.Namespace, pvc.Name, safe), nil
	}
	return Verdict{Reason: fmt.Sprintf("PersistentVolumeClaim '%s/%s'", pvc.Namespace, pvc.Name),
		Risks: []Risk{{Namespace: pvc.Namespace, Claim: pvc.Name, Volume: pvc.Spec.VolumeName, Reason: risk}}}, nil
}

// DecideVolume decides the deletion of a PV.
func DecideVolume(ctx context.Context, pv *corev1.PersistentVolume, l Lookup) (Verdict, error) {
	policy := pv.Spec.PersistentVolumeReclaimPolicy
	switch {
	case policy == corev1.PersistentVolumeReclaimRetain:
		return allow("PersistentVolume %s has reclaimPolicy Retain", pv.Name), nil
	case pv.Status.Phase == corev1.VolumePending:
		return allow("PersistentVolume %s is Pending and holds no data yet", pv.Name), nil
	case pv.Status.Phase == corev1.VolumeReleased:
		return allow("PersistentVolume %s is Released: its claim is gone and reclaimPolicy %s is already being applied", pv.Name, policyName(policy)), nil
	}
	claim := pv.Spec.ClaimRef
	if claim != nil && claim.Name != "" {
		byClaim, err := l.Snapshots(ctx, claim.Namespace)
		if err != nil {
			return Verdict{}, err
		}
		// The claim's age decides for snapshots whose content does not name
		// the volume; only the claim claimRef points to (same UID) counts.
		var claimCreated metav1.Time
		if byClaim[claim.Name] != nil {
			pvc, err := l.Claim(ctx, claim.Namespace, claim.Name)
			if err != nil {
				return Verdict{}, err
			}
			if pvc != nil && (claim.UID == "" || claim.UID == pvc.UID) {
				claimCreated = pvc.CreationTimestamp
			}
		}
		if s, ok := qualifying(byClaim[claim.Name], pv, claimCreated); ok {
			return allow("VolumeSnapshot %s/%s of claim %s is ready and retained (%s) and holds this volume's data", claim.Namespace, s.Name, claim.Name, s.Policy), nil
		}
		reason := fmt.Sprintf("reclaimPolicy %s deletes the volume, bound to %s/%s, and there is %s", policyName(policy), claim.Namespace, claim.Name, describeSnapshots(byClaim[claim.Name], pv, claimCreated))
		return Verdict{Reason: fmt.Sprintf("PersistentVolume '%s'", pv.Name),
			Risks: []Risk{{Namespace: claim.Namespace, Claim: claim.Name, Volume: pv.Name, Reason: reason}}}, nil
	}
	reason := fmt.Sprintf("reclaimPolicy %s deletes the volume; it is %s and no claim references it, so no snapshot can be matched to it", policyName(policy), phaseName(pv.Status.Phase))
	return Verdict{Reason: fmt.Sprintf("PersistentVolume '%s'", pv.Name), Risks: []Risk{{Volume: pv.Name, Reason: reason}}}, nil
}

func phaseName(p corev1.PersistentVolumePhase) string {
	if p == "" {
		return "without a phase"
	}
	return string(p)
}

// DecideNamespace decides the deletion of a Namespace: every risky bound
// claim in it is reported.
func DecideNamespace(ctx context.Context, ns *corev1.Namespace, l Lookup) (Verdict, error) {
	claims, err := l.Claims(ctx, ns.Name)
	if err != nil {
		return Verdict{}, err
	}
	risks, err := assessClaims(ctx, claims, l, ns.Name)
	if err != nil {
		return Verdict{}, err
	}
	if len(risks) == 0 {
		return allow("Namespace %s holds no claim whose data would be lost (%d claims)", ns.Name, len(claims)), nil
	}
	return Verdict{Reason: fmt.Sprintf("Namespace '%s'", ns.Name), Risks: risks}, nil
}

// DecideStatefulSet decides the deletion of a StatefulSet: only one that
// deletes its claims can lose data.
func DecideStatefulSet(ctx context.Context, sts *appsv1.StatefulSet, l Lookup) (Verdict, error) {
	retention := sts.Spec.PersistentVolumeClaimRetentionPolicy
	if retention == nil || retention.WhenDeleted != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
		return allow("StatefulSet %s/%s retains its claims when deleted", sts.Namespace, sts.Name), nil
	}
	if len(sts.Spec.VolumeClaimTemplates) == 0 {
		return allow("StatefulSet %s/%s has no volumeClaimTemplates", sts.Namespace, sts.Name), nil
	}
	all, err := l.Claims(ctx, sts.Namespace)
	if err != nil {
		return Verdict{}, err
	}
	// Claims are named <template>-<statefulset>-<ordinal>; ordinals beyond
	// the current replicas (after a scale-down) are deleted too.
	var patterns []*regexp.Regexp
	for _, t := range sts.Spec.VolumeClaimTemplates {
		patterns = append(patterns, regexp.MustCompile("^"+regexp.QuoteMeta(t.Name+"-"+sts.Name+"-")+"[0-9]+$"))
	}
	var owned []*corev1.PersistentVolumeClaim
	for _, c := range all {
		for _, p := range patterns {
			if p.MatchString(c.Name) {
				owned = append(owned, c)
				break
			}
		}
	}
	risks, err := assessClaims(ctx, owned, l, sts.Namespace)
	if err != nil {
		return Verdict{}, err
	}
	if len(risks) == 0 {
		return allow("StatefulSet %s/%s deletes %d claims, none of which would lose data", sts.Namespace, sts.Name, len(owned)), nil
	}
	return Verdict{Reason: fmt.Sprintf("StatefulSet '%s/%s' (persistentVolumeClaimRetentionPolicy.whenDeleted: Delete)", sts.Namespace, sts.Name), Risks: risks}, nil
}

func assessClaims(ctx context.Context, claims []*corev1.PersistentVolumeClaim, l Lookup, namespace string) ([]Risk, error) {
	var names []string
	for _, pvc := range claims {
		if pvc.Spec.VolumeName != "" && pvc.Status.Phase == corev1.ClaimBound {
			names = append(names, pvc.Spec.VolumeName)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	volumes, err := l.Volumes(ctx, names)
	if err != nil {
		return nil, err
	}
	var snapshots map[string][]Snapshot
	var risks []Risk
	for _, pvc := range claims {
		if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
			continue
		}
		pv := volumes[pvc.Spec.VolumeName]
		if pv != nil && pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain && snapshots == nil {
			if snapshots, err = l.Snapshots(ctx, namespace); err != nil {
				return nil, err
			}
		}
		if risk, _ := assessClaim(pvc, pv, snapshots[pvc.Name]); risk != "" {
			risks = append(risks, Risk{Namespace: pvc.Namespace, Claim: pvc.Name, Volume: pvc.Spec.VolumeName, Reason: risk})
		}
	}
	sort.Slice(risks, func(i, j int) bool { return risks[i].Claim < risks[j].Claim })
	return risks, nil
}
