package configcheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gatehouse-dev/gatehouse/internal/trigger"
)

// The config webhook checks the author's rights over the namespaces the
// config selects when it is written (authz.go). Namespaces come later: one
// created with the selected labels, or labelled afterwards, joins the
// selection without anyone asking whether the author may read it. So the
// stores are filled only from the namespaces the access controller (below)
// found the author (author.go) may use, every replica for itself:
//
//   - a config's access is checked when its state is built (each new
//     generation, each start), again whenever a namespace is created or
//     its labels change, and at least every Options.AccessRecheck (a right
//     taken back in RBAC changes no object Gatehouse watches: on a quiet
//     cluster nothing else would ask again); until checked, nothing of the
//     config is rendered, published or judged (its admissions wait, as
//     while its stores load);
//   - a watched resource whose rights the author holds cluster-wide is
//     read in every namespace; one whose namespaceSelector narrows it, in
//     the selected namespaces where the author holds every right it asks
//     (list and watch; create, update and delete with its webhook). A
//     namespace that joins the selection is left out until it is checked;
//   - the outputs are written only when the author may write them.
//
// Every question goes through accessCache: asked once per author, right
// and namespace however many configs and requests ask it, kept a short
// time, and at most maxLiveReviews at once for the whole process.

// Bounds of the SubjectAccessReviews Gatehouse sends.
const (
	// accessTTL is how long an answer is reused. A right granted or taken
	// back takes effect on the next check after it.
	accessTTL = 10 * time.Second
	// maxAccessEntries bounds the answers kept; past it, answers are
	// still shared by those asking at the same moment, but not kept.
	maxAccessEntries = 10000
	// maxLiveReviews bounds the reviews in flight for the whole process,
	// every request and the access controller together.
	maxLiveReviews = 16
)

// liveReview asks the API server one question about user.
type liveReview func(ctx context.Context, user authenticationv1.UserInfo, q accessQuestion) (bool, error)

// accessCache answers access questions, each once per accessTTL.
type accessCache struct {
	live  liveReview
	now   func() time.Time
	slots chan struct{}

	mu      sync.Mutex
	entries map[accessKey]*accessEntry
}

type accessKey struct {
	user string // the whole identity, encoded
	q    accessQuestion
}

// accessEntry is one answer, or the question in flight (done open).
type accessEntry struct {
	done    chan struct{}
	allowed bool
	err     error
	expires time.Time
}

func newAccessCache(live liveReview) *accessCache {
	return &accessCache{live: live, now: time.Now, slots: make(chan struct{}, maxLiveReviews), entries: map[accessKey]*accessEntry{}}
}

// reviewer answers questions about user.
func (c *accessCache) reviewer(user authenticationv1.UserInfo) accessReviewer {
	key := encodeAuthor(user)
	return func(ctx context.Context, q accessQuestion) (bool, error) {
		return c.ask(ctx, accessKey{user: key, q: q}, user)
	}
}

func (c *accessCache) ask(ctx context.Context, k accessKey, user authenticationv1.UserInfo) (bool, error) {
	for {
		c.mu.Lock()
		e := c.entries[k]
		if e != nil && isDone(e) && !c.now().Before(e.expires) {
			delete(c.entries, k)
			e = nil
		}
		owner := e == nil
		if owner {
			e = &accessEntry{done: make(chan struct{})}
			if len(c.entries) >= maxAccessEntries {
				c.sweep()
			}
			if len(c.entries) < maxAccessEntries {
				c.entries[k] = e
			}
		}
		c.mu.Unlock()
		if owner {
			e.allowed, e.err = c.ask1(ctx, user, k.q)
			e.expires = c.now().Add(accessTTL)
			if e.err != nil {
				c.mu.Lock()
				if c.entries[k] == e {
					delete(c.entries, k)
				}
				c.mu.Unlock()
			}
			close(e.done)
			return e.allowed, e.err
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		if e.err == nil {
			return e.allowed, nil
		}
		// The one who asked ran out of time or failed: ask again, for
		// this caller's own deadline.
	}
}

// ask1 is one live review, in its turn among maxLiveReviews.
func (c *accessCache) ask1(ctx context.Context, user authenticationv1.UserInfo, q accessQuestion) (bool, error) {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return false, fmt.Errorf("waiting for a SubjectAccessReview slot (%d at most at once): %w", maxLiveReviews, ctx.Err())
	}
	defer func() { <-c.slots }()
	return c.live(ctx, user, q)
}

// sweep drops the expired answers; c.mu is held.
func (c *accessCache) sweep() {
	now := c.now()
	for k, e := range c.entries {
		if isDone(e) && !now.Before(e.expires) {
			delete(c.entries, k)
		}
	}
}

