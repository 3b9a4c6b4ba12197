package configcheck

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/ondemand"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// watchedBytesPerToken is what a watched resource's decision allocates per
// JSON token of its review (module.Cost): the object decoded into maps (95
// bytes per token for an array of small numbers, the worst shape measured
// by BenchmarkDecodeCost in internal/server), then copied for the store
// (NormalizeObject) and encoded for the render worker. The whole process
// under the flood test showed about 100 bytes per token resident per
// review in flight (docs/reliability.md, "Hostile load").
const watchedBytesPerToken = 128

// watchedCost is the declared cost of the watched resources' webhooks:
// decisions beyond the render workers and haproxy -c checks wait, holding
// their decoded object, so at most twice as many run at once as those
// stages serve.
func (m *Module) watchedCost() module.Cost {
	// No Concurrency: a module-wide bound, taken by the server before the
	// config's fair turn, let one party's requests hold every slot (guard.Shed).
	// The decisions waiting are bounded per party by the turns (guard.Admissions)
	// and in memory by the server's budget.
	return module.Cost{BytesPerToken: watchedBytesPerToken}
}

// watchedDenialReasons are the denial reasons of the watched resources'
// webhooks: the phase that refused the change.
var watchedDenialReasons = []string{judge.PhaseStructure, guard.PhaseBounds, judge.PhaseRender, judge.PhasePolicy, judge.PhaseHAProxy, judge.PhaseTests}

// watchedConfirmation is the confirmation of a watched resource's webhook:
// nothing is denied from a stale cache (a Service created a moment ago may
// not be in the store yet), so the server has a denial made again over the
// API server's own lists, within the config's timeout.
func (m *Module) watchedConfirmation(key spec.Key, watched string, timeoutSeconds int32) *module.Confirmation {
	return &module.Confirmation{
		Decide: m.confirmWatched(key, watched),
		// The admission's own deadline (admitWatched); 0 (a margin as
		// long as the timeout) takes the server's default.
		Timeout: max(time.Duration(timeoutSeconds)*time.Second-m.opts.Margin, 0),
	}
}

// admitWatched returns the Admit function of one config's watched resource.
func (m *Module) admitWatched(key spec.Key, watched string) module.AdmitFunc {
	return func(ctx context.Context, req admission.Request) admission.Response {
		start := time.Now()
		st, w, resp := m.watchedOf(key, watched)
		if w == nil {
			return resp
		}
		ctx, cancel := context.WithDeadline(ctx, start.Add(time.Duration(st.compiled.Timeout)*time.Second-m.opts.Margin))
		defer cancel()
		// Its renderings take render workers in the config's turn
		// (fair).
		ctx = fair.WithShare(ctx, guard.ConfigParty(key), guard.ClassOf(ctx, req))
		ctx = ondemand.WithSet(ctx, st.onDemand)
		resp, judged := m.decide(ctx, st, w, req)
		resp = forCaller(resp, req, st.compiled, judged)
		if !module.ClassOf(resp).IsDenial() {
			// A denial's time is observed with its confirmation.
			metrics.ObserveAdmission(watched, resp, time.Since(start))
		}
		return resp
	}
}

// watchedOf finds the config's state and its watched resource, or answers
// the request when there is none to judge it by.
func (m *Module) watchedOf(key spec.Key, watched string) (*configState, *spec.Watched, admission.Response) {
	st := m.state(key)
	if st == nil {
		return nil, nil, admission.Allowed("HAProxyTemplateConfig " + key.String() + " is gone")
	}
	if st.compiled == nil {
		return nil, nil, admission.Allowed("").WithWarnings(guard.Bounded(fmt.Sprintf(
			"HAProxyTemplateConfig %s is invalid, so this change was not validated against it: %s", key, st.invalid), 250))
	}
	w, ok := st.compiled.Watched[watched]
	if !ok || !w.Webhook {
		return nil, nil, admission.Allowed("not validated by " + key.String())
	}
	return st, w, admission.Response{}
}

