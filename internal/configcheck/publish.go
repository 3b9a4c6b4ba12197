package configcheck

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// Keys and names of the published rendering.
const (
	configKey          = "haproxy.cfg"
	mapKeyPrefix       = "map."
	fileKeyPrefix      = "file."
	checksumAnnotation = "gatehouse.dev/checksum"
	configLabel        = "gatehouse.dev/haproxytemplateconfig"
)

// RenderedConfigMapName and RenderedSecretName name a config's published
// rendering.
func RenderedConfigMapName(config string) string { return config + "-haproxy" }
func RenderedSecretName(config string) string    { return config + "-haproxy-certs" }

// publisher runs on the leader: after the configs or their watched
// resources change (gathered over PublishDelay), it renders each config from
// the cluster's state, checks the rendering with haproxy, publishes it when
// it passes, and writes the config's status when it changed. A rendering
// that fails leaves the last accepted one published: HAProxy runs only what
// was validated.
type publisher struct {
	m    *Module
	wake chan struct{}

	mu    sync.Mutex
	dirty map[types.NamespacedName]bool
}

func newPublisher(m *Module) *publisher {
	return &publisher{m: m, wake: make(chan struct{}, 1), dirty: map[types.NamespacedName]bool{}}
}

func (p *publisher) NeedLeaderElection() bool { return true }

// trigger marks key for the next round; it is called on every watched
// event, so it only marks and pokes.
func (p *publisher) trigger(key types.NamespacedName) {
	p.mu.Lock()
	p.dirty[key] = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *publisher) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("Controllers").WithName("HAProxyTemplateConfigPublisher")
	ctx = logf.IntoContext(ctx, log)
	// A new leader looks at every config: the previous one may have left
	// a status or a rendering behind.
	for _, st := range p.m.allStates() {
		p.trigger(st.key)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.wake:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.m.opts.PublishDelay):
		}
		p.mu.Lock()
		keys := make([]types.NamespacedName, 0, len(p.dirty))
		for key := range p.dirty {
			keys = append(keys, key)
		}
		p.dirty = map[types.NamespacedName]bool{}
		p.mu.Unlock()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, key := range keys {
			retry, err := p.sync(ctx, key)
			if err != nil {
				log.Error(err, "publishing", "config", key)
			}
			if retry > 0 {
				time.AfterFunc(retry, func() { p.trigger(key) })
			}
		}
	}
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
func (p *publisher) sync(ctx context.Context, key types.NamespacedName) (time.Duration, error) {
	m := p.m
	st := m.state(key)
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if st == nil {
		return 0, nil
	}
	if err := m.configs.Get(ctx, key, cfg); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if cfg.UID != st.uid || cfg.Generation != st.generation {
		return 0, nil // the reconciler loads the new generation, then triggers again
	}
	status := cfg.Status.DeepCopy()
	status.ObservedGeneration = st.generation
	setValidity(status, st)
	var retry time.Duration
	var err error
	switch {
	case st.compiled == nil:
		setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "ConfigInvalid", "an invalid config renders nothing")
	case !st.synced():
		setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionUnknown, "Loading", "the watched resources are still loading")
		retry = time.Second
	default:
		retry, err = p.publish(ctx, cfg, st, status)
	}
	setReady(status, st)
	if !equality.Semantic.DeepEqual(&cfg.Status, status) {
		patched := cfg.DeepCopy()
		patched.Status = *status
		if perr := m.host.Client().Status().Patch(ctx, patched, client.MergeFrom(cfg)); perr != nil {
			return time.Second, perr
		}
	}
	return retry, err
}

// publish renders the cluster's state and, when haproxy accepts it,
// writes it out; the Published condition says what happened.
// It returns when to look again (0: at the next change).
func (p *publisher) publish(ctx context.Context, cfg *gatehousev1alpha1.HAProxyTemplateConfig, st *configState, status *gatehousev1alpha1.HAProxyTemplateConfigStatus) (time.Duration, error) {
	m := p.m
	data := render.Data{Resources: map[string]render.Store{}, ExtraContext: st.compiled.extraContext}
	for name, s := range st.stores() {
		data.Resources[name] = s
	}
	out, err := st.compiled.renderer.Render(ctx, data)
	if err != nil {
		published.WithLabelValues("rejected").Inc()
		setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "RenderFailed",
			bounded("the cluster's current state does not render; the last accepted rendering stays published: "+renderFailure(err), 1000))
		return 0, nil
	}
	v, err := m.checker.Check(ctx, out)
	if err != nil {
		return time.Second, err
	}
	countCheck(v)
	if v.Refused {
		published.WithLabelValues("rejected").Inc()
		setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "PolicyRefused",
			bounded("the cluster's current rendering breaks the check policy and was not checked; the last accepted one stays published:\n"+v.Message, 1000))
		return 0, nil
	}
	if !v.Valid {
		published.WithLabelValues("rejected").Inc()
		setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "HAProxyCheckFailed",
			bounded("haproxy -c rejects the cluster's current rendering; the last accepted one stays published:\n"+v.Message, 1000))
		return 0, nil
	}
	if status.Output != nil && status.Output.Checksum == v.Checksum {
		published.WithLabelValues("unchanged").Inc()
	} else {
		output, err := p.write(ctx, cfg, out, v.Checksum)
		var taken *notOwnedError
		if errors.As(err, &taken) {
			published.WithLabelValues("not-owned").Inc()
			setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "OutputNotOwned", bounded(taken.Error(), 1000))
			return outputRetry, nil
		}
		if apierrors.IsForbidden(err) {
			published.WithLabelValues("forbidden").Inc()
			setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionFalse, "OutputForbidden", bounded(forbiddenMessage(cfg.Namespace, err), 1000))
			return forbiddenRetry, nil
		}
		if err != nil {
			return time.Second, err
		}
		status.Output = output
		published.WithLabelValues("published").Inc()
	}
	setCondition(status, st, gatehousev1alpha1.ConditionPublished, metav1.ConditionTrue, "Published",
		"the cluster's current state renders and passes haproxy -c; ConfigMap "+status.Output.ConfigMapName+" holds it")
	return 0, nil
}

