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
// stale cache never denies. The snapshot CRDs are optional: the module polls
// discovery and starts their informers when they appear, without a restart.
//
// # Bypass
//
// The label pv-safe.io/force-delete=true on the object being deleted allows
// the deletion; it is logged as an audit line with the user and counted.
// While a Namespace carrying the label terminates, the deletions of its
// claims (issued by the namespace controller) are allowed too, so that the
// namespace does not stay Terminating.
//
// # failurePolicy Fail
//
// The webhook fails closed: when Gatehouse cannot answer, DELETEs of these
// four kinds are refused rather than risking irreversible loss. Only DELETE is
// intercepted, so an outage never blocks creating or updating anything, and
// kube-system, kube-node-lease and Gatehouse's namespace are excluded. The
// break-glass step (README) removes the webhook configuration.
package pvsafe