// decide judges the change over the caches.
func (m *Module) decide(ctx context.Context, st *configState, w *spec.Watched, req admission.Request) (admission.Response, map[string]render.IndexedStore) {
	if errs := m.checkBounds(st, w, req); len(errs) > 0 {
		// Refused first, before the object is copied for the stores,
		// before the config's turn and any rendering: an object this
		// large would slow every tenant's admissions.
		metrics.CountPhase(guard.PhaseBounds, "denied")
		return module.Deny(guard.PhaseBounds, guard.BoundsDenial(errs)), nil
	}
	op, obj, reason, err := m.proposal(st, w, req)
	if err != nil {
		metrics.CountPhase(judge.PhaseStructure, "denied")
		return module.Deny(judge.PhaseStructure, err.Error()), nil
	}
	if op == "" {
		metrics.CountPhase(judge.PhaseStructure, "unselected")
		return admission.Allowed(reason), nil
	}
	if req.Operation == admissionv1.Delete && m.namespaceTerminating(req.Namespace) {
		// The namespace controller deletes a namespace's objects in no
		// particular order: refusing a Service that an Ingress of the same
		// dying namespace still names would only hold the namespace in
		// Terminating until the Ingress went first.
		metrics.CountPhase(judge.PhaseStructure, "namespace-terminating")
		return admission.Allowed("namespace " + req.Namespace + " is being deleted"), nil
	}
	if !st.waitSynced(ctx) {
		metrics.CountUndecided("not-synced")
		return module.Undecided(fmt.Sprintf("configcheck: the watched resources of HAProxyTemplateConfig %s are still loading; try again in a moment", st.key)), nil
	}
	// Judged in the config's turn, against the stores and the changes
	// admitted before this one (guard.Admissions).
	adm := m.admissionsOf(st.key)
	release, err := adm.Acquire(ctx, req)
	if err != nil {
		return guard.Shed(req, st.key, "configcheck: "+err.Error()), nil
	}
	defer release()
	adm.Prune(st.cachedGetter())
	if st.unchanged(w, op, obj, adm) {
		// What the templates see would not change, so neither would the
		// rendering: refusing the change could protect nothing.
		metrics.HAProxyChecks.WithLabelValues("unchanged").Inc()
		return admission.Allowed("what the templates see is unchanged"), nil
	}
	stores, err := adm.Overlay(st.stores())
	if err != nil {
		return module.Deny(judge.PhaseStructure, err.Error()), nil
	}
	data, err := judge.Overlaid(stores, w.Name, op, obj)
	if err != nil {
		return module.Deny(judge.PhaseStructure, err.Error()), nil
	}
	v := m.judge(ctx, st.compiled, data, st.failedTests())
	if v.Undecided != "" {
		return undecidedVerdict(req, st.key, v), nil
	}
	if v.Denial == "" {
		if v = m.judgeAlone(ctx, st, adm, st.stores(), w, op, obj); v.Undecided != "" {
			return undecidedVerdict(req, st.key, v), nil
		}
	}
	if v.Denial == "" {
		if guard.Recorded(ctx, req) {
			adm.Record(w.Name, op, obj)
		}
		return admission.Allowed(""), nil
	}
	// Counted once confirmed.
	return module.Deny(v.Phase, v.Denial), stores
}

// checkBounds checks the object a create or update would store against
// w's bounds (guard.ValidateBounds), measured on the request's bytes; only an object
// past them is decoded, to tell whether w selects it (an object w does not
// select is not its business), and whether the object it replaces was
// already as large (it may stay so). DELETE is never refused.
func (m *Module) checkBounds(st *configState, w *spec.Watched, req admission.Request) field.ErrorList {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return nil
	}
	size := guard.MeasureRaw(req.Object.Raw)
	if !guard.Exceeds(w.Bounds, size) {
		return nil
	}
	selected := func(raw []byte) bool {
		// Decoded without its lists' items: a selection reads none,
		// and they are what makes such an object large.
		var obj map[string]any
		return utiljson.Unmarshal(guard.WithoutListItems(raw), &obj) == nil && obj != nil &&
			w.SelectsIn(obj, req.Namespace, st.scoped[w.Name], m.namespaceLabels)
	}
	if !selected(req.Object.Raw) {
		return nil
	}
	var old *guard.Size
	if req.Operation == admissionv1.Update {
		if before := guard.MeasureRaw(req.OldObject.Raw); guard.Exceeds(w.Bounds, before) && selected(req.OldObject.Raw) {
			old = &before
		}
	}
	kind := req.Kind.Kind
	if kind == "" {
		kind = "object"
	}
	return guard.ValidateBounds(w, size, old, kind, st.key.String())
}

