// Package nodegroup converts deckhouse.io NodeGroups between v1alpha1,
// v1alpha2 and v1, and validates their creation and updates. It replaces
// Deckhouse's node_group.py conversion hook and node_group validating hook.
//
// # Conversion
//
// Every version converts through the v1 hub (api/deckhouse.io). docker
// moves to cri.docker, Cloud is CloudEphemeral, and Hybrid is CloudPermanent
// for master and for groups listed under nodeGroups of the provider cluster
// configuration, CloudStatic otherwise; on groups other than master the
// annotation node.deckhouse.io/permanent-node-group ("true" or "false")
// overrides the configuration. Whatever the target version cannot hold rides in the
// gatehouse.dev/nodegroup-conversion-data annotation and is restored on the
// way back, so reading and writing through an old version loses nothing,
// and a group stored as CloudStatic stays CloudStatic however the
// configuration changes in between.
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
// All denials of a request are reported together, one per line in the
// message and as status causes; the two warnings (a cri.type change of
// master with fewer than three API server endpoints, and maxPods too high
// for the node pod subnet) never stop later checks.
//
// The checks read Secrets kube-system/d8-cluster-configuration and
// d8-provider-cluster-configuration, Endpoints default/kubernetes and
// ModuleConfig global, each through an informer selected by name, and
// Nodes through one metadata informer per label the checks use. /readyz
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
