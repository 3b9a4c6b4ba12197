package authz

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
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
// controller (configcheck's access controller, with record.go); until it is, it is left out.
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

// Question is one SubjectAccessReview's resource attributes.
type Question struct {
	Verb      string
	Group     string
	Resource  string
	Namespace string // "" is every namespace, or a cluster-scoped kind
	Name      string // one object ("" any)
}

// target is how a refusal names the resource: "secrets",
// "ingresses.networking.k8s.io".
func (q Question) Target() string {
	if q.Group == "" {
		return q.Resource
	}
	return q.Resource + "." + q.Group
}

// Reviewer answers one question for the config's author.
type Reviewer func(ctx context.Context, q Question) (bool, error)

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

// Requirement is one right the config's author must hold, with what a
// refusal says about it.
type Requirement struct {
	Question Question // namespace "" unless scopeNamespace
	scope    accessScope
	sel      labels.Selector // scopeSelected: the namespaces
	// source names the spec field that asks for the right, and why
	// (cluster-wide only) the right is needed across the cluster.
	source, why string
	// advice says how to proceed.
	advice string
	// watched names the watched resource asking for the right ("" for the
	// outputs).
	watched string
}

// Target is a watched resource as the authorizer names it.
type Target struct {
	Group, Resource string
	ClusterScoped   bool
	// known is false when discovery does not know the resource (yet): its
	// scope is unknown, so it is checked cluster-wide.
	Known bool
}

const (
	readAdvice = "a config reaches only what its author may read"
	// blockAdvice: a webhook refusing changes its author could not make
	// would let them block other teams, or the cluster's admin.
	blockAdvice = "a config's webhook may refuse only the changes its author may make"
)

// Requirements lists, in a fixed order (watched resources by name,
// then the outputs Gatehouse publishes), the rights the config's author
// must hold. targets maps each watched name to its resolved resource. It
// is pure.
func Requirements(key spec.Key, c *spec.Compiled, targets map[string]Target, certs bool) []Requirement {
	var out []Requirement
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
		case !t.Known:
			scope, why, narrowAdvice = scopeCluster, "the cluster does not serve it yet, so its scope is unknown and it is checked cluster-wide", ""
		case t.ClusterScoped:
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
			r := Requirement{
				Question: Question{Verb: verb, Group: t.Group, Resource: t.Resource},
				scope:    scope, source: source, why: why, watched: name,
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
		outputs = append(outputs, output{"configmaps", "ConfigMap", spec.RenderedConfigMapName(key.Name)})
		if certs {
			outputs = append(outputs, output{"secrets", "Secret", spec.RenderedSecretName(key.Name)})
		}
	}
	for _, o := range outputs {
		source := "the config publishes its rendering to " + o.kind + " " + o.name
		// RBAC cannot restrict create by name (the name is not known when
		// a create is authorized), but update can be: ask about the one
		// object, which a namespace-wide rule answers too.
		for _, q := range []Question{
			{Verb: "create", Resource: o.resource, Namespace: key.Namespace},
			{Verb: "update", Resource: o.resource, Namespace: key.Namespace, Name: o.name},
		} {
			out = append(out, Requirement{Question: q, scope: scopeNamespace, source: source, advice: "ask for the permission"})
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
func (r Requirement) refusal(user string, q Question) string {
	where := "in namespace " + fmt.Sprintf("%q", q.Namespace)
	if r.scope == scopeSelected && q.Namespace != "" && !spec.NamedBy(r.sel, q.Namespace) {
		// Selected by its labels: the author may not know it exists, and
		// a refusal must not tell them (nor anyone posting a made-up
		// userInfo to the port) which namespaces carry a label.
		where = "in a namespace that namespaceSelector selects by label (Gatehouse names only the namespaces a selector names)"
	}
	source := r.source
	if q.Namespace == "" {
		where = "cluster-wide"
		if r.why != "" {
			source += ": " + r.why
		}
	}
	return fmt.Sprintf("user %q may not %s %s %s (%s): %s", user, q.Verb, q.Target(), where, source, r.advice)
}

// distinctQuestions are reqs' questions, each once, in their order.
func distinctQuestions(reqs []Requirement) []Question {
	var out []Question
	seen := map[Question]bool{}
	for _, r := range reqs {
		if !seen[r.Question] {
			seen[r.Question] = true
			out = append(out, r.Question)
		}
	}
	return out
}

// Authorize asks review whether the author (user, for messages) holds every
// right in reqs, and returns the refusal of the first one missing ("" when
// none is), or an error when the answer could not be had (the review
// failed, ctx ended). namespaces lists the namespaces a selector selects;
// it is called only for a requirement the author holds no cluster-wide
// right for.
func Authorize(ctx context.Context, user string, reqs []Requirement, review Reviewer,
	namespaces func(context.Context, labels.Selector) ([]string, error)) (string, error) {
	// First every question as asked (cluster-wide, or the config's
	// namespace), each once: an author with cluster-wide rights is done
	// here, and no namespace is listed.
	first := distinctQuestions(reqs)
	seen := make(map[Question]bool, len(first))
	for _, q := range first {
		seen[q] = true
	}
	answers, err := askAll(ctx, first, review)
	if err != nil {
		return "", err
	}
	var fallback []Requirement
	for _, r := range reqs {
		switch {
		case answers[r.Question]:
		case r.scope == scopeSelected:
			fallback = append(fallback, r)
		default:
			return r.refusal(user, r.Question), nil
		}
	}
	if len(fallback) == 0 {
		return "", nil
	}
	// Then, for rights refused cluster-wide, each namespace the
	// selector selects now.
	type asked struct {
		Question Question
		req      int
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
			q := r.Question
			q.Namespace = ns
			if !seen[q] {
				seen[q] = true
				questions = append(questions, asked{Question: q, req: i})
			}
		}
		if len(questions) > maxNamespaceReviews {
			return fmt.Sprintf("user %q may not %s %s cluster-wide, and the namespaceSelector of %s selects more namespaces than Gatehouse asks about one by one (%d questions at most): ask for the permission cluster-wide, or narrow namespaceSelector",
				user, r.Question.Verb, r.Question.Target(), r.source, maxNamespaceReviews), nil
		}
	}
	qs := make([]Question, len(questions))
	for i, a := range questions {
		qs[i] = a.Question
	}
	denied, err := firstDenied(ctx, qs, review)
	if err != nil || denied < 0 {
		return "", err
	}
	return fallback[questions[denied].req].refusal(user, qs[denied]), nil
}

// askAll asks every question, at most reviewParallelism at once.
func askAll(ctx context.Context, qs []Question, review Reviewer) (map[Question]bool, error) {
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
	out := make(map[Question]bool, len(qs))
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
func firstDenied(ctx context.Context, qs []Question, review Reviewer) (int, error) {
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

// Review is the SubjectAccessReview of q for user.
func Review(user authenticationv1.UserInfo, q Question) *authorizationv1.SubjectAccessReview {
	return module.AccessReview(user, authorizationv1.ResourceAttributes{
		Verb: q.Verb, Group: q.Group, Resource: q.Resource, Namespace: q.Namespace, Name: q.Name,
	})
}
