// Package kinds follows optional kinds: kinds whose CustomResourceDefinition
// may be installed or removed while Gatehouse runs (VolumeSnapshots,
// ModuleConfig, Flux HelmRelease, the owner kinds Pods name, the kinds a
// configcheck config watches), or that Gatehouse may not be permitted to
// list and watch.
//
// One Tracker per process is a controller-runtime controller over CRDs
// (their schemas stripped): for every followed kind it starts the kind's
// informer in the follower's cache when a CRD serves the kind and Gatehouse
// may list and watch it, and removes it (cache.RemoveInformer) when the CRD
// stops serving it, without a restart. Followers of the same kind in the
// same cache share one informer, counted, as in Gatekeeper's pkg/watch.
// Built-in kinds are always served.
//
// Each follower holds a Handle, which is also the kind's reader: NotFound
// and empty lists while the kind cannot be read, and Wait for its state, so
// that no module writes "the kind may not be served yet" itself.
package kinds
