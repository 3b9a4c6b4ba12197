package authz

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// futureSpec is the attack of a namespace that joins later: Secrets in the
// namespaces named team-a and future, and Services in those labelled
// team=a (a label anyone with the right may give a namespace).
func futureSpec(t *testing.T) *spec.Compiled {
	return authzSpec(t, map[string]gatehousev1alpha1.WatchedResource{
		"secrets": {APIVersion: "v1", Resources: "secrets", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"cert": "true"}},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a", "future"}}}}},
		"services": {APIVersion: "v1", Resources: "services", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
	})
}

// aliceGrants: alice may read Secrets and Services in team-a only, and
// write the outputs there.
func aliceGrants() []Question {
	g := grant("configmaps", "team-a", "create", "update")
	g = append(g, grant("secrets", "team-a", readVerbs...)...)
	return append(g, grant("services", "team-a", readVerbs...)...)
}

func TestCheckAccessLeavesOutWhatTheAuthorMayNotRead(t *testing.T) {
	c := futureSpec(t)
	reqs := Requirements(authzKey, c, served(c), false)
	check := func(namespaces map[string]labels.Set) *Access {
		t.Helper()
		auth := &fakeAuthorizer{grants: aliceGrants()}
		a, err := CheckAccess(context.Background(), "alice", reqs, auth.review, (&namespaceLister{namespaces: namespaces}).list)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	teamA := labels.Set{"kubernetes.io/metadata.name": "team-a", "team": "a"}
	before := check(map[string]labels.Set{"team-a": teamA})
	if !before.Permits("secrets", "team-a") || !before.Permits("services", "team-a") || before.Outputs != "" {
		t.Fatalf("alice's own namespace is left out: %+v", before)
	}
	if !before.Complete() {
		t.Fatalf("nothing named is left out, yet incomplete: %s", before.LeftOutMessage())
	}
	// An administrator creates future, with a Secret alice may not read,
	// and labels hidden team=a.
	after := check(map[string]labels.Set{
		"team-a": teamA,
		"future": {"kubernetes.io/metadata.name": "future"},
		"hidden": {"kubernetes.io/metadata.name": "hidden", "team": "a"},
	})
	for _, leak := range [][2]string{{"secrets", "future"}, {"services", "hidden"}, {"secrets", "hidden"}} {
		if after.Permits(leak[0], leak[1]) {
			t.Fatalf("%s of namespace %s are read for alice", leak[0], leak[1])
		}
	}
	if !after.Permits("secrets", "team-a") {
		t.Fatal("team-a's Secrets are left out once future exists")
	}
	msg := after.LeftOutMessage()
	if after.Complete() || !strings.Contains(msg, `future (alice may not list secrets there)`) {
		t.Fatalf("the named namespace is not reported:\n%s", msg)
	}
	// hidden was selected by label: whether it exists is none of alice's
	// business, so the status reads the same with it as without it.
	withoutHidden := check(map[string]labels.Set{"team-a": teamA, "future": {"kubernetes.io/metadata.name": "future"}})
	if strings.Contains(msg, "hidden") || msg != withoutHidden.LeftOutMessage() {
		t.Fatalf("the status tells a namespace selected by label apart:\n%s\n---\n%s", msg, withoutHidden.LeftOutMessage())
	}
}

func TestCheckAccessClusterWideAndOutputs(t *testing.T) {
	c := futureSpec(t)
	reqs := Requirements(authzKey, c, served(c), false)
	lister := &namespaceLister{namespaces: map[string]labels.Set{"x": {"team": "a"}}}
	admin := &fakeAuthorizer{grants: append(grant("secrets", "", allVerbs...), append(grant("services", "", allVerbs...), grant("configmaps", "", allVerbs...)...)...)}
	a, err := CheckAccess(context.Background(), "admin", reqs, admin.review, lister.list)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Permits("secrets", "anything") || lister.calls != 0 || a.LeftOutMessage() != "" {
		t.Fatalf("cluster-wide rights: %+v, %d namespace lists, %q", a, lister.calls, a.LeftOutMessage())
	}
	// May read, may not publish.
	reader := &fakeAuthorizer{grants: append(grant("secrets", "", readVerbs...), grant("services", "", readVerbs...)...)}
	a, err = CheckAccess(context.Background(), "bob", reqs, reader.review, lister.list)
	if err != nil {
		t.Fatal(err)
	}
	if a.Outputs == "" || a.Complete() {
		t.Fatalf("outputs allowed to a user who may not write them: %+v", a)
	}
	// Not checked yet: nothing.
	var none *Access
	if none.Permits("secrets", "team-a") {
		t.Fatal("an unchecked config reads a namespace")
	}
}

func TestNamedBy(t *testing.T) {
	sel := func(s string) labels.Selector {
		t.Helper()
		parsed, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return parsed
	}
	for _, tc := range []struct {
		sel  string
		ns   string
		want bool
	}{
		{"kubernetes.io/metadata.name in (a,b)", "b", true},
		{"kubernetes.io/metadata.name=a", "a", true},
		{"kubernetes.io/metadata.name==a", "a", true},
		{"kubernetes.io/metadata.name notin (a)", "a", false},
		{"kubernetes.io/metadata.name!=a", "a", false},
		{"team=a", "a", false},
		{"name=a", "a", false},
		{"kubernetes.io/metadata.name in (a,b)", "c", false},
	} {
		if got := spec.NamedBy(sel(tc.sel), tc.ns); got != tc.want {
			t.Errorf("namedBy(%q, %q) = %v, want %v", tc.sel, tc.ns, got, tc.want)
		}
	}
	if spec.NamedBy(nil, "a") {
		t.Error("no selector names a namespace")
	}
}

// countingLive is the API server's authorizer behind Cache, counting
// the SubjectAccessReviews sent.
type countingLive struct {
	auth  *fakeAuthorizer
	calls atomic.Int64
}

func (c *countingLive) review(ctx context.Context, _ authenticationv1.UserInfo, q Question) (bool, error) {
	c.calls.Add(1)
	return c.auth.review(ctx, q)
}

func TestAccessCacheAsksOnceAndForAShortTime(t *testing.T) {
	live := &countingLive{auth: &fakeAuthorizer{grants: grant("secrets", "a", "list"), delay: func() time.Duration { return time.Millisecond }}}
	cache := NewCache(live.review)
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	cache.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	alice := cache.Reviewer(authenticationv1.UserInfo{Username: "alice", Groups: []string{"team-a"}})
	q := Question{Verb: "list", Resource: "secrets", Namespace: "a"}
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, err := alice(context.Background(), q); !ok || err != nil {
				t.Errorf("answer %v, %v", ok, err)
			}
		}()
	}
	wg.Wait()
	if n := live.calls.Load(); n != 1 {
		t.Fatalf("50 askers of one question sent %d reviews, want 1", n)
	}
	// Another identity (the same name in other groups) is another question.
	other := cache.Reviewer(authenticationv1.UserInfo{Username: "alice"})
	if _, err := other(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if n := live.calls.Load(); n != 2 {
		t.Fatalf("%d reviews; alice in no group was answered with alice in team-a's answer", n)
	}
	mu.Lock()
	now = now.Add(accessTTL)
	mu.Unlock()
	if _, err := alice(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if n := live.calls.Load(); n != 3 {
		t.Fatalf("%d reviews; want the expired answer asked again (3)", n)
	}
	// A failure is not kept.
	live.auth.fail = fmt.Errorf("connection refused")
	q2 := Question{Verb: "watch", Resource: "secrets", Namespace: "a"}
	if _, err := alice(context.Background(), q2); err == nil {
		t.Fatal("no error")
	}
	live.auth.fail = nil
	if _, err := alice(context.Background(), q2); err != nil {
		t.Fatalf("a failure was kept: %v", err)
	}
}

// TestSubjectAccessReviewsPerPost counts the SubjectAccessReviews a config
// review costs: a config over four kinds selecting ten namespaces by label
// whose author holds the rights namespace by namespace (the worst case
// that passes: nothing stops at a refusal). Issue 26 measured 71 reviews
// for one post and 1,409 for 20 concurrent posts. The figures are logged
// for docs/security.md.
func TestSubjectAccessReviewsPerPost(t *testing.T) {
	team := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	c := authzSpec(t, map[string]gatehousev1alpha1.WatchedResource{
		"ingresses": {APIVersion: "networking.k8s.io/v1", Resources: "ingresses", NamespaceSelector: team, EnableValidationWebhook: true},
		"services":  {APIVersion: "v1", Resources: "services", NamespaceSelector: team},
		"pods":      {APIVersion: "v1", Resources: "pods", NamespaceSelector: team},
		"secrets": {APIVersion: "v1", Resources: "secrets", NamespaceSelector: team,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"cert": "true"}}},
	})
	namespaces := map[string]labels.Set{}
	grants := grant("configmaps", "team-a", "create", "update")
	for i := range 10 {
		ns := fmt.Sprintf("a-%d", i)
		namespaces[ns] = labels.Set{"team": "a"}
		for _, r := range []string{"services", "pods", "secrets"} {
			grants = append(grants, grant(r, ns, readVerbs...)...)
		}
		for _, v := range allVerbs {
			grants = append(grants, Question{Verb: v, Group: "networking.k8s.io", Resource: "ingresses", Namespace: ns})
		}
	}
	reqs := Requirements(authzKey, c, served(c), false)
	user := authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	posts := func(n int, review func() Reviewer) {
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mu sync.Mutex
				l := &namespaceLister{namespaces: namespaces}
				list := func(ctx context.Context, s labels.Selector) ([]string, error) {
					mu.Lock()
					defer mu.Unlock()
					return l.list(ctx, s)
				}
				if got, err := Authorize(context.Background(), "alice", reqs, review(), list); got != "" || err != nil {
					t.Errorf("refused: %q, %v", got, err)
				}
			}()
		}
		wg.Wait()
	}
	// Before: every post asks every question itself.
	direct := &countingLive{auth: &fakeAuthorizer{grants: grants}}
	posts(1, func() Reviewer {
		return func(ctx context.Context, q Question) (bool, error) { return direct.review(ctx, user, q) }
	})
	onePostDirect := direct.calls.Load()
	posts(20, func() Reviewer {
		return func(ctx context.Context, q Question) (bool, error) { return direct.review(ctx, user, q) }
	})
	twentyDirect := direct.calls.Load() - onePostDirect
	// After: through the shared cache.
	cached := &countingLive{auth: &fakeAuthorizer{grants: grants}}
	cache := NewCache(cached.review)
	posts(1, func() Reviewer { return cache.Reviewer(user) })
	onePost := cached.calls.Load()
	posts(20, func() Reviewer { return cache.Reviewer(user) })
	twentyMore := cached.calls.Load() - onePost
	fresh := &countingLive{auth: &fakeAuthorizer{grants: grants}}
	freshCache := NewCache(fresh.review)
	posts(20, func() Reviewer { return freshCache.Reviewer(user) })
	twentyCold := fresh.calls.Load()
	t.Logf("SubjectAccessReviews: one post %d (uncached %d); 20 concurrent posts %d on a cold cache, %d right after the first (uncached %d)",
		onePost, onePostDirect, twentyCold, twentyMore, twentyDirect)
	if onePost != onePostDirect {
		t.Fatalf("one post: %d reviews through the cache, %d without: each question is asked once either way", onePost, onePostDirect)
	}
	if twentyCold != onePost || twentyMore != 0 {
		t.Fatalf("20 concurrent posts of one author sent %d reviews (cold) and %d (warm); want %d and 0", twentyCold, twentyMore, onePost)
	}
	if twentyDirect != 20*onePostDirect {
		t.Fatalf("uncached: %d for 20 posts, want 20×%d", twentyDirect, onePostDirect)
	}
}
