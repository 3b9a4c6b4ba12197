package configcheck

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// A config makes Gatehouse read, on its author's behalf, every object its
// watched resources select, publish what templates make of them, and refuse
// changes to them. Gatehouse's own ServiceAccount may do all of that across
// the cluster, so without a check anyone allowed to create a config in one
// namespace could read (through the rendering) and block what they cannot
// touch themselves. So at CREATE and UPDATE the config's author must hold,
// in the namespaces the config reaches, the rights the config exercises:
//
//   - list and watch on each watched resource;
//   - create, update and delete on each watched resource with
//     enableValidationWebhook: whoever can block a change must be able to
//     make it;
//   - create and update on ConfigMaps (and Secrets, when the config has
//     certificates) in the config's namespace, where the rendering goes.
//
// The namespaces are every namespace (cluster-wide) for a watched resource
// without a narrowing namespaceSelector or of a cluster-scoped kind, and
// otherwise the namespaces the selector selects now: cluster-wide rights
// answer for them all, else each is asked about. A namespace that joins the
// selection later (labelled afterwards, or created with the labels) is
// asked about then, for the author the config records, by the access
// controller (access.go, author.go); until it is, it is left out.
//
// The identity asked about is the admission request's UserInfo, which the
// API server fills in. Anyone reaching the webhook port directly can post a
// request with a forged UserInfo: so these questions are asked only when
// the server verified the caller's client certificate
// (module.VerifiedCaller); otherwise the config is admitted on what it
// carries, and the access controller asks about its recorded author once
// it is stored. A refusal names a namespace only when the selector names it.

// Bounds of one config's review. The cluster-wide questions are few (at
// most 5 per watched resource, 32 resources, and 4 for the outputs); the
// per-namespace ones grow with the selection, so they are capped, asked in
// order, and stop at the first refusal. Everything runs within the config
// webhook's deadline.
const (
	reviewParallelism   = 8
	maxNamespaceReviews = 1000
)

// accessQuestion is one SubjectAccessReview's resource attributes.
type accessQuestion struct {
	verb      string
	group     string
	resource  string
	namespace string // "" is every namespace, or a cluster-scoped kind
	name      string // one object ("" any)
}

// target is how a refusal names the resource: "secrets",
// "ingresses.networking.k8s.io".
func (q accessQuestion) target() string {
	if q.group == "" {
		return q.resource
	}
	return q.resource + "." + q.group
}

// accessReviewer answers one question for the config's author.
type accessReviewer func(ctx context.Context, q accessQuestion) (bool, error)

// accessScope is where a requirement must hold.
type accessScope int

const (
	// scopeCluster: cluster-wide, no fallback (no narrowing
	// namespaceSelector, a cluster-scoped or unknown kind).
	scopeCluster accessScope = iota
	// scopeSelected: cluster-wide, or else in every namespace sel selects.
	scopeSelected
	// scopeNamespace: in q.namespace (the config's own).
	scopeNamespace
)

// accessRequirement is one right the config's author must hold, with what a
// refusal says about it.
type accessRequirement struct {
	q     accessQuestion // namespace "" unless scopeNamespace
	scope accessScope
	sel   labels.Selector // scopeSelected: the namespaces
	// source names the spec field that asks for the right, and why
	// (cluster-wide only) the right is needed across the cluster.
	source, why string
	// advice says how to proceed.
	advice string
	// watched names the watched resource asking for the right ("" for the
	// outputs).
	watched string
}

// accessTarget is a watched resource as the authorizer names it.
type accessTarget struct {
	group, resource string
	clusterScoped   bool
	// known is false when discovery does not know the resource (yet): its
	// scope is unknown, so it is checked cluster-wide.
	known bool
}

const (
	readAdvice = "a config reaches only what its author may read"
	// blockAdvice: a webhook refusing changes its author could not make
	// would let them block other teams, or the cluster's admin.
	blockAdvice = "a config's webhook may refuse only the changes its author may make"
)

