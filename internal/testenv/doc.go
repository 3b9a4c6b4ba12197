// Package testenv starts a real control plane (etcd and kube-apiserver built
// by the Makefile into bin/) and a Gatehouse wired to it through real webhook
// configurations over TLS. Integration tests, `make run` and the benchmarks
// share it, so they all exercise the same path the API server takes.
package testenv
