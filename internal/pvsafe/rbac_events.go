package pvsafe

// Every admitted bypass records an Event on the object deleted (a claim or
// StatefulSet in its tenant's namespace, a Namespace or PV in default) and
// one in Gatehouse's own namespace, which no tenant can erase.
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
