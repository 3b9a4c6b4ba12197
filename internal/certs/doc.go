// Package certs provides the webhook server's serving certificate and the CA
// bundle clients must trust: from a directory (controller-runtime's
// certwatcher), from a Secret (cert-manager's or the operator's), or from a
// Secret Gatehouse creates and rotates itself (NewSelfManaged), with a CA
// rotation that keeps the old CA trusted until every replica serves a
// certificate from the new one. It also generates self-signed certificates
// for local runs and tests.
package certs
