package authz

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// fakeAuthorizer answers SubjectAccessReviews from a list of grants, as
// RBAC would: a grant with namespace "" holds in every namespace, one with
// name "" for every object. It records what it was asked and how many
// questions were in flight at once.
type fakeAuthorizer struct {
	grants []Question
	delay  func() time.Duration
	fail   error

	mu       sync.Mutex
	asked    []Question
	inFlight int
	maxAtOne int
}

func (f *fakeAuthorizer) review(ctx context.Context, q Question) (bool, error) {
	f.mu.Lock()
	f.asked = append(f.asked, q)
	f.inFlight++
	f.maxAtOne = max(f.maxAtOne, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if f.delay != nil {
		select {
		case <-time.After(f.delay()):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	if f.fail != nil {
		return false, f.fail
	}
	for _, g := range f.grants {
		if g.Verb == q.Verb && g.Group == q.Group && g.Resource == q.Resource &&
			(g.Namespace == "" || g.Namespace == q.Namespace) && (g.Name == "" || g.Name == q.Name) {
			return true, nil
		}
	}
	return false, nil
}

// grant is every verb on resource (group "") in namespace ("" everywhere).
func grant(resource, namespace string, verbs ...string) []Question {
	var out []Question
	for _, v := range verbs {
		out = append(out, Question{Verb: v, Resource: resource, Namespace: namespace})
	}
	return out
}

var (
	readVerbs  = []string{"list", "watch"}
	writeVerbs = []string{"create", "update", "delete"}
	allVerbs   = append(append([]string(nil), readVerbs...), writeVerbs...)
)

// namespaceLister is the namespace cache: namespaces by labels. It counts
// its calls.
type namespaceLister struct {
	namespaces map[string]labels.Set
	calls      int
}

func (n *namespaceLister) list(_ context.Context, sel labels.Selector) ([]string, error) {
	n.calls++
	var out []string
	for name, l := range n.namespaces {
		if sel.Matches(l) {
			out = append(out, name)
		}
	}
	return out, nil
}

var authzKey = spec.GatehouseKey(types.NamespacedName{Namespace: "team-a", Name: "edge"})

func byName(name string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": name}}
}

// authzSpec is a config of the given watched resources.
func authzSpec(t *testing.T, watched map[string]gatehousev1alpha1.WatchedResource) *spec.Compiled {
	t.Helper()
	c, errs := spec.Compile(&gatehousev1alpha1.HAProxyTemplateConfigSpec{
		WatchedResources: watched,
		HAProxyConfig:    gatehousev1alpha1.Template{Template: "global\n"},
	}, inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return c
}

// served are the targets discovery would resolve: secrets, configmaps and
// services in the core group, ingresses in networking.k8s.io, and
// ingressclasses (cluster-scoped).
func served(c *spec.Compiled) map[string]Target {
	out := map[string]Target{}
	for name, w := range c.Watched {
		t := Target{Group: w.GVR.Group, Resource: strings.ToLower(w.GVR.Resource)}
		switch t.Resource {
		case "secrets", "configmaps", "services", "pods", "ingresses":
			t.Known = true
		case "ingressclasses":
			t.Known, t.ClusterScoped = true, true
		}
		out[name] = t
	}
	return out
}

func TestAccessRequirements(t *testing.T) {
	c := authzSpec(t, map[string]gatehousev1alpha1.WatchedResource{
		"ingresses": {APIVersion: "networking.k8s.io/v1", Resources: "ingresses", NamespaceSelector: byName("team-a"), EnableValidationWebhook: true},
		"classes":   {APIVersion: "networking.k8s.io/v1", Resources: "ingressclasses", NamespaceSelector: byName("team-a")},
		"services":  {APIVersion: "v1", Resources: "services"},
		"negative": {APIVersion: "v1", Resources: "configmaps", NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}}}}},
		"widgets": {APIVersion: "example.com/v1", Resources: "widgets", NamespaceSelector: byName("team-a")},
	})
	type row struct {
		verb, target, namespace, name string
		scope                         accessScope
		source                        string
	}
	var got []row
	for _, r := range Requirements(authzKey, c, served(c), true) {
		got = append(got, row{r.Question.Verb, r.Question.Target(), r.Question.Namespace, r.Question.Name, r.scope, r.source})
	}
	const (
		out = "the config publishes its rendering to "
	)
	want := []row{
		// A cluster-scoped kind: its namespaceSelector does not apply.
		{"list", "ingressclasses.networking.k8s.io", "", "", scopeCluster, "spec.watchedResources[classes]"},
		{"watch", "ingressclasses.networking.k8s.io", "", "", scopeCluster, "spec.watchedResources[classes]"},
		// A webhook asks for the rights to change, over the same scope.
		{"list", "ingresses.networking.k8s.io", "", "", scopeSelected, "spec.watchedResources[ingresses]"},
		{"watch", "ingresses.networking.k8s.io", "", "", scopeSelected, "spec.watchedResources[ingresses]"},
		{"create", "ingresses.networking.k8s.io", "", "", scopeSelected, "spec.watchedResources[ingresses].enableValidationWebhook"},
		{"update", "ingresses.networking.k8s.io", "", "", scopeSelected, "spec.watchedResources[ingresses].enableValidationWebhook"},
		{"delete", "ingresses.networking.k8s.io", "", "", scopeSelected, "spec.watchedResources[ingresses].enableValidationWebhook"},
		// NotIn alone selects every namespace, those made later too.
		{"list", "configmaps", "", "", scopeCluster, "spec.watchedResources[negative]"},
		{"watch", "configmaps", "", "", scopeCluster, "spec.watchedResources[negative]"},
		// No namespaceSelector: every namespace.
		{"list", "services", "", "", scopeCluster, "spec.watchedResources[services]"},
		{"watch", "services", "", "", scopeCluster, "spec.watchedResources[services]"},
		// Not served: its scope is unknown.
		{"list", "widgets.example.com", "", "", scopeCluster, "spec.watchedResources[widgets]"},
		{"watch", "widgets.example.com", "", "", scopeCluster, "spec.watchedResources[widgets]"},
		// The outputs, in the config's namespace; update of the one object.
		{"create", "configmaps", "team-a", "", scopeNamespace, out + "ConfigMap edge-haproxy"},
		{"update", "configmaps", "team-a", "edge-haproxy", scopeNamespace, out + "ConfigMap edge-haproxy"},
		{"create", "secrets", "team-a", "", scopeNamespace, out + "Secret edge-haproxy-certs"},
		{"update", "secrets", "team-a", "edge-haproxy-certs", scopeNamespace, out + "Secret edge-haproxy-certs"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("requirements:\n%s\nwant:\n%s", rows(got), rows(want))
	}

	// Without certificates no Secret is written, so none is asked for.
	for _, r := range Requirements(authzKey, c, served(c), false) {
		if r.Question.Resource == "secrets" {
			t.Fatalf("a config without certificates asks for %+v", r.Question)
		}
	}
}

func rows[T any](rs []T) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "  %+v\n", r)
	}
	return b.String()
}

