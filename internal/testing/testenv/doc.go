// Package testenv starts a real control plane (etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler built by the Makefile into bin/,
// and fake Nodes from package fakenode) and a Gatehouse wired to it through
// real webhook configurations over TLS. Integration tests, `make run` and the
// benchmarks share it, so they all exercise the same path the API server
// takes, and the controllers act on what the modules admit as in a cluster.
package testenv
