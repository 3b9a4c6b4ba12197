// Package nodegroup converts deckhouse.io NodeGroups between v1alpha1,
// v1alpha2 and v1, and validates their creation and updates. It replaces
// Deckhouse's node_group.py conversion hook and node_group validating hook.
//
// # Conversion
//
// Every version converts through the v1 hub (api/deckhouse.io). Cloud is
// CloudEphemeral, and Hybrid is CloudPermanent for master and for groups
// listed under nodeGroups of the provider cluster configuration, CloudStatic otherwise; on groups other than master the
// annotation node.deckhouse.io/permanent-node-group ("true" or "false")
// overrides the configuration. Whatever the target version cannot hold rides in the
// gatehouse.dev/nodegroup-conversion-data annotation and is restored on the
// way back, so reading and writing through an old version loses nothing,
// and a group stored as CloudStatic stays CloudStatic however the
// configuration changes in between.
//
// v1alpha1's top-level docker moves to cri.docker only beside cri.type
// Docker. Beside another type, or none, it rides in the conversion data:
// v1 (and v1alpha2) allow cri.docker only with type Docker, and a
// conversion's output must keep the rules of the version it produces,
// because the API server checks a write against the schema of the version
// the client used and stores whatever the conversion returns. This
// diverges from both upstream conversions. Deckhouse's Python hook moved
// the block into cri whatever the type, so every later v1 write of the
// group warned (down to kubectl label) and an edit of the block through v1
// was refused; its Go port sets cri.type Docker, which switches the group
// to a runtime Deckhouse no longer runs and which check 4 refuses on every
// later write. The block configures a runtime the group does not run
// (unless the cluster's defaultCRI is Docker, which Deckhouse no longer
// supports), so keeping it aside changes nothing on the nodes.
//
// Groups an older conversion stored with cri.docker beside another type
// stay as they are: v1's and v1alpha2's rule on cri.docker passes a block
// that is unchanged since the last write (a transition rule with
// optionalOldSelf), a v1alpha1 read-modify-write puts an unchanged block
// back where it was, and only an edit of the block itself is refused:
// remove it, or write it through v1alpha1, which keeps it aside.
//
// The conversion reads the provider configuration from an informer and
// never calls the API server. It is served before the informers sync, since
// the API server needs it whatever Gatehouse's state. Until the provider
// Secret's informer has listed, it is unknown whether a Hybrid group is
// CloudPermanent, so converting such a group (only a write through an old
// version needs to) fails with a retryable message instead of storing a
// guess that the nodeType immutability check would then lock in. Reads,
// which convert from v1, never need the configuration. A missing Secret
// lists no group; an unparsable one fails the conversions that need it.
//
// # Validation
//
// The rule names deckhouse.io/v1 only, with matchPolicy Equivalent: the API
// server converts requests made through the older versions to v1 (through
// this module's conversion), so the checks are written once against the
// hub. The request's requestKind still tells the version the client used,
// which check 7 needs: only v1alpha1 has no schema rule tying
// cri.containerd to cri.type Containerd. Comparing in v1 terms also fixes a
// shell-hook quirk: Cloud groups of the old versions may use
// approvalMode RollingUpdate, being CloudEphemeral.
//
// Two checks are not the shell hook's. Deckhouse's Go port keeps the
// staticInstances.labelSelector of a Static or CloudStatic group once set;
// the schema's rule on spec.staticInstances cannot, as it does not run when
// the whole block goes, nor for writes through v1alpha1 and v1alpha2, which
// carry the block in the conversion-data annotation a client may drop or
// edit. So a removal or change is denied here, in every version:
// ".spec.staticInstances.labelSelector can be added but cannot be modified
// or removed once set. To change it, create a new NodeGroup" (the Go
// port's text). And v1's rule on cri.docker is checked again, for writes
// through the older versions whose conversion data could otherwise store a
// docker block beside another type; the denial repeats the schema rule's
// message.
//
// All denials of a request are reported together, one per line in the
// message and as status causes; the two warnings (a cri.type change of
// master with fewer than three API server endpoints, and maxPods too high
// for the node pod subnet) never stop later checks. The first refusal's
// rule is the denial's reason (gatehouse_webhook_denials_total, the audit
// annotation nodegroup-policy.gatehouse.dev/reason, admit.go's reasonOfField):
// name-too-long, conversion-data-invalid, node-type-immutable,
// max-per-zone-below-min, unknown-zone, cri-type-refused,
// containerd-without-cri-type, docker-without-cri-type, taints-refused,
// approval-mode-refused, static-selector-immutable,
// topology-manager-without-reservation, memory-swap-unsupported.
//
// The checks read Secrets kube-system/d8-cluster-configuration and
// d8-provider-cluster-configuration, Endpoints default/kubernetes and
// ModuleConfig global, each through an informer selected by name, and
// Nodes through one metadata cache of the Nodes labelled
// node.deckhouse.io/group, indexed by group. /readyz
// waits for all of them. The ModuleConfig CRD may be installed or removed
// at any time: the module watches that CRD and runs the ModuleConfig
// informer only while it exists; without it there are no custom toleration
// keys. Before the informers have synced, or when a Secret cannot be
// parsed, a request is refused with 503 naming what is missing, never
// judged on a guess.
//
// # failurePolicy Fail
//
// The checks guard against changes that break nodes (Docker, a CRI switch
// on nodes with custom containerd configuration, node names over the
// label limit, a changed nodeType). Failing open would let exactly those
// through whenever Gatehouse is unavailable. Failing closed blocks only
// CREATE and UPDATE of NodeGroups, which administrators make rarely:
// status updates (a subresource the rule does not name) and deletions keep
// working, and writes through an old version depend on the conversion
// webhook anyway.
package nodegroup
