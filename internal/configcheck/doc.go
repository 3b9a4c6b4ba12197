// Package configcheck is the configcheck module: dry-run validation of
// watched resources (Ingresses, Services, ...) against an
// HAProxyTemplateConfig (gatehouse.dev/v1alpha1), as
// seeds/validating-webhook-dry-run-spec.md describes.
//
// A change to a watched resource is admitted only if the config still
// renders with it (render, with an overlay of the proposed change on the
// stores the informers fill, run in a confined worker process by
// renderproc: a template is a program its config's author wrote), the
// rendering passes the check policy and the real `haproxy -c` (package
// haproxy: no Lua, commands or files outside the check; run confined by
// internal/sandbox, bounded, killed by context, cached by checksum), and the
// config's embedded tests pass (package suite; their result depends on the
// config alone, so they run once per config generation). Each phase's failure
// denies with a reason a person can act on: the template's fail text, the
// haproxy ALERT lines with the offending line quoted, or the list of failed
// tests.
//
// What haptic, the upstream project, does differently and this module fixes
// (docs/configcheck.md): the watched resource's label, field and namespace
// selectors apply at admission as in the store, so an Ingress of another
// class is admitted without rendering; DELETE is validated (deleting a
// Service a backend still needs is refused); the overlay keys the proposed
// object with the store's own indexer; a request is answered inside the
// webhook's timeout whatever the queue of checks (503, so the failure policy
// applies, rather than the API server's timeout); a denial from the caches
// is confirmed against the API server's lists before it is returned.
//
// Tenants share a config's render time and authors the render workers:
// each watched object is bounded by its config (spec.Bounds: maxObjectBytes,
// maxListLength), refused by itself when it is larger, and render workers,
// a config's turn and the config checks are handed out fairly (package
// fair: real changes first, parties in turn, a bounded number waiting).
//
// The webhooks of the watched resources are registered at run time, one per
// watched resource with enableValidationWebhook, with that config's
// failurePolicy and timeout; no config means no rules (fail-open, logged
// once per change into that state: FailOpenMessage). A config reaches
// only what its author may: its own webhook asks
// the API server whether the author holds the rights it exercises
// (authz). docs/security.md has the threat model.
//
// The leader publishes the accepted rendering of the cluster's state to a
// ConfigMap (certificates to a Secret) owned by the config, never to one it
// does not own, and keeps its status.
//
// Two controller-runtime controllers keep this: the config reconciler
// (reconciler.go, on every replica, since every replica decides) loads each
// config's generation into a configState (state.go): its compilation, its
// embedded tests' report (embeddedtests.go), and stores fed by shared
// informers (watch.go); then it registers every config's webhooks
// (webhooks.go). The publisher (publish.go, on the leader) renders, checks
// and writes the output (output.go) and the status (status.go).
//
// This package holds the module's state and is its glue: the webhooks, the
// controllers and what reads the cluster. What can be said of a config, a
// request or a rendering without the cluster lives in subpackages, each
// with a doc.go stating its contract: spec (a config read from its spec
// alone), authz (its author's rights and the signed author record), redact
// (what a tenant is shown of a denial), guard (an object's bounds, a
// config's turns and pending changes, shedding), judge (a rendering's
// verdict and a failure's attribution), ondemand (haptic's on-demand
// stores), output (what a config publishes) and metrics.
package configcheck
