// Package app assembles the Gatehouse process: a controller-runtime manager
// with a scoped cache, the webhook server, the certificate source and the
// enabled modules.
package app
