// Package pvsafe refuses deletions that would lose data: Namespaces holding
// risky PersistentVolumeClaims, the claims themselves, PersistentVolumes and
// StatefulSets that delete their claims.
//
// # What is risky
//
// A bound claim is risky when its volume's reclaimPolicy is not Retain and no
// VolumeSnapshot of it is ready with a retained snapshot: the bound
// VolumeSnapshotContent's deletionPolicy is Retain or, while the content is
// not known, the VolumeSnapshotClass's is. Only a retained snapshot outlives a
// namespace deletion, which deletes the VolumeSnapshot objects with it.
//
// Snapshots name their claim by name only, and a name outlives its claim, so
// a snapshot counts only when it holds this volume's data: its bound content
// (bound back to it) was taken of the PV's CSI volume handle or, when that
// cannot be known, the snapshot is newer than the claim.
//
// PersistentVolumes: Retain is safe; Pending volumes hold nothing yet.
// Released volumes are allowed: their claim is gone and, with reclaimPolicy
// Delete, the PV controller is already deleting the volume; refusing the
// DELETE of the PV object would save nothing and leave the PV behind.
// Bound, Available and Failed volumes with reclaimPolicy Delete are allowed
// only with a retained snapshot of their claim: deleting the PV object
// deletes the volume, and an Available volume may be one an administrator
// freed by hand, data still on it.
//
// StatefulSets are risky only when persistentVolumeClaimRetentionPolicy
// whenDeleted is Delete and one of their claims is risky.
//
// # Decisions come from caches, denials are confirmed live
//
// The allow path reads only informer caches (claims, volumes, namespaces and,
// when the CRDs exist, snapshots, classes and contents) and the request's
// oldObject. Before a denial, the decision is taken again from the API
// server, so a snapshot that became ready a moment ago is honoured and a
// stale cache never denies. The snapshot CRDs are optional: the host's kind
// tracker (internal/kinds) watches CustomResourceDefinitions and starts or
// removes their informers as the CRDs appear or go, without a restart.
//
// # Bypass
//
// The label pv-safe.io/force-delete=true on the object being deleted allows
// a deletion that would otherwise be denied. In the authorized mode (the
// default) the deleting user must also be allowed the verb bypass on the
// object's resource in API group pvsafe.gatehouse.dev, asked with a
// SubjectAccessReview: who may label a claim (a namespace's edit role) is
// not who should destroy its data. The label mode is upstream pv-safe's: the
// label alone. Every admitted bypass is logged with the user, counted, and
// recorded as an Event on the object naming the user. While a Namespace
// carrying the label terminates, the deletions of its claims (issued by the
// namespace controller) are allowed too, so that the namespace does not stay
// Terminating.
//
// # failurePolicy Fail
//
// The webhook fails closed: when Gatehouse cannot answer, DELETEs of these
// four kinds are refused rather than risking irreversible loss. Only DELETE is
// intercepted, so an outage never blocks creating or updating anything, and
// kube-system, kube-node-lease and Gatehouse's namespace are excluded. The
// break-glass step (README) removes the webhook configuration.
package pvsafe
