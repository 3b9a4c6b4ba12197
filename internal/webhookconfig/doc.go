// Package webhookconfig renders the API server side of Gatehouse's webhooks
// (ValidatingWebhookConfiguration, MutatingWebhookConfiguration and the CRD
// conversion stanza) from the modules' declarations, and applies them.
//
// Every admission webhook excludes kube-system, kube-node-lease and
// Gatehouse's own namespace through the kubernetes.io/metadata.name label,
// which the API server sets on every namespace and users cannot remove.
package webhookconfig
