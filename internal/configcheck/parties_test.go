package configcheck

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/haproxy"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// These tests play issue 35's attacks on one config's admissions (decide,
// as the watched resource's webhook calls it): tenant A's dry runs and
// creates, and reviews posted straight to the port claiming tenant B's
// namespace. B's changes must be judged, B's and A's deletions never
// refused for the load, and nothing but a change the API server will store
// judged against.

// partyEnv is one config judging Ingresses (judgeSpec) from a store the
// test fills, with the haproxy runner the test gives.
type partyEnv struct {
	m     *Module
	st    *configState
	w     *spec.Watched
	store *render.MemoryStore
}

func newPartyEnv(t *testing.T, runner haproxy.Runner) *partyEnv {
	t.Helper()
	c, errs := spec.Compile(judgeSpec(), inProcess)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	w := c.Watched["ingresses"]
	store, err := render.NewMemoryStore(w.Indexer)
	if err != nil {
		t.Fatal(err)
	}
	st := &configState{
		key: spec.GatehouseKey(types.NamespacedName{Namespace: "lb", Name: "shared"}), compiled: c,
		feeds:  map[string]*feed{"ingresses": {spec: w, store: store, reg: syncedRegistration{}}},
		scoped: map[string]bool{"ingresses": false},
	}
	st.setAccess(authz.HeldEverywhere("admin", "ingresses"))
	if runner == nil {
		real, err := haproxy.NewRunner(haproxy.RunnerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		runner = real
	}
	checker, err := haproxy.New(haproxy.Options{Runner: runner, MaxConcurrent: 2})
	if err != nil {
		t.Fatal(err)
	}
	return &partyEnv{m: &Module{checker: checker}, st: st, w: w, store: store}
}

// ingressReview is a review of op on Ingress namespace/name rendering line,
// by user.
func ingressReview(t *testing.T, op admissionv1.Operation, namespace, name, line, user string, dryRun bool) admission.Request {
	t.Helper()
	obj := ingressWithLine(name, line)
	obj["metadata"].(map[string]any)["namespace"] = namespace
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	req := admissionv1.AdmissionRequest{
		Namespace: namespace, Name: name, Operation: op, DryRun: &dryRun,
		UserInfo: authenticationv1.UserInfo{Username: user},
	}
	if op == admissionv1.Delete {
		req.OldObject = runtime.RawExtension{Raw: raw}
	} else {
		req.Object = runtime.RawExtension{Raw: raw}
	}
	return admission.Request{AdmissionRequest: req}
}

// decide decides req as the webhook does, within timeout.
func (e *partyEnv) decide(ctx context.Context, req admission.Request, timeout time.Duration) admission.Response {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx = fair.WithShare(ctx, guard.ConfigParty(e.st.key), guard.ClassOf(ctx, req))
	resp, _ := e.m.decide(ctx, e.st, e.w, req)
	return resp
}

func (e *partyEnv) pending() int {
	a := e.m.admissionsOf(e.st.key)
	return a.PendingChanges()
}

// heldRunner holds every haproxy run of a rendering containing "# hold"
// until released (announcing it on held), and answers every run valid.
type heldRunner struct {
	held    chan struct{}
	release chan struct{}
}

func newHeldRunner() *heldRunner {
	return &heldRunner{held: make(chan struct{}, 64), release: make(chan struct{})}
}

func (h *heldRunner) Run(ctx context.Context, out render.Output) (haproxy.RunResult, error) {
	if strings.Contains(out.HAProxyConfig, "# hold") {
		h.held <- struct{}{}
		select {
		case <-h.release:
		case <-ctx.Done():
			return haproxy.RunResult{}, ctx.Err()
		}
	}
	return haproxy.RunResult{Valid: true}, nil
}

// TestUnverifiedReviewsAreNeverPending: a review posted straight to the
// port (no verified caller) claiming tenant B's namespace, and a dry run,
// are judged and admitted, but never recorded as pending changes: tenant
// B's Ingress declaring the same backend as the ghost is admitted. The
// change the API server will store (verified, not a dry run) is recorded.
func TestUnverifiedReviewsAreNeverPending(t *testing.T) {
	e := newPartyEnv(t, nil)
	verified := module.WithVerifiedCaller(context.Background())
	const line = "backend dup" // one Ingress may declare it, two may not
	for _, c := range []struct {
		what string
		ctx  context.Context
		req  admission.Request
	}{
		{"a forged review claiming B's namespace", context.Background(), ingressReview(t, admissionv1.Create, "tenant-b", "ghost", line, "", false)},
		{"tenant A's dry run", verified, ingressReview(t, admissionv1.Create, "tenant-a", "dry", line, "alice", true)},
		{"an unverified dry run", context.Background(), ingressReview(t, admissionv1.Create, "tenant-a", "dry2", line, "alice", true)},
	} {
		if resp := e.decide(c.ctx, c.req, 30*time.Second); !resp.Allowed {
			t.Fatalf("%s, alone, was refused: %+v", c.what, resp.Result)
		}
		if n := e.pending(); n != 0 {
			t.Fatalf("%s was recorded as a pending change (%d pending)", c.what, n)
		}
	}
	if resp := e.decide(verified, ingressReview(t, admissionv1.Create, "tenant-b", "b", line, "bob", false), 30*time.Second); !resp.Allowed {
		t.Fatalf("tenant B's Ingress was judged against an unrecorded review: %+v", resp.Result)
	}
	if n := e.pending(); n != 1 {
		t.Fatalf("%d pending after B's admission; want B's create", n)
	}
}

// TestADryRunNeverHoldsTheTurnOfAChangeToBeStored: tenant A's dry run
// holds its rendering's haproxy -c; tenant B's create of the same config
// is decided meanwhile, in a turn the dry run does not hold. The watched
// webhooks declare no module-wide bound to the server: the concurrency is
// the render workers' and haproxy slots', taken after the turn.
func TestADryRunNeverHoldsTheTurnOfAChangeToBeStored(t *testing.T) {
	h := newHeldRunner()
	e := newPartyEnv(t, h)
	if n := e.m.watchedCost().Concurrency; n != 0 {
		t.Errorf("the watched webhooks declare a module-wide concurrency of %d, taken by the server before any turn", n)
	}
	verified := module.WithVerifiedCaller(context.Background())
	dry := make(chan admission.Response, 1)
	go func() {
		dry <- e.decide(verified, ingressReview(t, admissionv1.Create, "tenant-a", "dry", "# hold", "alice", true), 30*time.Second)
	}()
	<-h.held
	// Bounded: a create left waiting for the dry run's turn fails.
	resp := e.decide(verified, ingressReview(t, admissionv1.Create, "tenant-b", "b", "# b", "bob", false), 10*time.Second)
	if !resp.Allowed {
		t.Errorf("tenant B's create waited behind tenant A's dry run: %+v", resp.Result)
	}
	close(h.release)
	if resp := <-dry; !resp.Allowed {
		t.Errorf("the dry run: %+v", resp.Result)
	}
}

// TestForgedReviewsWaitInAPartyOfTheirOwn: without verified callers (no
// client certificates: every review may be forged, the API server's too),
// a flood of anonymous reviews claiming tenant B's namespace fills a party
// of its own, and is refused once it is full; tenant B's create, which
// names B's user, waits in B's party and is admitted.
func TestForgedReviewsWaitInAPartyOfTheirOwn(t *testing.T) {
	h := newHeldRunner()
	e := newPartyEnv(t, h)
	anonymous := context.Background()
	var wg sync.WaitGroup
	forged := make(chan admission.Response, 16)
	post := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			forged <- e.decide(anonymous, ingressReview(t, admissionv1.Create, "tenant-b", "ghost"+string(rune('a'+i)), "# hold", "", false), 30*time.Second)
		}()
	}
	post(0)
	<-h.held
	adm := e.m.admissionsOf(e.st.key)
	for i := 1; i <= guard.MaxTenantWaiting; i++ {
		post(i)
		for adm.Waiting(false) != i {
			time.Sleep(time.Millisecond)
		}
	}
	// One more forged review: its party is full, refused at once.
	if resp := e.decide(anonymous, ingressReview(t, admissionv1.Create, "tenant-b", "ghost-more", "# hold", "", false), 30*time.Second); module.ClassOf(resp) != module.ClassUndecided {
		t.Fatalf("a forged review past its party's bound: %+v; want undecided at once", resp)
	}
	b := make(chan admission.Response, 1)
	go func() {
		b <- e.decide(anonymous, ingressReview(t, admissionv1.Create, "tenant-b", "b", "# b", "system:serviceaccount:tenant-b:deployer", false), 30*time.Second)
	}()
	for adm.Waiting(false) != guard.MaxTenantWaiting+1 {
		select {
		case resp := <-b:
			t.Fatalf("tenant B's create was not queued in a party of its own: %+v", resp.Result)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	close(h.release)
	if resp := <-b; !resp.Allowed {
		t.Errorf("tenant B's create: %+v", resp.Result)
	}
	wg.Wait()
	close(forged)
	for resp := range forged {
		if !resp.Allowed {
			t.Errorf("a forged review was refused, not judged: %+v", resp.Result)
		}
	}
	if n := e.pending(); n != 0 {
		t.Errorf("%d pending changes recorded from unverified reviews", n)
	}
}

// TestADeletionIsNeverRefusedForLoad: tenant A's burst of creates fills
// its party while one holds the config's turn. A's deletion still queues
// (first in A's party, the newest create refused in its place) and is
// judged; a deletion whose deadline comes before its turn is admitted,
// unchecked, with a warning, where a create is undecided.
func TestADeletionIsNeverRefusedForLoad(t *testing.T) {
	h := newHeldRunner()
	e := newPartyEnv(t, h)
	if err := e.store.Upsert(e.w.Stored(ingressWithLine("old", "# old"))); err != nil {
		t.Fatal(err)
	}
	verified := module.WithVerifiedCaller(context.Background())
	adm := e.m.admissionsOf(e.st.key)
	var wg sync.WaitGroup
	creates := make(chan admission.Response, 16)
	create := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			creates <- e.decide(verified, ingressReview(t, admissionv1.Create, "app", "burst"+string(rune('a'+i)), "# hold", "alice", false), 30*time.Second)
		}()
	}
	create(0)
	<-h.held
	for i := 1; i <= guard.MaxTenantWaiting; i++ {
		create(i)
		for adm.Waiting(true) != i {
			time.Sleep(time.Millisecond)
		}
	}

	del := ingressReview(t, admissionv1.Delete, "app", "old", "# old", "alice", false)
	// Its deadline ends while the turn is held: admitted, unchecked.
	if resp := e.decide(verified, del, 200*time.Millisecond); !resp.Allowed || len(resp.Warnings) == 0 || !strings.Contains(resp.Warnings[0], "never refused for Gatehouse's load") {
		t.Errorf("a deletion without a turn before its deadline: %+v, warnings %q; want admitted with a warning", resp.Result, resp.Warnings)
	}
	if resp := e.decide(verified, ingressReview(t, admissionv1.Create, "app", "late", "# late", "alice", false), 200*time.Millisecond); module.ClassOf(resp) != module.ClassUndecided {
		t.Errorf("a create without a turn before its deadline: %+v; want undecided", resp)
	}
	// Each deletion queued took the place of the newest create waiting.
	if resp := <-creates; module.ClassOf(resp) != module.ClassUndecided {
		t.Fatalf("the first answer of the creates: %+v; want the newest refused for the deletion", resp)
	}
	// The party full again, the deletion takes the newest create's place.
	create(guard.MaxTenantWaiting + 1)
	for adm.Waiting(true) != guard.MaxTenantWaiting {
		time.Sleep(time.Millisecond)
	}
	deleted := make(chan admission.Response, 1)
	go func() { deleted <- e.decide(verified, del, 30*time.Second) }()
	if resp := <-creates; module.ClassOf(resp) != module.ClassUndecided {
		t.Fatalf("the next answer of the creates: %+v; want the newest refused for the deletion", resp)
	}
	close(h.release)
	if resp := <-deleted; !resp.Allowed || len(resp.Warnings) > 0 {
		t.Errorf("tenant A's deletion behind its own burst: %+v, warnings %q; want judged and admitted", resp.Result, resp.Warnings)
	}
	wg.Wait()
}
