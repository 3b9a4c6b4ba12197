//go:build tools

// Package tools pins the Kubernetes 1.33 binaries the minor matrix builds:
// the control plane the e2e and install tests start (make tools-minors).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
