// Package reports writes the findings of the modules' periodic checks
// (module.Audit) as wgpolicyk8s.io/v1alpha2 PolicyReports and
// ClusterPolicyReports, the format Kyverno and Kubewarden write and Policy
// Reporter shows. One mechanism serves every module: the host runs each
// audit on the leader only and hands its findings to a Writer.
//
// A module's findings make one report per namespace (and one
// ClusterPolicyReport for cluster-scoped subjects), named
// <instance>-<module>, labelled app.kubernetes.io/managed-by=gatehouse,
// applied with server-side apply and only when they changed. A report
// holds at most MaxResults results, errors and failures first, then a
// "skip" result saying how many were left out; its summary counts every
// finding. A namespace without findings has no report: a mended object's
// result goes, and the last one takes its report with it. While the
// reports' CRD is not served nothing is written, and the audits still run
// (their metrics and Events do not depend on it).
package reports
