// Package metrics defines configcheck's Prometheus metrics and registers
// them with controller-runtime's registry: checks, phases, decisions,
// publications, confinement, and the configs of both kinds by condition
// or validity (docs/monitoring.md lists them, with the alerts that read
// them).
//
// # Contract
//
// No label takes a value a tenant writes: a condition reason Gatehouse
// does not write is counted as Other, an unwritten one as NotWritten
// ([CountConfigs]); the one label from a spec, admission latency's
// watched resource, is a name a config's author chose, as its webhook's
// name is.
package metrics