// accessRequirements lists, in a fixed order (watched resources by name,
// then the outputs Gatehouse publishes), the rights the config's author
// must hold. targets maps each watched name to its resolved resource. It
// is pure.
func accessRequirements(key spec.Key, c *spec.Compiled, targets map[string]accessTarget, certs bool) []accessRequirement {
	var out []accessRequirement
	for _, name := range slices.Sorted(maps.Keys(c.Watched)) {
		w := c.Watched[name]
		if w.OnDemand {
			// Nothing is listed or watched: each object is fetched only
			// once its author may get it (ondemand.go).
			continue
		}
		t := targets[name]
		source := "spec.watchedResources[" + name + "]"
		scope, why, narrowAdvice := scopeSelected, "", "narrow namespaceSelector"
		switch {
		case !t.known:
			scope, why, narrowAdvice = scopeCluster, "the cluster does not serve it yet, so its scope is unknown and it is checked cluster-wide", ""
		case t.clusterScoped:
			scope, why, narrowAdvice = scopeCluster, "a cluster-scoped resource", ""
		case w.Namespaces == nil:
			scope, why, narrowAdvice = scopeCluster, "it has no namespaceSelector", "add a namespaceSelector naming namespaces you may use"
		case !spec.Narrows(w.Namespaces):
			scope, why, narrowAdvice = scopeCluster,
				"its namespaceSelector has no positive requirement (=, in, exists), so it selects every namespace, including those created later",
				"give namespaceSelector a positive requirement naming namespaces you may use"
		}
		verbs := []string{"list", "watch"}
		if w.Webhook {
			verbs = append(verbs, "create", "update", "delete")
		}
		for _, verb := range verbs {
			r := accessRequirement{
				q:     accessQuestion{verb: verb, group: t.group, resource: t.resource},
				scope: scope, source: source, why: why, watched: name,
			}
			if scope == scopeSelected {
				r.sel = w.Namespaces
			}
			purpose, remedy := readAdvice, narrowAdvice
			if verb != "list" && verb != "watch" {
				r.source += ".enableValidationWebhook"
				purpose, remedy = blockAdvice, joinAdvice(narrowAdvice, "set enableValidationWebhook to false")
			}
			r.advice = purpose + "; " + joinAdvice(remedy, "ask for the permission")
			out = append(out, r)
		}
	}
	type output struct{ resource, kind, name string }
	var outputs []output
	// Gatehouse publishes its own kind's renderings, never haptic's
	// (haptic's controller deploys them, with its own rights).
	if key.Kind == spec.GatehouseKind {
		outputs = append(outputs, output{"configmaps", "ConfigMap", RenderedConfigMapName(key.Name)})
		if certs {
			outputs = append(outputs, output{"secrets", "Secret", RenderedSecretName(key.Name)})
		}
	}
	for _, o := range outputs {
		source := "the config publishes its rendering to " + o.kind + " " + o.name
		// RBAC cannot restrict create by name (the name is not known when
		// a create is authorized), but update can be: ask about the one
		// object, which a namespace-wide rule answers too.
		for _, q := range []accessQuestion{
			{verb: "create", resource: o.resource, namespace: key.Namespace},
			{verb: "update", resource: o.resource, namespace: key.Namespace, name: o.name},
		} {
			out = append(out, accessRequirement{q: q, scope: scopeNamespace, source: source, advice: "ask for the permission"})
		}
	}
	return out
}

func joinAdvice(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", or " + b
}

// refusal is the denial for r's question q.
func (r accessRequirement) refusal(user string, q accessQuestion) string {
	where := "in namespace " + fmt.Sprintf("%q", q.namespace)
	if r.scope == scopeSelected && q.namespace != "" && !spec.NamedBy(r.sel, q.namespace) {
		// Selected by its labels: the author may not know it exists, and
		// a refusal must not tell them (nor anyone posting a made-up
		// userInfo to the port) which namespaces carry a label.
		where = "in a namespace that namespaceSelector selects by label (Gatehouse names only the namespaces a selector names)"
	}
	source := r.source
	if q.namespace == "" {
		where = "cluster-wide"
		if r.why != "" {
			source += ": " + r.why
		}
	}
	return fmt.Sprintf("user %q may not %s %s %s (%s): %s", user, q.verb, q.target(), where, source, r.advice)
}

