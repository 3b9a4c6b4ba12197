// Package module defines how a Gatehouse module plugs into the server.
//
// A module is a self-contained admission feature (pvsafe, nodegroup, placement,
// configcheck). It declares what it needs cached, and during Setup it returns the
// webhooks it serves. The server owns everything around a webhook (TLS, request
// decoding, enforcement mode, metrics, logging); a module only decides.
//
// Modules never import each other; they see the host only through this package.
package module
