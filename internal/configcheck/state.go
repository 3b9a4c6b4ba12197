package configcheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/suite"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// configState is what Gatehouse holds for one HAProxyTemplateConfig at one
// generation: its compilation, its embedded tests' report, and a store per
// watched resource fed by the shared informers. It is replaced whole when
// the config changes.
type configState struct {
	key        types.NamespacedName
	uid        types.UID
	generation int64

	// compiled is nil when the config is invalid; invalid says why.
	compiled *compiled
	invalid  string
	// report is the embedded tests' result at this generation: the tests
	// read fixtures only, so they are run once per generation, not once per
	// admission request.
	report *suite.Report

	// watched resources by name: a feed, or for a kind no API serves (yet),
	// an empty store.
	feeds  map[string]*feed
	empty  map[string]*render.MemoryStore
	gvks   map[string]schema.GroupVersionKind
	scoped map[string]bool // cluster-scoped kinds
	// unresolved names the watched resources discovery does not know.
	unresolved []string
}

// synced says whether every store holds what the API server has.
func (st *configState) synced() bool {
	for _, f := range st.feeds {
		if !f.synced() {
			return false
		}
	}
	return true
}

// stores are the data's resources: the real stores, by watched name.
func (st *configState) stores() map[string]render.IndexedStore {
	out := make(map[string]render.IndexedStore, len(st.feeds)+len(st.empty))
	for name, f := range st.feeds {
		out[name] = f.store
	}
	for name, s := range st.empty {
		out[name] = s
	}
	return out
}

// unchanged says whether a CREATE or UPDATE of obj would leave w's store as
// it is: the same object is already stored (a re-apply, or a change to
// ignored fields only). A DELETE always renders: an object missing from the
// store may only be late to arrive in it.
func (st *configState) unchanged(w *watchedSpec, op render.Operation, obj map[string]any) bool {
	f := st.feeds[w.name]
	if f == nil || !f.synced() {
		return false
	}
	meta, _ := obj["metadata"].(map[string]any)
	namespace, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	if op == render.OperationDelete {
		return false
	}
	stored, ok := f.store.Get(namespace, name)
	return ok && equality.Semantic.DeepEqual(stored, obj)
}

// failedTests is the embedded tests' denial, or "" when they passed.
func (st *configState) failedTests() string {
	if st.report == nil || st.report.Failed == 0 {
		return ""
	}
	return st.report.Message()
}

// webhooks are the run-time webhooks of the config: one per watched
// resource with enableValidationWebhook, so that each carries its own
// selectors; all take the config's failurePolicy and timeout.
func (st *configState) webhooks(m *Module) []module.Webhook {
	if st.compiled == nil {
		return nil
	}
	var out []module.Webhook
	for _, name := range sortedKeys(st.compiled.watched) {
		w := st.compiled.watched[name]
		if !w.webhook {
			continue
		}
		scope := admissionregistrationv1.NamespacedScope
		if st.scoped[name] {
			scope = admissionregistrationv1.ClusterScope
		}
		out = append(out, module.Webhook{
			Name: webhookName(st.key, name),
			Path: module.RuntimePath(m.Name()) + url.PathEscape(st.key.Namespace) + "/" + url.PathEscape(st.key.Name) + "/" + url.PathEscape(name),
			Type: module.Validating,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{w.gvr.Group}, APIVersions: []string{w.gvr.Version},
					Resources: []string{w.gvr.Resource}, Scope: ptr.To(scope),
				},
			}},
			MatchPolicy:       admissionregistrationv1.Equivalent,
			FailurePolicy:     st.compiled.policy,
			SideEffects:       admissionregistrationv1.SideEffectClassNone,
			TimeoutSeconds:    st.compiled.timeout,
			NamespaceSelector: w.nsSelAPI,
			ObjectSelector:    w.labelSel,
			Admit:             m.admitWatched(st.key, name),
			Confirm:           m.watchedConfirmation(st.key, name, st.compiled.timeout),
			DenialReasons:     watchedDenialReasons,
			Cost:              m.watchedCost(),
		})
	}
	return out
}

var unqualified = regexp.MustCompile(`[^a-z0-9-]+`)