// distinctQuestions are reqs' questions, each once, in their order.
func distinctQuestions(reqs []accessRequirement) []accessQuestion {
	var out []accessQuestion
	seen := map[accessQuestion]bool{}
	for _, r := range reqs {
		if !seen[r.q] {
			seen[r.q] = true
			out = append(out, r.q)
		}
	}
	return out
}

// authorize asks review whether the author (user, for messages) holds every
// right in reqs, and returns the refusal of the first one missing ("" when
// none is), or an error when the answer could not be had (the review
// failed, ctx ended). namespaces lists the namespaces a selector selects;
// it is called only for a requirement the author holds no cluster-wide
// right for.
func authorize(ctx context.Context, user string, reqs []accessRequirement, review accessReviewer,
	namespaces func(context.Context, labels.Selector) ([]string, error)) (string, error) {
	// First every question as asked (cluster-wide, or the config's
	// namespace), each once: an author with cluster-wide rights is done
	// here, and no namespace is listed.
	first := distinctQuestions(reqs)
	seen := make(map[accessQuestion]bool, len(first))
	for _, q := range first {
		seen[q] = true
	}
	answers, err := askAll(ctx, first, review)
	if err != nil {
		return "", err
	}
	var fallback []accessRequirement
	for _, r := range reqs {
		switch {
		case answers[r.q]:
		case r.scope == scopeSelected:
			fallback = append(fallback, r)
		default:
			return r.refusal(user, r.q), nil
		}
	}
	if len(fallback) == 0 {
		return "", nil
	}
	// Then, for rights refused cluster-wide, each namespace the
	// selector selects now.
	type asked struct {
		q   accessQuestion
		req int
	}
	var questions []asked
	selected := map[string][]string{}
	for i, r := range fallback {
		key := r.sel.String()
		names, ok := selected[key]
		if !ok {
			if names, err = namespaces(ctx, r.sel); err != nil {
				return "", fmt.Errorf("listing the namespaces %s selects: %w", r.source, err)
			}
			sort.Strings(names)
			selected[key] = names
		}
		for _, ns := range names {
			q := r.q
			q.namespace = ns
			if !seen[q] {
				seen[q] = true
				questions = append(questions, asked{q: q, req: i})
			}
		}
		if len(questions) > maxNamespaceReviews {
			return fmt.Sprintf("user %q may not %s %s cluster-wide, and the namespaceSelector of %s selects more namespaces than Gatehouse asks about one by one (%d questions at most): ask for the permission cluster-wide, or narrow namespaceSelector",
				user, r.q.verb, r.q.target(), r.source, maxNamespaceReviews), nil
		}
	}
	qs := make([]accessQuestion, len(questions))
	for i, a := range questions {
		qs[i] = a.q
	}
	denied, err := firstDenied(ctx, qs, review)
	if err != nil || denied < 0 {
		return "", err
	}
	return fallback[questions[denied].req].refusal(user, qs[denied]), nil
}

