package reports

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The report kinds, as wg-policy's v1alpha2 API defines them
// (config/crd/policyreport holds the CRDs). Gatehouse writes them as
// unstructured objects, so that a cluster with another copy of the CRD
// (Kyverno's) is written to just the same.
var (
	GroupVersion            = schema.GroupVersion{Group: "wgpolicyk8s.io", Version: "v1alpha2"}
	PolicyReportKind        = GroupVersion.WithKind("PolicyReport")
	ClusterPolicyReportKind = GroupVersion.WithKind("ClusterPolicyReport")
)

// Labels on every report Gatehouse writes.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "gatehouse"
	ModuleLabel    = "gatehouse.dev/module"
	InstanceLabel  = "gatehouse.dev/instance"
	// Source is every result's source, as Policy Reporter filters by it.
	Source = "gatehouse"
	// OmittedRule is the rule of the result that says how many findings
	// the size bound left out.
	OmittedRule = "results-omitted"
)

// report is the part of a (Cluster)PolicyReport Gatehouse writes.
type report struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Summary    summary           `json:"summary"`
	Results    []result          `json:"results"`
}

type summary struct {
	Pass  int `json:"pass"`
	Fail  int `json:"fail"`
	Warn  int `json:"warn"`
	Error int `json:"error"`
	Skip  int `json:"skip"`
}

type result struct {
	Source    string                   `json:"source"`
	Policy    string                   `json:"policy"`
	Rule      string                   `json:"rule,omitempty"`
	Category  string                   `json:"category,omitempty"`
	Result    string                   `json:"result"`
	Scored    bool                     `json:"scored"`
	Timestamp metav1.Timestamp         `json:"timestamp"`
	Resources []corev1.ObjectReference `json:"resources,omitempty"`
	Message   string                   `json:"message,omitempty"`
}
