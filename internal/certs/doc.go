// Package certs provides the webhook server's serving certificate from a
// directory or from a Kubernetes Secret, reloading it when it changes, and
// generates self-signed certificates for local runs and tests.
package certs
