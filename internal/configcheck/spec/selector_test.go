package spec

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
)

func TestParseFieldSelectorErrors(t *testing.T) {
	cases := []struct{ selector, wantText string }{
		{"spec.ingressClassName", "want path=value or path!=value"},
		{"=haproxy", "the path is empty"},
		{" != haproxy", "the path is empty"},
		{"spec.a=b,", `term "": want path=value`},
		{"spec..a=b", "empty field name"},
		{"metadata.labels['x=y", "unterminated"},
		{"spec.a=b,spec.c", `term "spec.c"`},
	}
	for _, tc := range cases {
		t.Run(tc.selector, func(t *testing.T) {
			sel, err := ParseFieldSelector(tc.selector)
			if err == nil {
				t.Fatalf("accepted as %d terms", len(sel))
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("error %q does not contain %q", err, tc.wantText)
			}
		})
	}
}

func TestFieldSelectorMatches(t *testing.T) {
	const (
		haproxy  = `{"metadata":{"name":"a","namespace":"app"},"spec":{"ingressClassName":"haproxy","replicas":3}}`
		nginx    = `{"metadata":{"name":"a","namespace":"app"},"spec":{"ingressClassName":"nginx"}}`
		noClass  = `{"metadata":{"name":"a","namespace":"kube-system"},"spec":{}}`
		noSpec   = `{"metadata":{"name":"a"}}`
		dotLabel = `{"metadata":{"name":"a","labels":{"a.b/c":"x"}}}`
		nested   = `{"metadata":{"name":"a","labels":{"a":{"b/c":"x"}}}}`
	)
	cases := []struct {
		selector string
		terms    int
		obj      string
		want     bool
	}{
		{"", 0, noSpec, true},
		{"  ", 0, haproxy, true},
		{"spec.ingressClassName=haproxy", 1, haproxy, true},
		{"spec.ingressClassName=haproxy", 1, nginx, false},
		{"spec.ingressClassName=haproxy", 1, noClass, false},
		{"spec.ingressClassName==haproxy", 1, haproxy, true},
		{"spec.ingressClassName==haproxy", 1, nginx, false},
		{"spec.ingressClassName!=haproxy", 1, nginx, true},
		{"spec.ingressClassName!=haproxy", 1, haproxy, false},
		{"spec.ingressClassName!=haproxy", 1, noClass, true},
		// A missing field is "".
		{"spec.ingressClassName=", 1, noClass, true},
		{"spec.ingressClassName=", 1, noSpec, true},
		{"spec.ingressClassName=", 1, haproxy, false},
		{"spec.ingressClassName!=", 1, noClass, false},
		{"spec.ingressClassName!=", 1, nginx, true},
		// Spaces around paths, operators and values are ignored.
		{" spec.ingressClassName = haproxy ", 1, haproxy, true},
		// Numbers compare in their key form.
		{"spec.replicas=3", 1, haproxy, true},
		{"spec.replicas=3.0", 1, haproxy, false},
		// Every term must hold.
		{"spec.ingressClassName=haproxy,metadata.namespace!=kube-system", 2, haproxy, true},
		{"spec.ingressClassName=haproxy, metadata.namespace=other", 2, haproxy, false},
		{"spec.ingressClassName=, metadata.namespace!=kube-system", 2, noClass, false},
		{"metadata.namespace==app,spec.ingressClassName!=nginx,metadata.name=a", 3, haproxy, true},
		{"metadata.namespace==app,spec.ingressClassName!=nginx,metadata.name=a", 3, nginx, false},
		// Bracket paths reach keys with dots and slashes.
		{"metadata.labels['a.b/c']=x", 1, dotLabel, true},
		{`metadata.labels["a.b/c"]=x`, 1, dotLabel, true},
		{`metadata.labels.a\.b/c=x`, 1, dotLabel, true},
		{"metadata.labels['a.b/c']=y", 1, dotLabel, false},
		{"metadata.labels['a.b/c']=x", 1, nested, false},
		{"metadata.labels.a.b/c=x", 1, nested, true},
		// A map equals no value.
		{"spec=haproxy", 1, haproxy, false},
	}
	for _, tc := range cases {
		t.Run(tc.selector+" on "+tc.obj, func(t *testing.T) {
			sel, err := ParseFieldSelector(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			if len(sel) != tc.terms {
				t.Fatalf("%d terms, want %d", len(sel), tc.terms)
			}
			if got := sel.Matches(object(t, tc.obj)); got != tc.want {
				t.Fatalf("matches = %v, want %v", got, tc.want)
			}
		})
	}
}

// watched compiles one watched resource.
func watched(t *testing.T, spec gatehousev1alpha1.WatchedResource) *Watched {
	t.Helper()
	w, errs := CompileWatched(field.NewPath("spec", "watchedResources").Key("w"), "w", spec, false)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return w
}

func TestWatchedSpecSelects(t *testing.T) {
	labelled := gatehousev1alpha1.WatchedResource{APIVersion: "v1", Resources: "services",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	inTeamA := gatehousev1alpha1.WatchedResource{APIVersion: "v1", Resources: "services",
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}
	all := gatehousev1alpha1.WatchedResource{APIVersion: "v1", Resources: "services", FieldSelector: "spec.type!=ExternalName"}
	everything := gatehousev1alpha1.WatchedResource{APIVersion: "v1", Resources: "services"}
	combined := gatehousev1alpha1.WatchedResource{APIVersion: "v1", Resources: "services",
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
		FieldSelector:     "spec.type=ClusterIP"}

	const (
		web      = `{"metadata":{"name":"s","namespace":"n","labels":{"app":"web"}},"spec":{"type":"ClusterIP"}}`
		api      = `{"metadata":{"name":"s","namespace":"n","labels":{"app":"api"}},"spec":{"type":"ClusterIP"}}`
		bare     = `{"metadata":{"name":"s","namespace":"n"},"spec":{"type":"ClusterIP"}}`
		numLabel = `{"metadata":{"name":"s","labels":{"app":5}}}`
		external = `{"metadata":{"name":"s","namespace":"n","labels":{"app":"web"}},"spec":{"type":"ExternalName"}}`
	)
	teamA, teamB := labels.Set{"team": "a"}, labels.Set{"team": "b"}
	cases := []struct {
		name          string
		spec          gatehousev1alpha1.WatchedResource
		obj           string
		nsLabels      labels.Set
		clusterScoped bool
		want          bool
	}{
		{"label selected", labelled, web, nil, false, true},
		{"other label", labelled, api, nil, false, false},
		{"no labels", labelled, bare, nil, false, false},
		{"non-string label value", labelled, numLabel, nil, false, false},
		{"no selector", everything, bare, nil, false, true},
		{"namespace selected", inTeamA, bare, teamA, false, true},
		{"namespace of another team", inTeamA, bare, teamB, false, false},
		{"unknown namespace", inTeamA, bare, nil, false, false},
		{"cluster-scoped ignores the namespace selector", inTeamA, bare, nil, true, true},
		{"cluster-scoped ignores the namespace's labels", inTeamA, bare, teamB, true, true},
		{"no namespace selector ignores the namespace's labels", everything, bare, teamB, false, true},
		{"field selected", all, web, nil, false, true},
		{"field excluded", all, external, nil, false, false},
		{"all three hold", combined, web, teamA, false, true},
		{"all three, label fails", combined, api, teamA, false, false},
		{"all three, namespace fails", combined, web, teamB, false, false},
		{"all three, field fails", combined, external, teamA, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := watched(t, tc.spec)
			if got := w.selects(object(t, tc.obj), tc.nsLabels, tc.clusterScoped); got != tc.want {
				t.Fatalf("selects = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNarrows(t *testing.T) {
	parse := func(s string) labels.Selector {
		t.Helper()
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	fromAPI := func(ls *metav1.LabelSelector) labels.Selector {
		t.Helper()
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	cases := []struct {
		name string
		sel  labels.Selector
		want bool
	}{
		{"no selector", nil, false},
		{"everything", labels.Everything(), false},
		{"empty API selector", fromAPI(&metav1.LabelSelector{}), false},
		{"nothing", labels.Nothing(), true},
		{"=", parse("a=b"), true},
		{"==", parse("a==b"), true},
		{"in", parse("a in (b,c)"), true},
		{"exists", parse("a"), true},
		{"!=", parse("a!=b"), false},
		{"notin", parse("a notin (b)"), false},
		{"does not exist", parse("!a"), false},
		{"negative terms only", parse("!a,b!=c,d notin (e)"), false},
		{"a negative and a positive term", parse("!a,b=c"), true},
		{"matchLabels", fromAPI(&metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "team-a"}}), true},
		{"DoesNotExist expression", fromAPI(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "x", Operator: metav1.LabelSelectorOpDoesNotExist}}}), false},
		{"NotIn expression", fromAPI(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}}}}), false},
		{"Exists expression", fromAPI(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "x", Operator: metav1.LabelSelectorOpExists}}}), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Narrows(tc.sel); got != tc.want {
				t.Fatalf("narrows(%v) = %v, want %v", tc.sel, got, tc.want)
			}
		})
	}
}