func isDone(e *accessEntry) bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// configAccess is what a config's author may have Gatehouse do, as last
// checked. It is replaced whole, never changed.
type configAccess struct {
	// author is who was asked about ("" when the config records none).
	author string
	// watched by name.
	watched map[string]*watchedAccess
	// outputs is the refusal of the outputs ("" when the author may write
	// them).
	outputs string
}

// watchedAccess is where one watched resource is read.
type watchedAccess struct {
	// all: every namespace (the rights are held cluster-wide).
	all bool
	// refusal, when not all and not per namespace: why nothing is read.
	refusal string
	// perNamespace: the selected namespaces were asked about one by one;
	// namespaces holds those allowed, leftOut the others by name, with why.
	perNamespace bool
	namespaces   map[string]bool
	leftOut      map[string]string
	// named says whether the selector names a namespace (spec.NamedBy).
	sel labels.Selector
	// over is set when the selector selects more namespaces than are
	// asked about.
	over int
	// lacking are the rights asked per namespace ("list secrets").
	lacking []string
}

// permits says whether objects of namespace (cluster-scoped: "") may be read
// for watched resource name. A nil access permits nothing: not checked yet.
func (a *configAccess) permits(name, namespace string) bool {
	if a == nil {
		return false
	}
	w := a.watched[name]
	switch {
	case w == nil:
		return false
	case w.all:
		return true
	case w.perNamespace:
		return w.namespaces[namespace]
	}
	return false
}

// checkAccess asks, as the author (review), for every right of reqs:
// cluster-wide first, then, for rights refused cluster-wide that a
// namespaceSelector narrows, in each namespace it selects now (namespaces),
// at most maxNamespaceReviews namespaces per watched resource. It returns
// an error when an answer could not be had.
func checkAccess(ctx context.Context, user string, reqs []accessRequirement, review accessReviewer,
	namespaces func(context.Context, labels.Selector) ([]string, error)) (*configAccess, error) {
	answers, err := askAll(ctx, distinctQuestions(reqs), review)
	if err != nil {
		return nil, err
	}
	out := &configAccess{author: user, watched: map[string]*watchedAccess{}}
	byWatched := map[string][]accessRequirement{}
	var order []string
	for _, r := range reqs {
		if r.watched == "" {
			if !answers[r.q] && out.outputs == "" {
				out.outputs = r.refusal(user, r.q)
			}
			continue
		}
		if _, ok := byWatched[r.watched]; !ok {
			order = append(order, r.watched)
		}
		byWatched[r.watched] = append(byWatched[r.watched], r)
	}
	for _, name := range order {
		w := &watchedAccess{all: true}
		var fallback []accessRequirement
		for _, r := range byWatched[name] {
			switch {
			case answers[r.q]:
			case r.scope == scopeSelected:
				w.all = false
				fallback = append(fallback, r)
			default:
				w.all = false
				if w.refusal == "" {
					w.refusal = r.refusal(user, r.q)
				}
			}
		}
		out.watched[name] = w
		if w.all || w.refusal != "" {
			continue
		}
		w.perNamespace, w.sel = true, fallback[0].sel
		names, err := namespaces(ctx, w.sel)
		if err != nil {
			return nil, fmt.Errorf("listing the namespaces %s selects: %w", fallback[0].source, err)
		}
		sort.Strings(names)
		if len(names) > maxNamespaceReviews {
			w.over = len(names) - maxNamespaceReviews
			names = names[:maxNamespaceReviews]
		}
		var qs []accessQuestion
		for _, r := range fallback {
			w.lacking = append(w.lacking, r.q.verb+" "+r.q.target())
			for _, ns := range names {
				q := r.q
				q.namespace = ns
				qs = append(qs, q)
			}
		}
		got, err := askAll(ctx, qs, review)
		if err != nil {
			return nil, err
		}
		w.namespaces, w.leftOut = map[string]bool{}, map[string]string{}
		for _, ns := range names {
			w.namespaces[ns] = true
		}
		for _, r := range fallback {
			for _, ns := range names {
				q := r.q
				q.namespace = ns
				if !got[q] && w.namespaces[ns] {
					delete(w.namespaces, ns)
					w.leftOut[ns] = r.q.verb + " " + r.q.target()
				}
			}
		}
	}
	return out, nil
}