// needsPending opens a denial of a change that passes only with changes
// admitted a moment ago that are not stored yet.
const needsPending = "this change needs a change admitted a moment ago that is not stored yet (it may never be): try again once it is stored; without it: "

// judgeAlone judges the change against stores without the pending changes
// of other objects, when there are any: an admitted change may never be
// stored, and nothing admitted may need it. The turn is held.
func (m *Module) judgeAlone(ctx context.Context, st *configState, adm *guard.Admissions, stores map[string]render.IndexedStore,
	w *spec.Watched, op render.Operation, obj map[string]any) judge.Verdict {
	namespace, name := judge.IdentityOf(obj)
	if !adm.OthersPending(w.Name, namespace, name) {
		return judge.Verdict{}
	}
	data, err := judge.Overlaid(stores, w.Name, op, obj)
	if err != nil {
		return judge.Verdict{Denial: err.Error(), Phase: judge.PhaseStructure}
	}
	v := m.judge(ctx, st.compiled, data, st.failedTests())
	if v.Denial != "" {
		v.Denial = needsPending + v.Denial
	}
	return v
}

// confirmWatched returns the confirmation of one config's watched resource:
// the change judged again over the API server's lists, and, when it fails
// there too, the live state without it, whose same failure admits it.
func (m *Module) confirmWatched(key spec.Key, watched string) module.ConfirmFunc {
	return func(ctx context.Context, req admission.Request, denial admission.Response) module.Confirmed {
		// The server's deadline is the admission's: its start is the
		// decision's, as admission_seconds measures it.
		start := time.Now()
		st, w, resp := m.watchedOf(key, watched)
		if w == nil {
			// Nothing to judge by any more: admitted.
			return module.LiveDecision(resp)
		}
		if deadline, ok := ctx.Deadline(); ok {
			start = deadline.Add(-(time.Duration(st.compiled.Timeout)*time.Second - m.opts.Margin))
		}
		c, judged := m.confirm(fair.WithShare(ctx, guard.ConfigParty(key), guard.ClassOf(ctx, req)), st, w, req, denial)
		c.Response = forCaller(c.Response, req, st.compiled, judged)
		metrics.ObserveAdmission(watched, c.Response, time.Since(start))
		return c
	}
}

