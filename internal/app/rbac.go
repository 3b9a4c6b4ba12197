package app

// Permissions of the core process. Modules declare their own next to the code
// that needs them; `make generate` collects all into config/rbac.

// Managed webhooks (--webhook-service or --manage-webhooks-url): the leader
// applies Gatehouse's own webhook configurations (server-side apply is a
// patch; creating an absent one needs create, which resourceNames cannot
// limit), and every replica watches them by name. Conversion stanzas are
// patched by name where the converting module declares its CRD.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,resourceNames=gatehouse-validating;gatehouse-mutating,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=create

// Optional kinds: CRDs are watched (schemas stripped in the cache) to start
// and stop informers of kinds whose CRD comes and goes.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=list;watch

// Leader election (--leader-elect) in Gatehouse's own namespace, and the
// Events it and the modules record.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=gatehouse-system,resources=leases,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// The serving certificate Secret (--cert-secret), read in Gatehouse's own
// namespace only, through a field-selected informer.
// +kubebuilder:rbac:groups="",namespace=gatehouse-system,resources=secrets,verbs=get;list;watch