// leftOutMessage says what a's watched resources leave out and why, for the
// config's readers: namespaces its selectors name are named, the others
// are not, and whether any namespace selected by label was left out is not
// said either (the same sentence stands whenever namespaces are asked
// about one by one), so that the status tells the author nothing about
// namespaces they may not read. "" when nothing is left out.
func (a *configAccess) leftOutMessage() string {
	var lines []string
	names := make([]string, 0, len(a.watched))
	for name := range a.watched {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w := a.watched[name]
		switch {
		case w.all:
		case w.refusal != "":
			lines = append(lines, fmt.Sprintf("watched resource %s reads nothing: %s", name, w.refusal))
		case w.perNamespace:
			var named []string
			for ns, why := range w.leftOut {
				if spec.NamedBy(w.sel, ns) {
					named = append(named, fmt.Sprintf("%s (%s may not %s there)", ns, a.author, why))
				}
			}
			sort.Strings(named)
			if len(named) > 0 {
				lines = append(lines, fmt.Sprintf("watched resource %s leaves out namespace %s", name, strings.Join(named, ", ")))
			}
			lines = append(lines, fmt.Sprintf("watched resource %s reads only the selected namespaces where %s may %s (checked when a namespace joins the selection; until then it is left out); namespaces selected by label are not named",
				name, a.author, strings.Join(w.lacking, ", ")))
			if w.over > 0 {
				lines = append(lines, fmt.Sprintf("watched resource %s: namespaceSelector selects more than %d namespaces, and those past the first %d by name are left out", name, maxNamespaceReviews, maxNamespaceReviews))
			}
		}
	}
	if a.outputs != "" {
		lines = append(lines, "nothing is published: "+a.outputs)
	}
	return strings.Join(lines, "\n")
}

// complete says whether a reads every selected namespace the author
// named and publishes: what the Authorized condition's status says.
func (a *configAccess) complete() bool {
	if a.outputs != "" {
		return false
	}
	for _, w := range a.watched {
		if w.refusal != "" {
			return false
		}
		for ns := range w.leftOut {
			if spec.NamedBy(w.sel, ns) {
				return false
			}
		}
	}
	return true
}

// accessController checks each config's access (checkAccess) on a
// workqueue, on every replica: each replica's stores are filled by it.
type accessController struct {
	m          *Module
	controller controller.Controller

	// triggers queues the configs whose access to check, once the
	// controller runs; it starts with every config.
	triggers *trigger.Source[reconcile.Request]
}

func newAccessController(m *Module) (*accessController, error) {
	a := &accessController{m: m}
	c, err := m.host.NewController("HAProxyTemplateConfigAccess", controller.Options{
		Reconciler:         a,
		NeedLeaderElection: ptr.To(false),
		RateLimiter:        workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
	})
	if err != nil {
		return nil, err
	}
	a.triggers = trigger.New(m.allConfigRequests)
	err = c.Watch(a.triggers)
	if err != nil {
		return nil, err
	}
	a.controller = c
	return a, nil
}

// trigger asks for key's access to be checked.
func (a *accessController) trigger(key spec.Key) {
	if a == nil {
		return
	}
	a.triggers.Add(key.Request())
}

// namespaceChanged checks again every config whose selection may change.
func (a *accessController) namespaceChanged() {
	for _, st := range a.m.allStates() {
		if st.needsNamespaceChecks() {
			a.trigger(st.key)
		}
	}
}

// accessDeadline bounds one config's check.
const accessDeadline = 30 * time.Second

func (a *accessController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := a.m
	st := m.state(spec.KeyOfRequest(req))
	if st == nil || st.compiled == nil {
		return reconcile.Result{}, nil
	}
	noAuthor := st.noAuthor
	if st.hasAuthor {
		noAuthor = m.keepAuthorRecordCurrent(ctx, st)
	}
	var access *configAccess
	if noAuthor != "" {
		access = &configAccess{outputs: noAuthor + claimHint}
	} else {
		ctx, cancel := context.WithTimeout(ctx, accessDeadline)
		defer cancel()
		reqs := accessRequirements(st.key, st.compiled, m.accessTargets(st.compiled), st.certs)
		var err error
		access, err = checkAccess(ctx, st.author.Username, reqs, m.access.reviewer(st.author), m.selectedNamespaces)
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	old := st.setAccess(access)
	for name, f := range st.feeds {
		if f != nil && !sameReach(old, access, name) {
			f.resync(logf.IntoContext(ctx, logf.FromContext(ctx).WithValues("config", st.key)))
		}
	}
	m.publisher.trigger(st.key)
	return reconcile.Result{RequeueAfter: recheckAfter(m.opts.AccessRecheck)}, nil
}

// recheckAfter is interval less up to a tenth, at random, so that the
// configs loaded together at a start do not all ask again at one moment.
func recheckAfter(interval time.Duration) time.Duration {
	return interval - rand.N(interval/10+1)
}

// sameReach says whether a and b read the same namespaces for watched.
func sameReach(a, b *configAccess, watched string) bool {
	if a == nil || b == nil {
		return a == b
	}
	wa, wb := a.watched[watched], b.watched[watched]
	if wa == nil || wb == nil {
		return wa == wb
	}
	if wa.all != wb.all || wa.perNamespace != wb.perNamespace || len(wa.namespaces) != len(wb.namespaces) {
		return false
	}
	for ns := range wa.namespaces {
		if !wb.namespaces[ns] {
			return false
		}
	}
	return true
}
