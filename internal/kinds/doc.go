// Package kinds follows optional kinds: kinds whose CustomResourceDefinition
// may be installed or removed while Gatehouse runs (VolumeSnapshots,
// ModuleConfig, Flux HelmRelease, the kinds a configcheck config watches).
//
// One Tracker per process watches CRDs (their schemas stripped) and, for
// every followed kind, starts the kind's informer in the follower's cache
// when the CRD serves the kind and removes it (cache.RemoveInformer) when the
// CRD stops serving it, without a restart. Followers of the same kind in the
// same cache share one informer, counted, as in Gatekeeper's pkg/watch.
// Built-in kinds are always served.
package kinds
