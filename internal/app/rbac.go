package app

// Permissions of the core process. Modules declare their own next to the code
// that needs them; `make generate` collects all into config/rbac.

// Self-managed webhooks (--manage-webhooks-url): Gatehouse writes its own
// webhook configurations and the conversion stanza of the CRDs it converts.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;create;update;delete
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;patch

// The serving certificate Secret (--cert-secret), read in Gatehouse's own
// namespace only, through a field-selected informer.
// +kubebuilder:rbac:groups="",namespace=gatehouse-system,resources=secrets,verbs=get;list;watch
