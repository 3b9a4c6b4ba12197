package reports

import (
	"fmt"
	"strings"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
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

// The OpenReports kinds (openreports.io/v1alpha1, the successor of
// wg-policy's API, which Kyverno 1.15 and later write; config/crd/openreports
// holds the CRDs of reports-api v0.2.1). Written from the project's own Go
// types.
var (
	OpenReportsGroupVersion = openreportsv1alpha1.SchemeGroupVersion
	ReportKind              = OpenReportsGroupVersion.WithKind("Report")
	ClusterReportKind       = OpenReportsGroupVersion.WithKind("ClusterReport")
)

// API is the report API a Writer writes.
type API string

const (
	// APIAuto writes OpenReports where the API server serves it, else
	// wg-policy's PolicyReports where served, else nothing.
	APIAuto API = "auto"
	// APIOpenReports writes openreports.io/v1alpha1 Reports only.
	APIOpenReports API = "openreports"
	// APIWGPolicy writes wgpolicyk8s.io/v1alpha2 PolicyReports only.
	APIWGPolicy API = "wgpolicyk8s"
)

// APIs are the accepted values of Options.API.
var APIs = []API{APIAuto, APIOpenReports, APIWGPolicy}

// ParseAPI reads an API name (--policy-reports-api, policyReports.api).
func ParseAPI(s string) (API, error) {
	for _, a := range APIs {
		if string(a) == s {
			return a, nil
		}
	}
	names := make([]string, len(APIs))
	for i, a := range APIs {
		names[i] = string(a)
	}
	return "", fmt.Errorf("report API %q: want %s", s, strings.Join(names, ", "))
}

// apiKinds are an API's namespaced and cluster-scoped report kinds.
type apiKinds struct{ namespaced, cluster schema.GroupVersionKind }

var (
	wgPolicyKinds    = apiKinds{PolicyReportKind, ClusterPolicyReportKind}
	openReportsKinds = apiKinds{ReportKind, ClusterReportKind}
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
