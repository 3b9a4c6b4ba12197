// Package chaos holds fault tests that need Gatehouse as a process of its
// own (bin/gatehouse, built by make test) next to a control plane of their
// own: killing it, restarting it. They run with `make test` (go test
// ./test/...) and alone with `make chaos`.
package chaos