// managedByLabel marks what Gatehouse wrote; with the config's controller
// reference it makes a published object the config's.
const managedByLabel = "app.kubernetes.io/managed-by"

// notOwnedError: an object of a published name exists and is not the
// config's, so nothing was written.
type notOwnedError struct {
	kind, namespace, name string
	why                   string
}

func (e *notOwnedError) Error() string {
	return fmt.Sprintf("%s %s/%s already exists and is not this config's (%s): Gatehouse does not write to or adopt it, so nothing is published; delete or rename that %s, or rename the config",
		e.kind, e.namespace, e.name, e.why, e.kind)
}

// notOwned says why obj is not the config's output, "" when it is: it must
// be controlled by this very config (its UID: a config deleted and made
// again under the name is another one) and labelled as Gatehouse's. An
// object someone else made under the name (before the config, or to take
// its place) is theirs: writing it would overwrite their data, and owning
// it would let the garbage collector delete it with the config.
func notOwned(obj metav1.Object, cfg *gatehousev1alpha1.HAProxyTemplateConfig) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	switch {
	case ref == nil:
		return "it has no controller ownerReference"
	case ref.UID != cfg.UID || ref.Kind != "HAProxyTemplateConfig" || ref.APIVersion != gatehousev1alpha1.GroupVersion.String():
		return fmt.Sprintf("its controller is %s %s (uid %s), not HAProxyTemplateConfig %s (uid %s)", ref.Kind, ref.Name, ref.UID, cfg.Name, cfg.UID)
	case obj.GetLabels()[managedByLabel] != "gatehouse":
		return "it lacks the label " + managedByLabel + "=gatehouse"
	}
	return ""
}

// existing reads obj by its key, and says whether it exists; one that
// exists must be cfg's. The read is live: Gatehouse caches no ConfigMaps or
// Secrets (that would mean caching every Secret of the cluster), and a
// stale cache would let an update carry an old resourceVersion anyway.
func (p *publisher) existing(ctx context.Context, cfg *gatehousev1alpha1.HAProxyTemplateConfig, obj client.Object, kind string) (bool, error) {
	if err := p.m.host.Client().Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("%s %s: %w", kind, obj.GetName(), err)
	}
	if why := notOwned(obj, cfg); why != "" {
		return true, &notOwnedError{kind: kind, namespace: obj.GetNamespace(), name: obj.GetName(), why: why}
	}
	return true, nil
}

// write creates or updates the ConfigMap (and the Secret, when there are
// certificates) holding out, controlled by cfg so that they go with it. An
// object of either name that is not cfg's is left alone, and then neither
// is written (a *notOwnedError): a ConfigMap naming certificates that are
// not published would be no better than the last one. An update keeps
// what others added to the metadata (labels, annotations, ownerReferences),
// and carries the resourceVersion read, so it fails rather than overwrite
// an object that changed hands meanwhile.
func (p *publisher) write(ctx context.Context, cfg *gatehousev1alpha1.HAProxyTemplateConfig, out render.Output, checksum string) (*gatehousev1alpha1.RenderedOutput, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: RenderedConfigMapName(cfg.Name)}}
	cmExists, err := p.existing(ctx, cfg, cm, "ConfigMap")
	if err != nil {
		return nil, err
	}
	var secret *corev1.Secret
	secretExists := false
	if len(out.Certs) > 0 {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: RenderedSecretName(cfg.Name)}}
		if secretExists, err = p.existing(ctx, cfg, secret, "Secret"); err != nil {
			return nil, err
		}
	}

	p.label(&cm.ObjectMeta, cfg, checksum)
	cm.Data = map[string]string{configKey: out.HAProxyConfig}
	for name, text := range out.Maps {
		cm.Data[mapKeyPrefix+name] = text
	}
	for name, text := range out.Files {
		cm.Data[fileKeyPrefix+name] = text
	}
	if err := p.put(ctx, cfg, cm, cmExists); err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", cm.Name, err)
	}
	output := &gatehousev1alpha1.RenderedOutput{ConfigMapName: cm.Name, Checksum: checksum}
	if secret == nil {
		return output, nil
	}
	p.label(&secret.ObjectMeta, cfg, checksum)
	secret.Data = map[string][]byte{}
	for name, text := range out.Certs {
		secret.Data[name] = []byte(text)
	}
	if err := p.put(ctx, cfg, secret, secretExists); err != nil {
		return nil, fmt.Errorf("Secret %s: %w", secret.Name, err)
	}
	output.SecretName = secret.Name
	return output, nil
}

