// Package spec reads an HAProxyTemplateConfig, of Gatehouse's kind
// (gatehouse.dev) or haptic's (haproxy-haptic.org), into what configcheck
// needs to judge with it: [Compiled], everything derived from the spec
// alone, without the cluster (watched resources with their selectors,
// indexes and bounds, the compiled templates, the embedded tests, the
// webhook's failure policy and timeout). [Key] names a config of either
// kind, and [Object] reads either kind's typed object.
//
// # Contract
//
// A config's spec is written by its author, who may be a namespaced user;
// everything here is pure and bounded by what the spec states:
//
//   - [Compile] and [CompileHaptic] validate the whole spec and answer
//     every fault as a field.ErrorList naming its path; nothing is read
//     from the cluster, the file system or the network.
//   - Templates are never compiled here: [TemplateCompiler] is the
//     caller's (configcheck's render worker pool), since a template is a
//     program its author wrote and runs only confined. A compile that did
//     not run to its end for a reason other than the templates is a
//     field.InternalError ([NotCompiled]), never a verdict on them.
//   - A watched resource of Secrets needs a label selector with a
//     positive requirement ([Narrows]): Gatehouse never caches every Secret
//     of a cluster. A watched resource read on demand (haptic's store:
//     on-demand) is indexed by namespace and name and has no webhook.
//   - Every watched object is bounded ([Bounds]: its size and its longest
//     list, defaulted to 128 KiB and 1000 items), so that one tenant's
//     object cannot slow every other tenant's admissions.
//   - [Key]s of the two kinds never meet: a Gatehouse config and a haptic
//     config of the same namespace and name are two configs, in states,
//     queues, fair shares, webhook names and author records alike.
package spec