func TestAuthorize(t *testing.T) {
	secretsEverywhere := map[string]gatehousev1alpha1.WatchedResource{
		"secrets": {APIVersion: "v1", Resources: "secrets", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"cert": "yes"}}},
	}
	teamScope := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	namespaces := map[string]labels.Set{
		"team-a":   {"kubernetes.io/metadata.name": "team-a", "team": "a"},
		"team-a-2": {"kubernetes.io/metadata.name": "team-a-2", "team": "a"},
		"team-b":   {"kubernetes.io/metadata.name": "team-b", "team": "b"},
	}
	// outputs are the rights every config needs in its namespace.
	outputs := grant("configmaps", "team-a", "create", "update")
	with := func(gs ...[]Question) []Question {
		out := append([]Question(nil), outputs...)
		for _, g := range gs {
			out = append(out, g...)
		}
		return out
	}
	cases := []struct {
		name    string
		watched map[string]gatehousev1alpha1.WatchedResource
		certs   bool
		grants  []Question
		// want is the refusal, exactly ("" to admit).
		want string
		// wantListed: whether the namespace cache is read.
		wantListed bool
	}{
		{
			name: "a cluster-wide reader may watch Secrets everywhere", watched: secretsEverywhere,
			grants: with(grant("secrets", "", readVerbs...)),
		},
		{
			name: "a namespace's editor may not watch every Secret", watched: secretsEverywhere,
			grants: with(grant("secrets", "team-a", readVerbs...)),
			want:   `user "alice" may not list secrets cluster-wide (spec.watchedResources[secrets]: it has no namespaceSelector): a config reaches only what its author may read; add a namespaceSelector naming namespaces you may use, or ask for the permission`,
		},
		{
			name: "list without watch is not enough", watched: secretsEverywhere,
			grants: with(grant("secrets", "", "list")),
			want:   `user "alice" may not watch secrets cluster-wide (spec.watchedResources[secrets]: it has no namespaceSelector): a config reaches only what its author may read; add a namespaceSelector naming namespaces you may use, or ask for the permission`,
		},
		{
			name: "Pods everywhere, by an editor of one namespace",
			watched: map[string]gatehousev1alpha1.WatchedResource{
				"pods": {APIVersion: "v1", Resources: "pods"},
			},
			grants: with(grant("pods", "team-a", readVerbs...)),
			want:   `user "alice" may not list pods cluster-wide (spec.watchedResources[pods]: it has no namespaceSelector): a config reaches only what its author may read; add a namespaceSelector naming namespaces you may use, or ask for the permission`,
		},
		{
			name: "a namespaceSelector over namespaces the author may read",
			watched: map[string]gatehousev1alpha1.WatchedResource{
				"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: teamScope},
			},
			grants:     with(grant("services", "team-a", readVerbs...), grant("services", "team-a-2", readVerbs...)),
			wantListed: true,
		},
		{
			name: "a namespaceSelector over a namespace the author may not read",
			watched: map[string]gatehousev1alpha1.WatchedResource{
				"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: teamScope},
			},
			grants:     with(grant("services", "team-a", readVerbs...), grant("services", "team-a-2", "watch")),
			want:       `user "alice" may not list services in a namespace that namespaceSelector selects by label (Gatehouse names only the namespaces a selector names) (spec.watchedResources[services]): a config reaches only what its author may read; narrow namespaceSelector, or ask for the permission`,
			wantListed: true,
		},
		{
			name: "a negative namespaceSelector is no narrowing",
			watched: map[string]gatehousev1alpha1.WatchedResource{
				"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b"}}}}},
			},
			// Every namespace it selects today is readable: the ones
			// created tomorrow join it unasked.
			grants: with(grant("services", "team-a", readVerbs...), grant("services", "team-a-2", readVerbs...)),
			want:   `user "alice" may not list services cluster-wide (spec.watchedResources[services]: its namespaceSelector has no positive requirement (=, in, exists), so it selects every namespace, including those created later): a config reaches only what its author may read; give namespaceSelector a positive requirement naming namespaces you may use, or ask for the permission`,
		},
		{
			name: "a webhook over a namespace the author may read but not change",
			watched: map[string]gatehousev1alpha1.WatchedResource{
				"cms": {APIVersion: "v1", Resources: "configmaps", NamespaceSelector: byName("team-b"), EnableValidationWebhook: true},
			},
			grants:     with(grant("configmaps", "team-b", readVerbs...), grant("configmaps", "team-b", "update", "delete")),
			want:       `user "alice" may not create configmaps in namespace "team-b" (spec.watchedResources[cms].enableValidationWebhook): a config's webhook may refuse only the changes its author may make; narrow namespaceSelector, or set enableValidationWebhook to false, or ask for the permission`,
			wantListed: true,
		},
		{
			name: "a webhook over a namespace the author may change",
			watched: map[string]gatehousev1alpha1.WatchedResource{
				"cms": {APIVersion: "v1", Resources: "configmaps", NamespaceSelector: byName("team-a"), EnableValidationWebhook: true},
			},
			grants:     with(grant("configmaps", "team-a", allVerbs...)),
			wantListed: true,
		},
		{
			name: "a cluster-scoped kind needs cluster-wide rights, whatever its namespaceSelector",
			watched: map[string]gatehousev1alpha1.WatchedResource{
				"classes": {APIVersion: "networking.k8s.io/v1", Resources: "ingressclasses", NamespaceSelector: byName("team-a")},
			},
			grants: with([]Question{{Verb: "list", Group: "networking.k8s.io", Resource: "ingressclasses", Namespace: "team-a"},
				{Verb: "watch", Group: "networking.k8s.io", Resource: "ingressclasses", Namespace: "team-a"}}),
			want: `user "alice" may not list ingressclasses.networking.k8s.io cluster-wide (spec.watchedResources[classes]: a cluster-scoped resource): a config reaches only what its author may read; ask for the permission`,
		},
		{
			name: "a kind not served yet is checked cluster-wide",
			watched: map[string]gatehousev1alpha1.WatchedResource{
				"widgets": {APIVersion: "example.com/v1", Resources: "widgets", NamespaceSelector: byName("team-a")},
			},
			grants: with([]Question{{Verb: "list", Group: "example.com", Resource: "widgets", Namespace: "team-a"},
				{Verb: "watch", Group: "example.com", Resource: "widgets", Namespace: "team-a"}}),
			want: `user "alice" may not list widgets.example.com cluster-wide (spec.watchedResources[widgets]: the cluster does not serve it yet, so its scope is unknown and it is checked cluster-wide): a config reaches only what its author may read; ask for the permission`,
		},
		{
			name: "the rendering's ConfigMap", watched: secretsEverywhere,
			grants: append(grant("secrets", "", readVerbs...), grant("configmaps", "team-a", "create")...),
			want:   `user "alice" may not update configmaps in namespace "team-a" (the config publishes its rendering to ConfigMap edge-haproxy): ask for the permission`,
		},
		{
			name: "update of the one ConfigMap is enough", watched: secretsEverywhere,
			grants: append(grant("secrets", "", readVerbs...), Question{Verb: "create", Resource: "configmaps", Namespace: "team-a"},
				Question{Verb: "update", Resource: "configmaps", Namespace: "team-a", Name: "edge-haproxy"}),
		},
		{
			name: "certificates are published to a Secret", watched: secretsEverywhere, certs: true,
			grants: with(grant("secrets", "", readVerbs...), grant("secrets", "team-b", "create", "update")),
			want:   `user "alice" may not create secrets in namespace "team-a" (the config publishes its rendering to Secret edge-haproxy-certs): ask for the permission`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := authzSpec(t, tc.watched)
			reqs := Requirements(authzKey, c, served(c), tc.certs)
			auth := &fakeAuthorizer{grants: tc.grants}
			lister := &namespaceLister{namespaces: namespaces}
			got, err := Authorize(context.Background(), "alice", reqs, auth.review, lister.list)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("refusal:\n  %s\nwant:\n  %s", got, tc.want)
			}
			if listed := lister.calls > 0; listed != tc.wantListed {
				t.Fatalf("namespace cache read: %v, want %v", listed, tc.wantListed)
			}
			seen := map[Question]bool{}
			for _, q := range auth.asked {
				if seen[q] {
					t.Fatalf("asked twice: %+v", q)
				}
				seen[q] = true
			}
		})
	}
}

