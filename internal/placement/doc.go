// Package placement is the placement module: Cozystack's AffinityClass
// (cozystack.io/v1alpha1), named placement classes that tenants may use from
// an allow-list, enforced on the Pods of applications.
//
//   - A mutating webhook on Flux HelmReleases of applications (labelled
//     apps.cozystack.io/application.kind before or after the write, so that
//     the label's removal is seen and refused) resolves the release's class
//     (spec.values.affinityClass, else the tenant's default), refuses a class
//     that does not exist or that the tenant may not use, and records it in
//     the label apps.cozystack.io/affinity-class and in
//     spec.values._scheduling for the application's chart.
//   - A validating webhook on Pod CREATE walks the Pod's ownerReferences
//     through metadata caches up to the objects Flux labelled with their
//     release (in the Pod's own namespace only), and checks the Pod against
//     each release's class, and a Pod bound to a Node at creation
//     (spec.nodeName) against that Node's labels.
//   - A validating webhook refuses to delete or change a class that
//     releases still use.
//   - A validating webhook on Secrets named cozystack-values lets only the
//     platform identities create, change or delete a tenant's placement
//     settings; the HelmRelease webhook refuses the removal of a release's
//     application label to anyone else.
//   - Optionally (Options.LineageLabels), a mutating webhook on Pod CREATE
//     labels a Pod with its application, as Cozystack's lineage webhook
//     does, from the same cached walk.
//   - The leader re-checks running Pods periodically.
//
// Failure policies, chosen deliberately:
//
//   - Pods: Ignore, with a 3 s timeout and a match condition that only sends
//     Pods with a lineage. A fail-closed Pod webhook turns a Gatehouse outage
//     into a cluster that cannot start Pods, including the CNI's and
//     Gatehouse's own (Cozystack #3125). What is admitted while Gatehouse is
//     unreachable is reported by the periodic check
//     (gatehouse_placement_noncompliant_pods and a Warning Event per Pod).
//   - HelmReleases: Fail. Releases are rare, not on the outage path, and a
//     release admitted without its class would place a whole application
//     wrongly; Flux retries a refused apply.
//   - Pod labels: Ignore, 3 s, for the reason Pods are; a Pod admitted
//     during an outage stays unlabelled.
//   - AffinityClasses: Fail, so that a class in use never changes unseen.
//   - Tenant values: Fail, as a change admitted during an outage would
//     last; match conditions send only writes of cozystack-values by
//     others than the platform, so the platform never waits for Gatehouse.
//
// Warn mode (--enforcement=placement=warn) admits violating Pods and
// AffinityClass changes with the denial as warnings; the HelmRelease
// webhook mutates, and still refuses an unknown or disallowed class.
//
// Every decision reads caches; no live GET is made per ownership hop.
package placement
