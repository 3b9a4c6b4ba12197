// Package module defines how a Gatehouse module plugs into the host process.
//
// A module is a self-contained admission feature (pvsafe, nodegroup,
// placement, configcheck). It declares; the host provides:
//
//   - Webhooks declares the module's static webhooks without an API server,
//     so that `make generate` renders config/ and the Helm chart from the
//     declarations alone.
//   - Setup receives a Host: scoped caches (with readiness and the
//     gatehouse_cache_synced series wired), optional kinds whose CRDs come and
//     go (their caches built and shared by the host), webhooks registered and removed at run time, clients for the rare
//     live read or write, and a place for the module's own runnables.
//
// The server owns everything around a webhook call (TLS, request decoding,
// enforcement mode, metrics, the request logger in the context); a module
// only decides. Modules never import each other, and never build their own
// clientsets or informers: when the Host lacks something a module needs, the
// Host is extended.
package module
