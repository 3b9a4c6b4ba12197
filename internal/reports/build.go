package reports

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/textcut"
)

// maxMessageBytes bounds one result's message: what an object's name or a
// module's reason makes of it never grows a report past the bound that
// MaxResults sets.
const maxMessageBytes = 1024

// ReportName is the name of an instance's report of a module's findings,
// in each namespace and for the cluster.
func ReportName(instance, moduleName string) string { return instance + "-" + moduleName }

// byNamespace groups findings by their subject's namespace; "" holds the
// cluster-scoped subjects'.
func byNamespace(findings []module.Finding) map[string][]module.Finding {
	out := map[string][]module.Finding{}
	for _, f := range findings {
		out[f.Subject.Namespace] = append(out[f.Subject.Namespace], f)
	}
	return out
}

// severity orders results in a bounded report: what most needs a person
// comes first, so that the bound leaves out the mildest.
func severity(r module.Result) int {
	switch r {
	case module.ResultError:
		return 0
	case module.ResultFail:
		return 1
	default:
		return 2
	}
}

// build is the report of one module's findings in one namespace ("" for
// the cluster). seen gives the time a result was first reported (from the
// report as it stands), so that a standing result keeps its timestamp and
// an unchanged report is not written again; now stamps new ones.
func build(instance, moduleName, namespace string, findings []module.Finding, maxResults int, seen map[string]metav1.Timestamp, now metav1.Timestamp) report {
	kind := PolicyReportKind
	if namespace == "" {
		kind = ClusterPolicyReportKind
	}
	r := report{
		APIVersion: GroupVersion.String(),
		Kind:       kind.Kind,
		Metadata: metav1.ObjectMeta{
			Name:      ReportName(instance, moduleName),
			Namespace: namespace,
			Labels:    Labels(instance, moduleName),
		},
		Results: []result{},
	}
	sorted := slices.Clone(findings)
	slices.SortFunc(sorted, func(a, b module.Finding) int {
		return cmp.Or(
			cmp.Compare(severity(a.Result), severity(b.Result)),
			cmp.Compare(a.Subject.Kind, b.Subject.Kind),
			cmp.Compare(a.Subject.Name, b.Subject.Name),
			cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Message, b.Message),
		)
	})
	for i, f := range sorted {
		switch f.Result {
		case module.ResultFail:
			r.Summary.Fail++
		case module.ResultWarn:
			r.Summary.Warn++
		default:
			r.Summary.Error++
		}
		if i >= maxResults {
			continue
		}
		res := result{
			Source:    Source,
			Policy:    moduleName,
			Rule:      f.Rule,
			Category:  "Gatehouse",
			Result:    string(f.Result),
			Scored:    true,
			Resources: []corev1.ObjectReference{f.Subject},
			Message:   bounded(f.Message),
		}
		res.Timestamp = now
		if t, ok := seen[resultKey(res)]; ok {
			res.Timestamp = t
		}
		r.Results = append(r.Results, res)
	}
	if omitted := len(sorted) - maxResults; omitted > 0 {
		r.Summary.Skip++
		res := result{
			Source: Source, Policy: moduleName, Rule: OmittedRule, Category: "Gatehouse", Result: "skip",
			Message: fmt.Sprintf("%d more findings are left out of this report, which holds at most %d (the summary counts them all); the module's metrics and logs name them", omitted, maxResults),
		}
		res.Timestamp = now
		if t, ok := seen[resultKey(res)]; ok {
			res.Timestamp = t
		}
		r.Results = append(r.Results, res)
	}
	return r
}

// object is the report as the API server stores it: wg-policy's shape, or
// an OpenReports Report or ClusterReport built from the project's types
// (the same results and summary, with the source named once).
func (r report) object() (map[string]any, error) {
	if r.APIVersion != OpenReportsGroupVersion.String() {
		return runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
	}
	summary := openreportsv1alpha1.ReportSummary{Pass: r.Summary.Pass, Fail: r.Summary.Fail, Warn: r.Summary.Warn, Error: r.Summary.Error, Skip: r.Summary.Skip}
	results := make([]openreportsv1alpha1.ReportResult, len(r.Results))
	for i, res := range r.Results {
		results[i] = openreportsv1alpha1.ReportResult{
			Source: res.Source, Policy: res.Policy, Rule: res.Rule, Category: res.Category,
			Timestamp: res.Timestamp, Result: openreportsv1alpha1.Result(res.Result), Scored: res.Scored,
			Subjects: res.Resources, Description: res.Message,
		}
	}
	meta := metav1.TypeMeta{APIVersion: r.APIVersion, Kind: r.Kind}
	if r.Kind == ClusterReportKind.Kind {
		return runtime.DefaultUnstructuredConverter.ToUnstructured(&openreportsv1alpha1.ClusterReport{
			TypeMeta: meta, ObjectMeta: r.Metadata, Source: Source, Summary: summary, Results: results,
		})
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&openreportsv1alpha1.Report{
		TypeMeta: meta, ObjectMeta: r.Metadata, Source: Source, Summary: summary, Results: results,
	})
}

// resultKey identifies a result across runs. The omitted count is in the
// message, so that a changing count keeps the result's first timestamp.
func resultKey(r result) string {
	var b strings.Builder
	b.WriteString(r.Policy + "\x00" + r.Rule + "\x00" + r.Result + "\x00")
	if r.Rule == OmittedRule {
		return b.String()
	}
	for _, s := range r.Resources {
		b.WriteString(string(s.UID) + "/" + s.Kind + "/" + s.Name + "\x00")
	}
	b.WriteString(r.Message)
	return b.String()
}

// bounded cuts a message at maxMessageBytes, on a rune boundary.
func bounded(s string) string { return textcut.Bound(s, maxMessageBytes, " …") }

// Labels are the labels of an instance's reports of a module.
func Labels(instance, moduleName string) map[string]string {
	return map[string]string{ManagedByLabel: ManagedBy, ModuleLabel: moduleName, InstanceLabel: instance}
}
