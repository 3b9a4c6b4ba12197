package reports

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

func finding(ns, name string, r module.Result) module.Finding {
	return module.Finding{
		Subject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Rule:    "rule", Result: r, Message: "why " + name,
	}
}

// The bound keeps the most severe results, counts every finding in the
// summary and says how many were left out.
func TestBuildBoundsResults(t *testing.T) {
	var fs []module.Finding
	for i := range 7 {
		fs = append(fs, finding("tenant", fmt.Sprintf("warned-%d", i), module.ResultWarn))
	}
	fs = append(fs, finding("tenant", "z-failed", module.ResultFail), finding("tenant", "z-errored", module.ResultError))
	r := build("gatehouse", "placement", "tenant", fs, 3, nil, metav1.Timestamp{Seconds: 10})

	if r.Kind != "PolicyReport" || r.Metadata.Name != "gatehouse-placement" || r.Metadata.Namespace != "tenant" {
		t.Fatalf("report %s %s/%s", r.Kind, r.Metadata.Namespace, r.Metadata.Name)
	}
	if want := (summary{Fail: 1, Warn: 7, Error: 1, Skip: 1}); r.Summary != want {
		t.Errorf("summary %+v, want %+v", r.Summary, want)
	}
	var got []string
	for _, res := range r.Results {
		got = append(got, res.Result+":"+res.Rule)
	}
	if want := "error:rule fail:rule warn:rule skip:results-omitted"; strings.Join(got, " ") != want {
		t.Errorf("results %q, want %q", strings.Join(got, " "), want)
	}
	if last := r.Results[len(r.Results)-1]; !strings.Contains(last.Message, "6 more findings") {
		t.Errorf("omitted result says %q", last.Message)
	}
	for _, res := range r.Results {
		if res.Source != Source || res.Policy != "placement" {
			t.Errorf("result %+v: source and policy", res)
		}
	}
	if r.Metadata.Labels[ManagedByLabel] != "gatehouse" {
		t.Errorf("labels %v", r.Metadata.Labels)
	}
}

// A standing result keeps the timestamp it was first reported with, so
// that an unchanged report is not written again.
func TestBuildKeepsFirstSeen(t *testing.T) {
	fs := []module.Finding{finding("tenant", "a", module.ResultFail)}
	first := build("gatehouse", "placement", "tenant", fs, 10, nil, metav1.Timestamp{Seconds: 10})
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&first)
	if err != nil {
		t.Fatal(err)
	}
	fs = append(fs, finding("tenant", "b", module.ResultFail))
	second := build("gatehouse", "placement", "tenant", fs, 10, firstSeen(&unstructured.Unstructured{Object: obj}), metav1.Timestamp{Seconds: 20})
	if second.Results[0].Timestamp.Seconds != 10 || second.Results[1].Timestamp.Seconds != 20 {
		t.Errorf("timestamps %v, %v; want 10 (standing), 20 (new)", second.Results[0].Timestamp, second.Results[1].Timestamp)
	}
}

func TestBoundedMessage(t *testing.T) {
	long := strings.Repeat("é", maxMessageBytes)
	got := bounded(long)
	if len(got) > maxMessageBytes || !strings.HasSuffix(got, " …") || !strings.HasPrefix(got, "éé") {
		t.Errorf("bounded to %d bytes: %q...", len(got), got[:10])
	}
	if bounded("short") != "short" {
		t.Error("a short message changed")
	}
}

func TestClusterScopedSubjectsMakeAClusterReport(t *testing.T) {
	r := build("gh", "nodegroup", "", []module.Finding{finding("", "worker", module.ResultFail)}, 10, nil, metav1.Timestamp{})
	if r.Kind != "ClusterPolicyReport" || r.Metadata.Namespace != "" || r.Metadata.Name != "gh-nodegroup" {
		t.Errorf("report %s %q/%s", r.Kind, r.Metadata.Namespace, r.Metadata.Name)
	}
}