// askAll asks every question, at most reviewParallelism at once.
func askAll(ctx context.Context, qs []accessQuestion, review accessReviewer) (map[accessQuestion]bool, error) {
	answers := make([]bool, len(qs))
	errs := make([]error, len(qs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	slots := make(chan struct{}, reviewParallelism)
	for i := range qs {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			answers[i], errs[i] = review(ctx, qs[i])
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	out := make(map[accessQuestion]bool, len(qs))
	for i, q := range qs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out[q] = answers[i]
	}
	return out, nil
}

// firstDenied asks qs in order, at most reviewParallelism at once, and
// returns the index of the first one refused (-1: none). It starts no
// question past a refusal but lets those before it finish, so the answer is
// the first refusal in order whatever the timing: the message a user reads
// does not change from one attempt to the next. Questions are started in
// order and the stop index only decreases, so every question before it was
// answered, and allowed.
func firstDenied(ctx context.Context, qs []accessQuestion, review accessReviewer) (int, error) {
	var (
		mu      sync.Mutex
		stopAt  = len(qs) // the first question refused or failed so far
		failure error     // why stopAt failed, nil when it was refused
		wg      sync.WaitGroup
	)
	stop := func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if i < stopAt {
			stopAt, failure = i, err
		}
	}
	slots := make(chan struct{}, reviewParallelism)
	for i := range qs {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			stop(i, ctx.Err())
		}
		mu.Lock()
		past := i >= stopAt
		mu.Unlock()
		if past {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			allowed, err := review(ctx, qs[i])
			if err != nil || !allowed {
				stop(i, err)
			}
		}()
	}
	wg.Wait()
	switch {
	case failure != nil:
		return 0, failure
	case stopAt == len(qs):
		return -1, nil
	}
	return stopAt, nil
}

// subjectAccessReview asks the API server about user's rights. A live call,
// on purpose: an authorization decision cannot come from a cache. RBAC is
// one authorizer among several (Node, webhooks, ABAC), and only the API
// server combines them; RoleBindings in a cache would miss all but RBAC,
// and aggregated ClusterRoles and groups besides.
func (m *Module) subjectAccessReview(user authenticationv1.UserInfo) accessReviewer {
	return func(ctx context.Context, q accessQuestion) (bool, error) {
		allowed, err := module.Allowed(ctx, m.host.Client(), accessReview(user, q))
		if err != nil {
			return false, fmt.Errorf("SubjectAccessReview (%s %s in %q): %w", q.verb, q.target(), q.namespace, err)
		}
		return allowed, nil
	}
}

// accessReview is the SubjectAccessReview of q for user.
func accessReview(user authenticationv1.UserInfo, q accessQuestion) *authorizationv1.SubjectAccessReview {
	return module.AccessReview(user, authorizationv1.ResourceAttributes{
		Verb: q.verb, Group: q.group, Resource: q.resource, Namespace: q.namespace, Name: q.name,
	})
}

// accessTargets resolves the watched resources through discovery, so that
// the authorizer is asked about the resource's own plural (a config may
// write "Secret"; RBAC rules name "secrets") and its scope.
func (m *Module) accessTargets(c *spec.Compiled) map[string]accessTarget {
	out := make(map[string]accessTarget, len(c.Watched))
	for name, w := range c.Watched {
		t := accessTarget{group: w.GVR.Group, resource: strings.ToLower(w.GVR.Resource)}
		if gvk, scoped, err := m.resolve(w.GVR); err == nil {
			if mapping, err := m.host.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
				t = accessTarget{group: mapping.Resource.Group, resource: mapping.Resource.Resource, clusterScoped: scoped, known: true}
			}
		}
		out[name] = t
	}
	return out
}

// selectedNamespaces are the namespaces sel selects now, from the
// namespace cache.
func (m *Module) selectedNamespaces(ctx context.Context, sel labels.Selector) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := m.namespaces.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list.Items))
	for _, ns := range list.Items {
		out = append(out, ns.Name)
	}
	return out, nil
}

// authorizeAuthor checks that the request's user holds the rights config
// key (compiled as c) exercises; see the top of this file. It returns the
// refusal, or an error when the question could not be answered in time.
func (m *Module) authorizeAuthor(ctx context.Context, user authenticationv1.UserInfo, key spec.Key, c *spec.Compiled, certs bool) (string, error) {
	if user.Username == "" && len(user.Groups) == 0 {
		// The API server always names the requester; a review without one
		// was posted to the port by someone else, whose rights are unknown.
		return "the request names no user: a config is judged with its author's rights, and this one has no author", nil
	}
	reqs := accessRequirements(key, c, m.accessTargets(c), certs)
	return authorize(ctx, user.Username, reqs, m.access.reviewer(user), m.selectedNamespaces)
}
