// Package e2e holds integration tests: a real etcd and kube-apiserver (built
// into bin/ by the Makefile) call Gatehouse over TLS through real webhook
// configurations.
package e2e
