// Package clustertest holds what the e2e tests (test/e2e) and the
// benchmarks (test/bench) both do against a real control plane from
// package testenv: start it for a test binary, start an in-process
// Gatehouse that cleans up after itself, wait for a condition, and build
// the fixtures both measure and assert on (the configcheck example config,
// NodeGroups through every version, schemaless CRDs). It takes the control
// plane as an argument and names no module: the callers pick the modules.
package clustertest