// webhookName is a stable, valid webhook name for a config's watched
// resource: "<watched>.<config>.<namespace>.configcheck.gatehouse.dev",
// each part lowercased to DNS label characters. A part longer than 40
// characters is cut and ends with a hash of the whole part, so that two long
// names sharing a prefix never collide.
func webhookName(key types.NamespacedName, watched string) string {
	label := func(s string) string {
		out := strings.Trim(unqualified.ReplaceAllString(strings.ToLower(s), "-"), "-")
		if len(out) > 40 {
			sum := sha256.Sum256([]byte(s))
			out = strings.TrimRight(out[:31], "-") + "-" + hex.EncodeToString(sum[:4])
		}
		if out == "" {
			out = "x"
		}
		return out
	}
	return label(watched) + "." + label(key.Name) + "." + label(key.Namespace) + ".configcheck.gatehouse.dev"
}

// reconciler keeps every replica's configStates in step with the configs:
// each replica decides admissions, so each holds the stores. Status and
// publishing are the leader's (publisher).
type reconciler struct{ m *Module }

func (r *reconciler) NeedLeaderElection() bool { return false }

func (r *reconciler) logger(ctx context.Context) logr.Logger {
	return logf.FromContext(ctx).WithName("Controllers").WithName("HAProxyTemplateConfig")
}

func (r *reconciler) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		r.m.queue.ShutDown()
	}()
	if !r.m.configs.WaitForCacheSync(ctx) {
		return nil
	}
	// Without any config no reconciliation would ever say that nothing is
	// validated; say it once the configs are listed.
	var configs gatehousev1alpha1.HAProxyTemplateConfigList
	if err := r.m.configs.List(ctx, &configs); err == nil && len(configs.Items) == 0 {
		r.m.registerWebhooks(logf.IntoContext(ctx, r.logger(ctx)))
	}
	for {
		key, quit := r.m.queue.Get()
		if quit {
			break
		}
		requeue, err := r.reconcile(ctx, key)
		switch {
		case err != nil:
			r.logger(ctx).Error(err, "reconcile", "config", key)
			r.m.queue.AddRateLimited(key)
		case requeue > 0:
			r.m.queue.Forget(key)
			r.m.queue.AddAfter(key, requeue)
		default:
			r.m.queue.Forget(key)
		}
		r.m.queue.Done(key)
	}
	for _, st := range r.m.allStates() {
		r.m.releaseFeeds(st)
	}
	return nil
}

// resolveRetry is how often a config whose watched kinds discovery does not
// know is looked at again (a CRD installed after the config).
const resolveRetry = 15 * time.Second

func (r *reconciler) reconcile(ctx context.Context, key types.NamespacedName) (time.Duration, error) {
	log := r.logger(ctx).WithValues("config", key)
	ctx = logf.IntoContext(ctx, log)
	m := r.m
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if err := m.configs.Get(ctx, key, cfg); err != nil {
		if !apierrors.IsNotFound(err) {
			return 0, err
		}
		m.replaceState(ctx, key, nil)
		return 0, nil
	}
	old := m.state(key)
	if old != nil && old.uid == cfg.UID && old.generation == cfg.Generation && len(old.unresolved) == 0 {
		m.publisher.trigger(key)
		return 0, nil
	}
	st, err := m.buildState(ctx, cfg)
	if err != nil {
		return 0, err
	}
	m.replaceState(ctx, key, st)
	log.Info("config loaded", "generation", st.generation, "valid", st.compiled != nil, "unresolved", st.unresolved)
	if len(st.unresolved) > 0 {
		return resolveRetry, nil
	}
	return 0, nil
}