// put creates obj, controlled by cfg, or updates it when it exists (it is
// cfg's: existing checked).
func (p *publisher) put(ctx context.Context, cfg *gatehousev1alpha1.HAProxyTemplateConfig, obj client.Object, exists bool) error {
	c := p.m.host.Client()
	if exists {
		return c.Update(ctx, obj)
	}
	if err := controllerutil.SetControllerReference(cfg, obj, c.Scheme()); err != nil {
		return err
	}
	// Created meanwhile by someone else: AlreadyExists, and the next
	// round reads it and judges whose it is.
	return c.Create(ctx, obj)
}

func (p *publisher) label(obj *metav1.ObjectMeta, cfg *gatehousev1alpha1.HAProxyTemplateConfig, checksum string) {
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[managedByLabel] = "gatehouse"
	obj.Labels[configLabel] = cfg.Name
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[checksumAnnotation] = checksum
}

func setValidity(status *gatehousev1alpha1.HAProxyTemplateConfigStatus, st *configState) {
	// Not run (the templates do not compile, or the tests could not run):
	// no count at all, rather than 0 of 0.
	status.TestsPassed, status.TestsTotal = nil, nil
	if st.report != nil {
		status.TestsTotal = ptr.To(int32(st.report.Total))
		status.TestsPassed = ptr.To(int32(st.report.Total - st.report.Failed))
	}
	switch {
	case st.compiled == nil:
		status.ValidationStatus = gatehousev1alpha1.ValidationInvalid
		status.ValidationMessage = bounded(st.invalid, 4000)
		setCondition(status, st, gatehousev1alpha1.ConditionValid, metav1.ConditionFalse, "SpecInvalid", bounded(st.invalid, 4000))
	case st.invalid != "":
		status.ValidationStatus = gatehousev1alpha1.ValidationUnknown
		status.ValidationMessage = bounded(st.invalid, 4000)
		setCondition(status, st, gatehousev1alpha1.ConditionValid, metav1.ConditionUnknown, "TestsNotRun", bounded(st.invalid, 4000))
	case st.failedTests() != "":
		status.ValidationStatus = gatehousev1alpha1.ValidationInvalid
		status.ValidationMessage = bounded(st.failedTests(), 4000)
		setCondition(status, st, gatehousev1alpha1.ConditionValid, metav1.ConditionFalse, "TestsFailed", bounded(st.failedTests(), 4000))
	default:
		status.ValidationStatus = gatehousev1alpha1.ValidationValid
		msg := fmt.Sprintf("the templates compile and %d/%d embedded tests pass", *status.TestsPassed, *status.TestsTotal)
		status.ValidationMessage = msg
		setCondition(status, st, gatehousev1alpha1.ConditionValid, metav1.ConditionTrue, "Valid", msg)
	}
	hooks := 0
	if st.compiled != nil {
		for _, w := range st.compiled.watched {
			if w.webhook {
				hooks++
			}
		}
	}
	switch {
	case st.compiled == nil:
		setCondition(status, st, gatehousev1alpha1.ConditionWebhookActive, metav1.ConditionFalse, "ConfigInvalid", "an invalid config validates nothing (its watched resources are admitted with a warning)")
	case hooks == 0:
		setCondition(status, st, gatehousev1alpha1.ConditionWebhookActive, metav1.ConditionFalse, "NoWebhookResources", "no watched resource has enableValidationWebhook")
	default:
		setCondition(status, st, gatehousev1alpha1.ConditionWebhookActive, metav1.ConditionTrue, "Registered",
			fmt.Sprintf("%d watched resources are validated at admission (failurePolicy %s, timeout %ds)", hooks, st.compiled.policy, st.compiled.timeout))
	}
}

func setReady(status *gatehousev1alpha1.HAProxyTemplateConfigStatus, st *configState) {
	valid := meta.IsStatusConditionTrue(status.Conditions, gatehousev1alpha1.ConditionValid)
	pub := meta.IsStatusConditionTrue(status.Conditions, gatehousev1alpha1.ConditionPublished)
	if valid && pub {
		setCondition(status, st, gatehousev1alpha1.ConditionReady, metav1.ConditionTrue, "Ready", "valid, and the current rendering is published")
		return
	}
	setCondition(status, st, gatehousev1alpha1.ConditionReady, metav1.ConditionFalse, "NotReady", "see the Valid and Published conditions")
}

func setCondition(status *gatehousev1alpha1.HAProxyTemplateConfigStatus, st *configState, kind string, value metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: kind, Status: value, Reason: reason, Message: message, ObservedGeneration: st.generation,
	})
}
