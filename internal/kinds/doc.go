// Package kinds follows optional kinds: kinds whose CustomResourceDefinition
// may be installed or removed while Gatehouse runs (VolumeSnapshots,
// ModuleConfig, Flux HelmRelease, the owner kinds Pods name, the kinds a
// configcheck config watches), or that Gatehouse may not be permitted to
// list and watch.
//
// One Tracker per process is a controller-runtime controller over CRDs
// (their schemas stripped). It builds the cache of every followed kind,
// scoped as its followers ask (namespaces, labels, fields), and shares it
// between the followers of the same kind, shape and scope, counted, as in
// Gatekeeper's pkg/watch: the kind's informer starts in that cache when a
// CRD serves the kind and Gatehouse may list and watch it, and is removed
// (cache.RemoveInformer) when the CRD stops serving it, without a restart;
// the cache stops with its last follower. Built-in kinds are always served.
//
// Each follower holds a Handle, which is also the kind's reader: NotFound
// and empty lists while the kind cannot be read, and Wait for its state, so
// that no module writes "the kind may not be served yet" itself.
package kinds