// buildState compiles cfg, runs its tests, and starts feeding its stores.
func (m *Module) buildState(ctx context.Context, cfg *gatehousev1alpha1.HAProxyTemplateConfig) (*configState, error) {
	key := types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Name}
	st := &configState{key: key, uid: cfg.UID, generation: cfg.Generation,
		feeds: map[string]*feed{}, empty: map[string]*render.MemoryStore{},
		gvks: map[string]schema.GroupVersionKind{}, scoped: map[string]bool{}}
	c, errs := m.compile(&cfg.Spec)
	if len(errs) > 0 {
		st.invalid = errs.ToAggregate().Error()
		return st, nil
	}
	st.compiled = c
	report, err := m.runTests(ctx, c, m.opts.TestTimeout)
	if err != nil {
		st.invalid = "the embedded tests could not run: " + err.Error()
	} else {
		st.report = &report
	}
	for _, name := range sortedKeys(c.watched) {
		w := c.watched[name]
		gvk, scoped, err := m.resolve(w.gvr)
		if err != nil {
			if !meta.IsNoMatchError(err) && !errors.Is(err, errNoKind) {
				m.releaseFeeds(st)
				return nil, err
			}
			st.unresolved = append(st.unresolved, name)
			if st.empty[name], err = render.NewMemoryStore(w.indexer); err != nil {
				return nil, err
			}
			continue
		}
		st.gvks[name], st.scoped[name] = gvk, scoped
		f, err := m.watches.acquire(w, gvk, scoped, m.namespaceLabels, func() { m.publisher.trigger(key) })
		if err != nil {
			m.releaseFeeds(st)
			return nil, err
		}
		st.feeds[name] = f
	}
	return st, nil
}

var errNoKind = errors.New("no kind")

// resolve finds a watched resource's kind and scope through discovery.
func (m *Module) resolve(gvr schema.GroupVersionResource) (schema.GroupVersionKind, bool, error) {
	mapper := m.host.RESTMapper()
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return schema.GroupVersionKind{}, false, err
	}
	if gvk.Empty() {
		return gvk, false, errNoKind
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionKind{}, false, err
	}
	return gvk, mapping.Scope.Name() == meta.RESTScopeNameRoot, nil
}

// replaceState installs st (nil: the config is gone), releases the
// previous state's feeds after the new ones hold their informers (so a
// shared informer is not restarted), and re-registers the webhooks.
func (m *Module) replaceState(ctx context.Context, key types.NamespacedName, st *configState) {
	m.mu.Lock()
	old := m.states[key]
	if st == nil {
		delete(m.states, key)
	} else {
		m.states[key] = st
	}
	m.mu.Unlock()
	if old != nil {
		m.releaseFeeds(old)
	}
	m.registerWebhooks(ctx)
	m.publisher.trigger(key)
}

func (m *Module) releaseFeeds(st *configState) {
	for _, f := range st.feeds {
		m.watches.release(f)
	}
}

// FailOpenMessage is logged when no config registers a webhook any more;
// docs/configcheck.md says when.
const FailOpenMessage = "no HAProxyTemplateConfig enables a validation webhook: watched resources are not validated (fail-open)"

// registerWebhooks gives the host every config's webhooks.
func (m *Module) registerWebhooks(ctx context.Context) {
	states := m.allStates()
	sort.Slice(states, func(i, j int) bool { return states[i].key.String() < states[j].key.String() })
	var hooks []module.Webhook
	for _, st := range states {
		hooks = append(hooks, st.webhooks(m)...)
	}
	if err := m.host.SetWebhooks(hooks); err != nil {
		logf.FromContext(ctx).Error(err, "registering the watched resources' webhooks")
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(hooks) == 0 && !m.failOpenLogged {
		m.failOpenLogged = true
		logf.FromContext(ctx).Info(FailOpenMessage)
	}
	if len(hooks) > 0 {
		m.failOpenLogged = false
	}
}

// runTests runs c's embedded tests within timeout.
func (m *Module) runTests(ctx context.Context, c *compiled, timeout time.Duration) (suite.Report, error) {
	if len(c.tests) == 0 {
		return suite.Report{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return m.testRunner(c).Run(ctx, c.tests, "")
}

func (m *Module) testRunner(c *compiled) *suite.Runner {
	indexBy := make(map[string][]string, len(c.watched))
	for name, w := range c.watched {
		indexBy[name] = w.indexBy
	}
	return &suite.Runner{Renderer: c.renderer, IndexBy: indexBy, ExtraContext: c.extraContext, Check: m.checkFunc()}
}

func (m *Module) checkFunc() suite.CheckFunc {
	return func(ctx context.Context, out render.Output) (bool, string, error) {
		v, err := m.checker.Check(ctx, out)
		if err != nil {
			return false, "", err
		}
		countCheck(v)
		return v.Valid, v.Message, nil
	}
}
