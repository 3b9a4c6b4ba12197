// Package ondemand serves haptic's store: on-demand (a haptic config's
// Secrets, in its ssl library), which names objects Gatehouse does not
// watch: haptic's controller fetches one when a template asks for it by
// namespace and name, rather than caching every Secret of the cluster.
// Gatehouse does the same, in its own order of things: a rendering runs in
// a confined worker without the API, so it records the keys it asked of an
// on-demand store that the store did not hold (render.Missed); configcheck
// then fetches each (through [Fetch]), for the config's author only, and
// renders again (onDemandRounds at most).
//
// Who may have what read: an object is fetched for a config only when its
// author may get it (a SubjectAccessReview, through the shared access
// cache); anything else, like an object that does not exist, is absent to
// the templates (haptic's own templates then fail() with "not found"). A
// config without a verified author has nothing fetched. Gatehouse needs
// get on the kind (the chart's modules.configcheck.onDemandResources);
// without it every object is absent, and the log says why once.
//
// Freshness and load: the live reads are documented ones
// (docs/configcheck.md). What was fetched, found or absent, serves
// renderings for onDemandTTL; then a decision fetches again the objects
// held longest (onDemandRefresh of them at most, before rendering), and
// an absence is forgotten, so that a rendering asking again fetches it.
// A decision fetches at most onDemandFetchBudget objects in all: the keys
// come from the templates and from what tenants write (an Ingress names
// its TLS Secret), and no write may make Gatehouse read the API server
// without bound. A denial's confirmation renders from an uncached set:
// everything it needs fetched anew (onDemandConfirmBudget), so a Secret
// created a moment before the Ingress naming it is found there, and a
// stale object never stands behind a denial.
//
// # Contract
//
//   - Nothing of an on-demand kind is listed or watched: a [Set] holds only
//     what renderings asked for, at most 8 MiB of JSON a config (the
//     oldest fetched going first; one object past the watched resource's
//     bounds is absent, as a watched store refuses it).
//   - [Render] fetches only keys a rendering reported missing, at most 64
//     a decision (16 renewing what is held), and renders at most 4 times.
//   - A fetch that fails is an [*Error]: the decision is undecided, never
//     a denial for a missing object.
//   - The fetch itself is the caller's: configcheck asks a
//     SubjectAccessReview of the config's author before each live read.
package ondemand
