package module

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Audit is a module's periodic check of what already stands in the
// cluster: what its webhooks would refuse now, or what a request would
// put at risk. The host runs it on the leader only and writes its findings
// as wgpolicyk8s.io PolicyReports while that API is served
// (docs/policy-reports.md).
type Audit struct {
	// Period is how often the audit runs; the host's --report-interval,
	// when set, overrides it.
	Period time.Duration
	// Run returns every standing finding. It reads the module's caches,
	// never the API server per object, and must return promptly when ctx
	// ends. An error keeps the reports as they were.
	Run func(ctx context.Context) ([]Finding, error)
}

// Finding is one result of an audit about one object.
type Finding struct {
	// Subject is the object the finding is about: its report is the one of
	// its namespace, or the cluster's when Namespace is empty.
	Subject corev1.ObjectReference
	// Rule names the check, stable across runs (for example
	// "pod-affinity-class").
	Rule   string
	Result Result
	// Message says what is wrong and how to mend it. Whoever may read the
	// subject's namespace's reports reads it: it may carry only what they
	// could read themselves (docs/security.md).
	Message string
}

// Result is a finding's outcome, in the PolicyReport's terms.
type Result string

const (
	// ResultFail: the object breaks the module's policy now.
	ResultFail Result = "fail"
	// ResultWarn: the object is allowed but at risk (a deletion would lose
	// data).
	ResultWarn Result = "warn"
	// ResultError: the object could not be judged.
	ResultError Result = "error"
)
