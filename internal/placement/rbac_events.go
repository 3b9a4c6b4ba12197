package placement

// The periodic check (audit.go) records Events on the Pods it finds out of
// place, in their namespaces (the core's own rule covers only Gatehouse's
// namespace).
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
