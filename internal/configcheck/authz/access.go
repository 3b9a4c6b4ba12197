package authz

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// The config webhook checks the author's rights over the namespaces the
// config selects when it is written (authz.go). Namespaces come later: one
// created with the selected labels, or labelled afterwards, joins the
// selection without anyone asking whether the author may read it. So the
// stores are filled only from the namespaces the access controller (configcheck's, on a workqueue)
// found the author (record.go) may use, every replica for itself:
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
// Every question goes through Cache: asked once per author, right
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

// LiveReview asks the API server one question about user.
type LiveReview func(ctx context.Context, user authenticationv1.UserInfo, q Question) (bool, error)

// Cache answers access questions, each once per accessTTL.
type Cache struct {
	live  LiveReview
	now   func() time.Time
	slots chan struct{}

	mu      sync.Mutex
	entries map[accessKey]*accessEntry
}

type accessKey struct {
	user     string // the whole identity, encoded
	Question Question
}

// accessEntry is one answer, or the question in flight (done open).
type accessEntry struct {
	done    chan struct{}
	allowed bool
	err     error
	expires time.Time
}

func NewCache(live LiveReview) *Cache {
	return &Cache{live: live, now: time.Now, slots: make(chan struct{}, maxLiveReviews), entries: map[accessKey]*accessEntry{}}
}

// reviewer answers questions about user.
func (c *Cache) Reviewer(user authenticationv1.UserInfo) Reviewer {
	key := encodeAuthor(user)
	return func(ctx context.Context, q Question) (bool, error) {
		return c.ask(ctx, accessKey{user: key, Question: q}, user)
	}
}

func (c *Cache) ask(ctx context.Context, k accessKey, user authenticationv1.UserInfo) (bool, error) {
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
			e.allowed, e.err = c.ask1(ctx, user, k.Question)
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
func (c *Cache) ask1(ctx context.Context, user authenticationv1.UserInfo, q Question) (bool, error) {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return false, fmt.Errorf("waiting for a SubjectAccessReview slot (%d at most at once): %w", maxLiveReviews, ctx.Err())
	}
	defer func() { <-c.slots }()
	return c.live(ctx, user, q)
}

