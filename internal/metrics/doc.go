// Package metrics holds Gatehouse's Prometheus collectors. They are registered
// on controller-runtime's registry, which the manager serves on its own port.
package metrics