func (m *Module) confirm(ctx context.Context, st *configState, w *spec.Watched, req admission.Request, denial admission.Response) (module.Confirmed, map[string]render.IndexedStore) {
	if r := denial.AuditAnnotations[module.ReasonAnnotation]; r == judge.PhaseStructure || r == guard.PhaseBounds {
		// The request's own shape: no state to read again.
		return module.Upheld(denial), nil
	}
	log := logf.FromContext(ctx).WithValues("config", st.key, "watched", w.Name)
	op, obj, _, err := m.proposal(st, w, req)
	if err != nil || op == "" {
		return module.Upheld(denial), nil
	}
	adm := m.admissionsOf(st.key)
	release, err := adm.Acquire(ctx, req)
	if err != nil {
		return guard.ShedConfirmation(req, denial, "configcheck: "+err.Error()), nil
	}
	defer release()
	adm.Prune(st.cachedGetter())
	// A denial is confirmed over objects fetched now, never over what an
	// on-demand store fetched earlier.
	fresh := st.onDemand.Uncached()
	ctx = ondemand.WithSet(ctx, fresh)
	live, err := m.liveStores(ctx, st)
	if err != nil {
		return module.LiveDecision(module.Undecided(fmt.Sprintf("configcheck: the denial could not be confirmed against the API server in time (%v); the first check said: %s", err, guard.Bounded(denial.Result.Message, 1000)))), nil
	}
	fresh.AddStores(live)
	withPending, err := adm.Overlay(live)
	if err != nil {
		return module.Upheld(module.Deny(judge.PhaseStructure, err.Error())), nil
	}
	liveData, err := judge.Overlaid(withPending, w.Name, op, obj)
	if err != nil {
		return module.Upheld(module.Deny(judge.PhaseStructure, err.Error())), nil
	}
	confirmed := m.judge(ctx, st.compiled, liveData, st.failedTests())
	alone := false
	if confirmed.Undecided == "" && confirmed.Denial == "" {
		confirmed, alone = m.judgeAlone(ctx, st, adm, live, w, op, obj), true
	}
	switch {
	case confirmed.Undecided != "" && confirmed.Shed:
		return guard.ShedConfirmation(req, denial, confirmed.Undecided), nil
	case confirmed.Undecided != "":
		return module.LiveDecision(module.Undecided(confirmed.Undecided)), nil
	case confirmed.Denial == "":
		if guard.Recorded(ctx, req) {
			adm.Record(w.Name, op, obj)
		}
		return module.Overturned(admission.Allowed("")), nil
	}
	// A change refused for needing a pending change is not judged against
	// a failing state: it passed there.
	if !alone {
		if way, ok := m.wayOut(ctx, st, withPending, w.Name, op, obj, confirmed); ok {
			metrics.CountPhase(confirmed.Phase, "pre-existing")
			log.Info("admitted: the cluster's state fails without this change, and it adds no failure", "phase", confirmed.Phase, "failure", guard.Bounded(confirmed.Denial, 500), "delete", op == render.OperationDelete)
			if guard.Recorded(ctx, req) {
				adm.Record(w.Name, op, obj)
			}
			// Live state upholds the failure; its standing without the
			// change admits it: counted as confirmed, not as a cache
			// behind.
			return module.Excused(admission.Allowed("").WithWarnings(judge.PreexistingWarnings(st.key, way)...)), withPending
		}
	}
	metrics.CountPhase(confirmed.Phase, "denied")
	return module.Upheld(module.Deny(confirmed.Phase, confirmed.Denial)), withPending
}

// proposal reads the request as a change to w's store: the operation to
// overlay and the object, or no operation (and why) when the store would not
// change because w's selectors exclude the object before and after.
func (m *Module) proposal(st *configState, w *spec.Watched, req admission.Request) (render.Operation, map[string]any, string, error) {
	var obj, old map[string]any
	if len(req.Object.Raw) > 0 {
		if err := utiljson.Unmarshal(req.Object.Raw, &obj); err != nil {
			return "", nil, "", fmt.Errorf("failed to parse object: %v", err)
		}
	}
	if len(req.OldObject.Raw) > 0 {
		if err := utiljson.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return "", nil, "", fmt.Errorf("failed to parse old object: %v", err)
		}
	}
	selected := func(o map[string]any) bool {
		// A namespace the author may not have read (or not checked yet)
		// is not the config's to judge (authz.Access).
		ns := req.Namespace
		if st.scoped[w.Name] {
			ns = ""
		}
		return o != nil && st.permits(w.Name, ns) && w.SelectsIn(o, req.Namespace, st.scoped[w.Name], m.namespaceLabels)
	}
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
		if err := judge.CheckStructure(obj); err != nil {
			return "", nil, "", err
		}
		obj = w.Stored(obj)
		if old != nil {
			old = w.Stored(old)
		}
		if obj["metadata"].(map[string]any)["name"] == nil {
			// A generated name is not known yet; judge the object under
			// its prefix, which no other object has.
			obj["metadata"].(map[string]any)["name"] = obj["metadata"].(map[string]any)["generateName"]
		}
		switch {
		case selected(obj) && req.Operation == admissionv1.Create:
			return render.OperationCreate, obj, "", nil
		case selected(obj):
			return render.OperationUpdate, obj, "", nil
		case req.Operation == admissionv1.Update && selected(old):
			// The object leaves the store: judge its removal.
			return render.OperationDelete, old, "", nil
		}
		return "", nil, fmt.Sprintf("not selected by %s's watched resource %s", st.key, w.Name), nil
	case admissionv1.Delete:
		if old == nil {
			return "", nil, "", errors.New("a DELETE request without oldObject cannot be validated")
		}
		if selected(old) {
			return render.OperationDelete, w.Stored(old), "", nil
		}
		return "", nil, fmt.Sprintf("not selected by %s's watched resource %s", st.key, w.Name), nil
	}
	return "", nil, "operation " + string(req.Operation) + " is not validated", nil
}

