package app

// Permissions of the core process. Modules declare their own next to the code
// that needs them; `make generate` writes each module's, and the core's,
// into a role of its own (config/rbac/<core|module>/role.yaml), and the chart
// renders only the enabled modules' (docs/security.md, "RBAC").
//
// Names are restricted wherever the API server checks them: by name on get,
// update and patch; on list and watch when the informer selects the one
// name with a metadata.name field selector (the request then carries the
// name); on create only when it comes through server-side apply, whose
// PATCH names the object (a POST does not).
//
// The chart writes these rules itself (templates/rbac.yaml), dropping what
// its modes do not use and with the release's names; config/ uses them as
// generated, with its own names (gatehouse-serving-cert, gatehouse-leader).

// Managed webhooks (--webhook-service or --manage-webhooks-url): the leader
// applies Gatehouse's own two webhook configurations (server-side apply, so
// an absent one is created by name and no other can be), and every replica
// watches them by name. Conversion stanzas are patched by name where the
// converting module declares its CRD.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,resourceNames=gatehouse-validating;gatehouse-mutating,verbs=get;list;watch;patch;create

// Optional kinds: CRDs are watched (schemas stripped in the cache) to start
// and stop informers of kinds whose CRD comes and goes.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=list;watch

// The serving certificate Secret (--cert-secret) in Gatehouse's own
// namespace, by name: every replica follows it through a field-selected
// informer; with --self-managed-certs Gatehouse creates it (server-side
// apply) and its leader rotates it.
// +kubebuilder:rbac:groups="",namespace=gatehouse-system,resources=secrets,resourceNames=gatehouse-serving-cert,verbs=get;list;watch;create;update;patch

// The records key Secret (--records-key-secret, default
// <instance>-records-key) in Gatehouse's own namespace, by name: every
// replica reads it, creates it when missing (server-side apply) and the
// leader rotates its keys. No tenant may read it: whoever holds its keys
// could sign any record (docs/security.md).
// +kubebuilder:rbac:groups="",namespace=gatehouse-system,resources=secrets,resourceNames=gatehouse-records-key,verbs=get;create;update;patch

// Leader election (--leader-elect): the lease is read and renewed by name;
// client-go creates it with a POST, which no resourceNames can restrict
// (only in Gatehouse's namespace). The elector records its Events there.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=gatehouse-system,resources=leases,resourceNames=gatehouse-leader,verbs=get;update
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=gatehouse-system,resources=leases,verbs=create
// +kubebuilder:rbac:groups="";events.k8s.io,namespace=gatehouse-system,resources=events,verbs=create;patch

// Policy reports (internal/reports): the leader lists its own reports by
// label and name (a metadata.name field selector, so the list is
// authorized by name), applies them (server-side apply names the object,
// create included) and deletes those whose findings were mended, in every
// namespace a module audits. Reports are named <instance>-<module>: these
// are config/'s instance's names for every module, the chart writes its
// own.
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports;clusterpolicyreports,resourceNames=gatehouse-pvsafe;gatehouse-nodegroup;gatehouse-placement;gatehouse-configcheck,verbs=list;create;patch;delete
// +kubebuilder:rbac:groups=openreports.io,resources=reports;clusterreports,resourceNames=gatehouse-pvsafe;gatehouse-nodegroup;gatehouse-placement;gatehouse-configcheck,verbs=list;create;patch;delete