// An author with cluster-wide rights is answered with one question per
// right, whatever the namespaceSelector selects: no namespace is listed or
// asked about.
func TestAuthorizeClusterWideFirst(t *testing.T) {
	c := authzSpec(t, map[string]gatehousev1alpha1.WatchedResource{
		"a": {APIVersion: "v1", Resources: "configmaps", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}, EnableValidationWebhook: true},
		// The same resource again: its questions are asked once.
		"b": {APIVersion: "v1", Resources: "configmaps", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "z"}}},
	})
	auth := &fakeAuthorizer{grants: grant("configmaps", "", allVerbs...)}
	lister := &namespaceLister{}
	got, err := Authorize(context.Background(), "admin", Requirements(authzKey, c, served(c), false), auth.review, lister.list)
	if err != nil || got != "" {
		t.Fatalf("refused: %q, %v", got, err)
	}
	// list, watch, create, update, delete cluster-wide; create and update
	// of the output are a different question (namespace, name).
	if len(auth.asked) != 7 || lister.calls != 0 {
		t.Fatalf("%d questions, %d namespace lists; want 7 and 0: %+v", len(auth.asked), lister.calls, auth.asked)
	}
}

// Many namespaces are asked about at most reviewParallelism at once, and
// the refusal is the first in order whatever the timing.
func TestAuthorizeNamespacesBoundedAndDeterministic(t *testing.T) {
	c := authzSpec(t, map[string]gatehousev1alpha1.WatchedResource{
		"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
	})
	namespaces := map[string]labels.Set{}
	var grants []Question
	grants = append(grants, grant("configmaps", "team-a", "create", "update")...)
	for i := range 200 {
		name := fmt.Sprintf("ns-%03d", i)
		namespaces[name] = labels.Set{"team": "a"}
		// ns-050 and ns-120 are not readable.
		if i != 50 && i != 120 {
			grants = append(grants, grant("services", name, readVerbs...)...)
		}
	}
	// Not named: the selector selects by label (spec.NamedBy).
	const want = `user "alice" may not list services in a namespace that namespaceSelector selects by label (Gatehouse names only the namespaces a selector names) (spec.watchedResources[services]): a config reaches only what its author may read; narrow namespaceSelector, or ask for the permission`
	for range 10 {
		auth := &fakeAuthorizer{grants: grants, delay: func() time.Duration { return time.Duration(rand.Intn(300)) * time.Microsecond }}
		lister := &namespaceLister{namespaces: namespaces}
		got, err := Authorize(context.Background(), "alice", Requirements(authzKey, c, served(c), false), auth.review, lister.list)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("refusal:\n  %s\nwant:\n  %s", got, want)
		}
		if auth.maxAtOne > reviewParallelism {
			t.Fatalf("%d questions in flight at once, want at most %d", auth.maxAtOne, reviewParallelism)
		}
		// It stops soon after the refusal: not all 400 per-namespace
		// questions (and not ns-120's) are asked.
		if n := len(auth.asked); n > 3+2*51+reviewParallelism {
			t.Fatalf("%d questions asked; the first refusal is the 51st namespace's list", n)
		}
	}
}