// Denial reasons of the config webhook; an author reaching what they may not
// read is "not-permitted".
const (
	reasonInvalidConfig = "invalid-config"
	reasonTestsFailed   = "tests-failed"
)

// admitConfig validates a config itself: its spec compiles, its author holds
// the rights it exercises, its embedded tests pass, and its rendering of the
// cluster's current state passes the check policy and haproxy -c
// (currentstate.go); for a caller it cannot verify, its renderings of empty
// watched resources and of its tests' fixtures do (unverified.go).
func (m *Module) admitConfig(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	cfg, err := spec.DecodeRequest(req)
	if err != nil {
		return module.Deny(reasonInvalidConfig, err.Error())
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(configWebhookTimeout*time.Second-m.opts.Margin))
	defer cancel()
	// Config admissions go through the render workers in their author's
	// turn (fair): the namespace's authors in turn with the others', dry
	// runs after real writes, and a caller the server could not verify in
	// the unverified callers' share (issue 35, item 4). The compile is
	// the first thing done in it: a template is its author's program.
	verified := module.VerifiedCaller(ctx)
	party, class := guard.AuthorParty(req.Namespace), fair.Check
	if guard.DryRun(req) {
		class = fair.DryRun
	}
	if !verified {
		party, class = unverifiedShare(req.Namespace)
	}
	c, errs := cfg.CompileWith(m.compiler(fair.WithShare(ctx, party, class)))
	if err := spec.NotCompiled(errs); err != nil {
		return module.Undecided(err.Error())
	}
	if len(errs) > 0 {
		return module.Deny(reasonInvalidConfig, guard.Bounded(errs.ToAggregate().Error(), 4000))
	}
	// The author must hold the rights the config exercises (authz),
	// asked before the tests run, so a refused config costs no haproxy
	// run. An UPDATE that leaves the spec as it is (labels, annotations,
	// finalizers: the garbage collector's and the namespace controller's
	// writes among them) reaches nothing new, so it is not asked about.
	changed, err := specChanged(req, cfg)
	if err != nil {
		return module.Deny(reasonInvalidConfig, err.Error())
	}
	key := spec.Key{Kind: cfg.ConfigKind(), NamespacedName: types.NamespacedName{Namespace: req.Namespace, Name: cfg.GetName()}}
	if key.Name == "" {
		key.Name = req.Name
	}
	// Without a verified caller, anyone reaching the port may have posted
	// this review, under any userInfo: asking the API server about that
	// identity would answer them (and cost SubjectAccessReviews), and
	// rendering the cluster's state with the config would show them what
	// that identity may read. Neither is done; the config is judged on
	// what it carries (it compiles, its tests pass, and it renders over
	// empty watched resources and its tests' fixtures: unverified.go), and
	// once stored, its author, whom the API server named (authz's record), is
	// asked about by the access controller, which fills its stores only
	// from what the author may read (authz.Access).
	if changed && verified {
		refusal, err := m.authorizeAuthor(ctx, req.UserInfo, key, c, cfg.PublishesSecrets())
		if err != nil {
			return module.Undecided("configcheck: the author's permissions could not be checked in time: " + err.Error())
		}
		if refusal != "" {
			// Enforced in warn mode too: warn mode rolls out a policy,
			// it never lets an author reach what they may not.
			return module.NotPermitted(refusal)
		}
	}
	// Config admissions (tests, current state) are checked at most
	// RenderWorkers-1 at once (their renderings also take at most that
	// many workers: renderproc), each namespace's authors in turn with
	// the others', dry runs after real writes, and a namespace with
	// maxAuthorWaiting waiting has one more refused at once: one
	// author's dry runs of a config whose tests spin to their deadline
	// delay no other author's config and no watched object's admission.
	ctx = fair.WithShare(ctx, party, class)
	if m.configChecks != nil {
		release, err := m.configChecks.Acquire(ctx, party, class)
		switch {
		case errors.Is(err, fair.ErrFull):
			return module.Undecided("configcheck: this config was not checked: " + err.Error() + "; try again once they are decided")
		case err != nil:
			return module.Undecided("configcheck: other HAProxyTemplateConfigs were being checked until the deadline; try again")
		}
		defer release()
	}
	var rendered keptRenderings
	var keep func(string, render.Output)
	if changed && !verified {
		// The tests' renderings are checked again without the
		// cluster's state (checkWithoutState).
		rendered = keptRenderings{}
		keep = rendered.keep
	}
	report, err := m.runTestsKeeping(ctx, c, configWebhookTimeout*time.Second, keep)
	if err != nil {
		return module.Undecided("configcheck: the embedded tests did not finish in time: " + err.Error())
	}
	if report.Failed > 0 {
		return module.Deny(reasonTestsFailed, report.Message())
	}
	var warnings []string
	if changed {
		// An UPDATE leaving the spec as it is renders nothing new, and
		// must pass whatever the state (the garbage collector's and the
		// namespace controller's writes). An unverified caller is shown
		// only what the config's own renderings say.
		var state currentState
		reason := reasonCurrentState
		if verified {
			state = m.checkCurrentState(ctx, key, req.UserInfo, c, report)
		} else {
			state, reason = m.checkWithoutState(ctx, key, c, rendered), reasonWithoutState
		}
		switch {
		case state.undecided != "":
			return module.Undecided(state.undecided)
		case state.denial != "":
			return module.Deny(reason, guard.Bounded(state.denial, 4000))
		}
		warnings = append(warnings, state.warnings...)
		if !verified {
			warnings = append(warnings, unverifiedWarning)
		}
	}
	// Last, so that every other reason is given first: a write that does
	// not carry the author record Gatehouse sets (the author webhook did
	// not run, or a later one changed it) would be read for the wrong
	// author (authz.CheckRecord).
	if refusal, err := m.checkAuthorRecord(req, cfg); err != nil || refusal != "" {
		if err != nil {
			refusal = err.Error()
		}
		return module.Deny(reasonInvalidConfig, refusal)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Watched)) {
		if _, _, err := m.resolve(c.Watched[name].GVR); err != nil {
			warnings = append(warnings, guard.Bounded(fmt.Sprintf("watched resource %s: %s is not served by this cluster (yet); its store stays empty until it is", name, c.Watched[name].GVR), 250))
		}
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// unverifiedWarning tells an author why their config's rights and rendering
// are checked after it is stored.
// Kept under 256 bytes, which kube-apiserver may cut a warning to.
const unverifiedWarning = "Gatehouse cannot tell this request came from the API server (no client certificates): it was rendered over empty watched resources and its tests' fixtures; " +
	"its author's rights and the cluster's state are checked once stored (Authorized, Published)"

// specChanged says whether req writes cfg's spec: a CREATE does, an UPDATE
// when the spec differs from the stored one.
func specChanged(req admission.Request, cfg spec.Object) (bool, error) {
	if req.Operation != admissionv1.Update {
		return true, nil
	}
	old, err := spec.DecodeOld(req)
	if err != nil {
		return false, err
	}
	return !old.SameSpec(cfg), nil
}

// judge renders data and checks it with this module's checker (judge.Judge).
func (m *Module) judge(ctx context.Context, c *spec.Compiled, data render.Data, failedTests string) judge.Verdict {
	return judge.Judge(ctx, m.checker, c, data, failedTests)
}

// checkRendering checks a rendering with this module's checker (judge.Check).
func (m *Module) checkRendering(ctx context.Context, dialect suite.Dialect, out render.Output, failedTests string) judge.Verdict {
	return judge.Check(ctx, m.checker, dialect, out, failedTests)
}
