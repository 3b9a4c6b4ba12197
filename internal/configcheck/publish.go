package configcheck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/fair"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/judge"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/metrics"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/output"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/trigger"
)

// publisher runs on the leader: after the configs or their watched
// resources change (gathered over PublishDelay), it renders each config from
// the cluster's state, checks the rendering with haproxy, publishes it when
// it passes, and writes the config's status when it changed. A rendering
// that fails leaves the last accepted one published: HAProxy runs only what
// was validated.
type publisher struct {
	m          *Module
	controller controller.Controller

	// triggers queues a config's publication while the controller runs
	// (on the leader); on another replica a trigger has nothing to do.
	triggers *trigger.Source[reconcile.Request]

	mu sync.Mutex
	// good is each config's state at its last rendering that passed, and
	// attributions its last failure's attribution (judge.Attribute).
	good         map[spec.Key]judge.GoodState
	attributions map[spec.Key]judge.Attribution
}

// publishRetry is how soon a config is looked at again after an error (an
// API call or a check that failed), or while its stores are loading.
const publishRetry = time.Second

// newPublisher builds the leader's controller. Its requests come from
// trigger (the reconciler, and every change of a watched resource) and,
// when it starts, one for every config: the previous leader may have left
// a status or a rendering behind.
func newPublisher(m *Module) (*publisher, error) {
	p := &publisher{m: m, good: map[spec.Key]judge.GoodState{}, attributions: map[spec.Key]judge.Attribution{}}
	c, err := m.host.NewController("HAProxyTemplateConfigPublisher", controller.Options{
		Reconciler:         p,
		NeedLeaderElection: ptr.To(true),
		// Retries come at a steady pace rather than backing off: the
		// errors are an API call or a check of the moment, and the config
		// stays unpublished until one succeeds.
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](publishRetry, publishRetry),
	})
	if err != nil {
		return nil, err
	}
	p.triggers = trigger.New(m.allConfigRequests)
	err = c.Watch(p.triggers)
	if err != nil {
		return nil, err
	}
	p.controller = c
	return p, nil
}

// trigger asks for key to be published; it is called on every watched
// event, so it only queues. The queue holds a key once: the events of
// PublishDelay make one rendering. Gatehouse publishes its own kind
// alone: haptic's controller writes haptic's status and deploys its
// renderings.
func (p *publisher) trigger(key spec.Key) {
	if key.Kind != spec.GatehouseKind {
		return
	}
	p.triggers.AddAfter(key.Request(), p.m.opts.PublishDelay)
}

// Reconcile publishes one config and writes its status.
func (p *publisher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	// Publishing what is stored is real work of the config (fair).
	key := spec.KeyOfRequest(req)
	if key.Kind != spec.GatehouseKind {
		return reconcile.Result{}, nil
	}
	ctx = fair.WithShare(ctx, guard.ConfigParty(key), fair.Real)
	retry, err := p.sync(ctx, key)
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: retry}, nil
}

// outputRetry is how often a config whose output names are taken by
// objects not its own is looked at again: nothing tells Gatehouse when they
// go (it watches no ConfigMaps or Secrets).
const outputRetry = 15 * time.Second

// forbiddenRetry is how often a config whose namespace Gatehouse may not
// publish into is looked at again: nothing tells Gatehouse when a Role is
// granted, and each look renders the config anew.
const forbiddenRetry = time.Minute

// forbiddenMessage explains an output Gatehouse may not write: publishing is
// granted per namespace by the operator, never cluster-wide.
func forbiddenMessage(namespace string, err error) string {
	return fmt.Sprintf("Gatehouse may not write the rendering into namespace %s, so nothing is published (the config is still validated and checked): "+
		"the platform administrator grants publishing per namespace (the chart's modules.configcheck.publishNamespaces; docs/configcheck.md, Publishing). The API server said: %v",
		namespace, err)
}

// sync renders, checks and publishes one config and writes its status. It
// reports when to look again (0: at the next change; stores still loading,
// an error, output names taken).
func (p *publisher) sync(ctx context.Context, key spec.Key) (time.Duration, error) {
	m := p.m
	st := m.state(key)
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if st == nil {
		p.mu.Lock()
		delete(p.good, key)
		delete(p.attributions, key)
		p.mu.Unlock()
		return 0, nil
	}
	if err := m.configs.Get(ctx, key.NamespacedName, cfg); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if cfg.UID != st.uid || cfg.Generation != st.generation {
		return 0, nil // the reconciler loads the new generation, then triggers again
	}
	status := cfg.Status.DeepCopy()
	status.ObservedGeneration = st.generation
	setValidity(status, st)
	setAuthorized(status, st)
	var retry time.Duration
	var err error
	switch {
	case st.compiled == nil:
		setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "ConfigInvalid", "an invalid config renders nothing")
	case !st.synced():
		setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionUnknown, "Loading", "the watched resources are still loading")
		retry = publishRetry
	case st.access.Load().Outputs != "":
		// Gatehouse writes nothing its author may not.
		setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "NotPermitted", guard.Bounded(st.access.Load().Outputs, 1000))
	default:
		retry, err = p.publish(ctx, cfg, st, status)
	}
	setReady(status, st)
	if !equality.Semantic.DeepEqual(&cfg.Status, status) {
		patched := cfg.DeepCopy()
		patched.Status = *status
		if perr := m.host.Client().Status().Patch(ctx, patched, client.MergeFrom(cfg)); perr != nil {
			return publishRetry, perr
		}
	}
	return retry, err
}