// sweep drops the expired answers; c.mu is held.
func (c *Cache) sweep() {
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

// Access is what a config's author may have Gatehouse do, as last
// checked. It is replaced whole, never changed.
type Access struct {
	// author is who was asked about ("" when the config records none).
	Author string
	// watched by name.
	Watched map[string]*watchedAccess
	// outputs is the refusal of the outputs ("" when the author may write
	// them).
	Outputs string
}

// watchedAccess is where one watched resource is read.
type watchedAccess struct {
	// all: every namespace (the rights are held cluster-wide).
	all bool
	// refusal, when not all and not per namespace: why nothing is read.
	refusal string
	// perNamespace: the selected namespaces were asked about one by one;
	// namespaces holds those allowed, leftOut the others by name, with why.
	PerNamespace bool
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

// HeldEverywhere is the access of author holding every right
// cluster-wide: what CheckAccess answers for one, without asking.
func HeldEverywhere(author string, watched ...string) *Access {
	a := &Access{Author: author, Watched: map[string]*watchedAccess{}}
	for _, name := range watched {
		a.Watched[name] = &watchedAccess{all: true}
	}
	return a
}

// permits says whether objects of namespace (cluster-scoped: "") may be read
// for watched resource name. A nil access permits nothing: not checked yet.
func (a *Access) Permits(name, namespace string) bool {
	if a == nil {
		return false
	}
	w := a.Watched[name]
	switch {
	case w == nil:
		return false
	case w.all:
		return true
	case w.PerNamespace:
		return w.namespaces[namespace]
	}
	return false
}

// CheckAccess asks, as the author (review), for every right of reqs:
// cluster-wide first, then, for rights refused cluster-wide that a
// namespaceSelector narrows, in each namespace it selects now (namespaces),
// at most maxNamespaceReviews namespaces per watched resource. It returns
// an error when an answer could not be had.
func CheckAccess(ctx context.Context, user string, reqs []Requirement, review Reviewer,
	namespaces func(context.Context, labels.Selector) ([]string, error)) (*Access, error) {
	answers, err := askAll(ctx, distinctQuestions(reqs), review)
	if err != nil {
		return nil, err
	}
	out := &Access{Author: user, Watched: map[string]*watchedAccess{}}
	byWatched := map[string][]Requirement{}
	var order []string
	for _, r := range reqs {
		if r.watched == "" {
			if !answers[r.Question] && out.Outputs == "" {
				out.Outputs = r.refusal(user, r.Question)
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
		var fallback []Requirement
		for _, r := range byWatched[name] {
			switch {
			case answers[r.Question]:
			case r.scope == scopeSelected:
				w.all = false
				fallback = append(fallback, r)
			default:
				w.all = false
				if w.refusal == "" {
					w.refusal = r.refusal(user, r.Question)
				}
			}
		}
		out.Watched[name] = w
		if w.all || w.refusal != "" {
			continue
		}
		w.PerNamespace, w.sel = true, fallback[0].sel
		names, err := namespaces(ctx, w.sel)
		if err != nil {
			return nil, fmt.Errorf("listing the namespaces %s selects: %w", fallback[0].source, err)
		}
		sort.Strings(names)
		if len(names) > maxNamespaceReviews {
			w.over = len(names) - maxNamespaceReviews
			names = names[:maxNamespaceReviews]
		}
		var qs []Question
		for _, r := range fallback {
			w.lacking = append(w.lacking, r.Question.Verb+" "+r.Question.Target())
			for _, ns := range names {
				q := r.Question
				q.Namespace = ns
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
				q := r.Question
				q.Namespace = ns
				if !got[q] && w.namespaces[ns] {
					delete(w.namespaces, ns)
					w.leftOut[ns] = r.Question.Verb + " " + r.Question.Target()
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
func (a *Access) LeftOutMessage() string {
	var lines []string
	names := make([]string, 0, len(a.Watched))
	for name := range a.Watched {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w := a.Watched[name]
		switch {
		case w.all:
		case w.refusal != "":
			lines = append(lines, fmt.Sprintf("watched resource %s reads nothing: %s", name, w.refusal))
		case w.PerNamespace:
			var named []string
			for ns, why := range w.leftOut {
				if spec.NamedBy(w.sel, ns) {
					named = append(named, fmt.Sprintf("%s (%s may not %s there)", ns, a.Author, why))
				}
			}
			sort.Strings(named)
			if len(named) > 0 {
				lines = append(lines, fmt.Sprintf("watched resource %s leaves out namespace %s", name, strings.Join(named, ", ")))
			}
			lines = append(lines, fmt.Sprintf("watched resource %s reads only the selected namespaces where %s may %s (checked when a namespace joins the selection; until then it is left out); namespaces selected by label are not named",
				name, a.Author, strings.Join(w.lacking, ", ")))
			if w.over > 0 {
				lines = append(lines, fmt.Sprintf("watched resource %s: namespaceSelector selects more than %d namespaces, and those past the first %d by name are left out", name, maxNamespaceReviews, maxNamespaceReviews))
			}
		}
	}
	if a.Outputs != "" {
		lines = append(lines, "nothing is published: "+a.Outputs)
	}
	return strings.Join(lines, "\n")
}

// complete says whether a reads every selected namespace the author
// named and publishes: what the Authorized condition's status says.
func (a *Access) Complete() bool {
	if a.Outputs != "" {
		return false
	}
	for _, w := range a.Watched {
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

// SameReach says whether a and b read the same namespaces for watched.
func SameReach(a, b *Access, watched string) bool {
	if a == nil || b == nil {
		return a == b
	}
	wa, wb := a.Watched[watched], b.Watched[watched]
	if wa == nil || wb == nil {
		return wa == wb
	}
	if wa.all != wb.all || wa.PerNamespace != wb.PerNamespace || len(wa.namespaces) != len(wb.namespaces) {
		return false
	}
	for ns := range wa.namespaces {
		if !wb.namespaces[ns] {
			return false
		}
	}
	return true
}
