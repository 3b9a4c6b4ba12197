// Package testing is the parent of Gatehouse's test scaffolding: nothing
// under it ships in the gatehouse binary's serving path.
//
//   - testenv: a real control plane (etcd, kube-apiserver, controller
//     manager, scheduler) with Gatehouse in process, for e2e, chaos and
//     install tests;
//   - clustertest: what the e2e tests and the benchmarks both do on that
//     control plane (start it, start a Gatehouse that cleans up after
//     itself, wait for a condition, shared fixtures);
//   - devenv: the same control plane for make run and the load benchmark;
//   - fakenode: Nodes without a kubelet;
//   - admissionload: steady admission load through the API server;
//   - testlog: a logger for tests that assert what was logged.
package testing
