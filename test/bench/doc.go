// Package bench holds Gatehouse's Go benchmarks that need a real control
// plane (etcd, kube-apiserver and the controllers from
// internal/testing/testenv): decisions from informer caches against the
// API server's way, cache memory, conversion and the configcheck
// rendering at 1,000 objects. Its test binary starts the control plane
// only when a benchmark is asked for (-bench), so that make test compiles
// and vets the benchmarks without paying for one. The HTTPS load generator
// is loadgen, beside it.
package bench
