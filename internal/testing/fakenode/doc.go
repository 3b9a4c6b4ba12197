// Package fakenode registers Nodes that no kubelet backs, for a control plane
// that runs kube-scheduler and kube-controller-manager but no container
// runtime.
//
// Each Node carries the labels a cloud node would (kubernetes.io/hostname,
// topology.kubernetes.io/zone, kubernetes.io/os and arch) and allocatable
// cpu, memory and pods, so that the scheduler binds Pods to it and spreads
// them across zones. A heartbeat renews the Node's Lease in kube-node-lease
// and its Ready condition, as a kubelet does, so that the node lifecycle
// controller removes the not-ready taint a new Node is admitted with and
// never taints it again.
//
// Pods bound to these Nodes are never started: they stay Pending. The one
// kubelet duty kept is the end of a graceful deletion: a Pod on one of the
// Nodes that has a deletionTimestamp is deleted with a grace period of zero,
// as a kubelet does once its containers have stopped. Without it, a Deployment
// scaled down, a Job removed or a Namespace deleted would keep its Pods
// Terminating forever.
package fakenode
