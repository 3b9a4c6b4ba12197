// Package chaos holds fault tests that need Gatehouse as a process of its
// own (bin/gatehouse, built by make test) next to a control plane of their
// own: killing it, restarting it. They run with `make test` (go test
// ./test/...) and alone with `make chaos`.
//
// They must hold on a loaded machine (CI runs them beside the e2e tests on
// two cores), so they wait for events, never for a fixed time: a killed
// kube-apiserver until every thread is gone and its port can be bound, a
// restarted one until /readyz passes, an informer's relist until a refusal
// shows the cache holds newer objects. Every log (etcd, kube-apiserver, the
// restarted kube-apiserver, the controllers, Gatehouse) lives in the
// directory from logDir, copied where it outlives the test when the test
// fails. docs/reliability.md, "Fault tests on a loaded machine", has the
// causes found and the runs measured.
package chaos
