// Package devenv runs a local Gatehouse environment: a real control plane
// from bin/ (etcd, kube-apiserver, kube-controller-manager, kube-scheduler
// and fake Nodes; see testenv.StartControlPlane), an admin kubeconfig,
// self-generated certificates and the gatehouse binary as a separate process
// that installs its own webhook configurations. `make run` and the load
// benchmark use it.
package devenv