func TestAuthorizeCapsNamespaceQuestions(t *testing.T) {
	c := authzSpec(t, map[string]gatehousev1alpha1.WatchedResource{
		"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
	})
	namespaces := map[string]labels.Set{}
	for i := range maxNamespaceReviews/2 + 1 {
		namespaces[fmt.Sprintf("ns-%04d", i)] = labels.Set{"team": "a"}
	}
	auth := &fakeAuthorizer{grants: grant("configmaps", "team-a", "create", "update")}
	got, err := Authorize(context.Background(), "alice", Requirements(authzKey, c, served(c), false), auth.review, (&namespaceLister{namespaces: namespaces}).list)
	if err != nil {
		t.Fatal(err)
	}
	const want = `user "alice" may not watch services cluster-wide, and the namespaceSelector of spec.watchedResources[services] selects more namespaces than Gatehouse asks about one by one (1000 questions at most): ask for the permission cluster-wide, or narrow namespaceSelector`
	if got != want {
		t.Fatalf("refusal:\n  %s\nwant:\n  %s", got, want)
	}
	if len(auth.asked) != 4 {
		t.Fatalf("%d questions asked; want only the 4 cluster-wide ones", len(auth.asked))
	}
}

// A review that fails, or a request out of time, is no answer: never an
// admission, never a refusal naming a permission.
func TestAuthorizeWithoutAnswer(t *testing.T) {
	c := authzSpec(t, map[string]gatehousev1alpha1.WatchedResource{
		"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
	})
	reqs := Requirements(authzKey, c, served(c), false)
	lister := &namespaceLister{namespaces: map[string]labels.Set{"team-a": {"team": "a"}}}

	broken := errors.New("connection refused")
	if got, err := Authorize(context.Background(), "alice", reqs, (&fakeAuthorizer{fail: broken}).review, lister.list); !errors.Is(err, broken) || got != "" {
		t.Fatalf("failing reviews: %q, %v; want the error", got, err)
	}

	// Cluster-wide refused (30 ms), so the namespace is asked about (30
	// ms more): the 50 ms deadline ends it first, whatever the load.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	slow := &fakeAuthorizer{grants: grant("configmaps", "team-a", "create", "update"), delay: func() time.Duration { return 30 * time.Millisecond }}
	start := time.Now()
	got, err := Authorize(ctx, "alice", reqs, slow.review, lister.list)
	if !errors.Is(err, context.DeadlineExceeded) || got != "" {
		t.Fatalf("out of time: %q, %v; want the deadline", got, err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("returned %v after the deadline", elapsed)
	}
}

func TestAccessReviewCarriesTheWholeIdentity(t *testing.T) {
	user := authenticationv1.UserInfo{
		Username: "alice", UID: "u-1", Groups: []string{"system:authenticated", "team-a"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes.example.com": {"read", "write"}},
	}
	got := Review(user, Question{Verb: "update", Group: "", Resource: "configmaps", Namespace: "team-a", Name: "edge-haproxy"})
	want := authorizationv1.SubjectAccessReviewSpec{
		User: "alice", UID: "u-1", Groups: []string{"system:authenticated", "team-a"},
		Extra: map[string]authorizationv1.ExtraValue{"scopes.example.com": {"read", "write"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "update", Resource: "configmaps", Namespace: "team-a", Name: "edge-haproxy",
		},
	}
	if !reflect.DeepEqual(got.Spec, want) {
		t.Fatalf("review %+v\nwant %+v", got.Spec, want)
	}
}
