// Package manifests renders the generated parts of config/ (the webhook
// configurations and CRD conversion patches for static deployments) and the
// Helm chart's generated inputs under charts/gatehouse/files/generated, from
// the modules' static webhook declarations and controller-gen's output.
// `make generate` runs it through hack/manifests; a unit test fails when the
// committed files are stale.
package manifests