// publish renders the cluster's state and, when haproxy accepts it,
// writes it out; the Published condition says what happened.
// It returns when to look again (0: at the next change).
func (p *publisher) publish(ctx context.Context, cfg *gatehousev1alpha1.HAProxyTemplateConfig, st *configState, status *gatehousev1alpha1.HAProxyTemplateConfigStatus) (time.Duration, error) {
	m := p.m
	stores := st.stores()
	data := render.Data{Resources: map[string]render.Store{}, ExtraContext: st.compiled.ExtraContext}
	for name, s := range stores {
		data.Resources[name] = s
	}
	out, err := st.compiled.Renderer.Render(ctx, data)
	if errors.Is(err, fair.ErrFull) {
		return publishRetry, nil
	}
	if err != nil {
		metrics.Published.WithLabelValues("rejected").Inc()
		setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "RenderFailed",
			guard.Bounded("the cluster's current state does not render; the last accepted rendering stays published: "+judge.RenderFailure(err), 1000))
		p.failing(ctx, st, stores, status, judge.Verdict{Denial: judge.RenderFailure(err), Phase: judge.PhaseRender})
		return 0, nil
	}
	v, err := m.checker.Check(ctx, judge.AsChecked(out, st.compiled.Dialect))
	if err != nil {
		return publishRetry, err
	}
	metrics.CountCheck(v)
	if v.Refused {
		metrics.Published.WithLabelValues("rejected").Inc()
		setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "PolicyRefused",
			guard.Bounded("the cluster's current rendering breaks the check policy and was not checked; the last accepted one stays published:\n"+v.Message, 1000))
		p.failing(ctx, st, stores, status, judge.Verdict{Denial: v.Message, Phase: judge.PhasePolicy})
		return 0, nil
	}
	if !v.Valid {
		metrics.Published.WithLabelValues("rejected").Inc()
		setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "HAProxyCheckFailed",
			guard.Bounded("haproxy -c rejects the cluster's current rendering; the last accepted one stays published:\n"+v.Message, 1000))
		p.failing(ctx, st, stores, status, judge.Verdict{Denial: judge.HAProxyRejects + "\n" + v.Message, Phase: judge.PhaseHAProxy, Alerts: v.Alerts})
		return 0, nil
	}
	p.mu.Lock()
	p.good[st.key] = judge.SnapshotOf(stores)
	delete(p.attributions, st.key)
	p.mu.Unlock()
	setCondition(status, st, gatehousev1alpha1.ConditionFailing, metav1.ConditionFalse, "Passes",
		"the cluster's current state renders and passes haproxy -c")
	if status.Output != nil && status.Output.Checksum == v.Checksum {
		metrics.Published.WithLabelValues("unchanged").Inc()
	} else {
		rendered, err := p.write(ctx, cfg, out, v.Checksum)
		var big *output.TooLargeError
		if errors.As(err, &big) {
			metrics.Published.WithLabelValues("too-large").Inc()
			setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "OutputTooLarge", guard.Bounded(big.Error(), 1000))
			return 0, nil // the size changes only with the state, which triggers again
		}
		var taken *output.NotOwnedError
		if errors.As(err, &taken) {
			metrics.Published.WithLabelValues("not-owned").Inc()
			setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "OutputNotOwned", guard.Bounded(taken.Error(), 1000))
			return outputRetry, nil
		}
		if apierrors.IsForbidden(err) {
			metrics.Published.WithLabelValues("forbidden").Inc()
			setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "OutputForbidden", guard.Bounded(forbiddenMessage(cfg.Namespace, err), 1000))
			return forbiddenRetry, nil
		}
		if err != nil {
			return publishRetry, err
		}
		status.Output = rendered
		metrics.Published.WithLabelValues("published").Inc()
	}
	setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionTrue, "Published",
		"the cluster's current state renders and passes haproxy -c; ConfigMap "+status.Output.ConfigMapName+" holds it")
	return 0, nil
}

// failing sets the Failing condition of a config whose current state
// fails as current says: the objects that cause it (judge.Attribute). An
// unchanged failure over unchanged suspects keeps its attribution.
func (p *publisher) failing(ctx context.Context, st *configState, stores map[string]render.IndexedStore,
	status *gatehousev1alpha1.HAProxyTemplateConfigStatus, current judge.Verdict) {
	p.mu.Lock()
	good, seen := p.good[st.key]
	previous, attributed := p.attributions[st.key]
	p.mu.Unlock()
	suspects := judge.ChangedSince(good, stores)
	fingerprint := judge.FingerprintOf(current, suspects)
	a := previous
	if !attributed || previous.Fingerprint != fingerprint {
		a = judge.Attribute(ctx, p.m.checker, st.compiled, stores, current, suspects)
		a.Fingerprint, a.Fresh = fingerprint, !seen
		if a.Incomplete == "" {
			p.mu.Lock()
			p.attributions[st.key] = a
			p.mu.Unlock()
		}
	}
	reason := "Attributed"
	if len(a.Culprits) == 0 {
		reason = "Unattributed"
	}
	setCondition(status, st, gatehousev1alpha1.ConditionFailing, metav1.ConditionTrue, reason, guard.Bounded(a.Message(), 2000))
}
