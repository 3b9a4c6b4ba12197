package configcheck

import (
	"context"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// hapticFollower follows haptic's kind for the reconciler. Gatehouse never
// installs haptic's CRD: the kind's informer runs while the CRD is served
// (the host's FollowKind), and comes and goes with it. Its events queue
// the configs' keys into the reconciler; when the kind stops being
// readable, every haptic config's state is queued, and the reconciler,
// finding them gone, drops them with their webhooks.
type hapticFollower struct {
	ctx context.Context
	m   *Module

	mu   sync.Mutex
	kind module.Kind
	// queue hands a key to the reconciler; nil until the reconciler
	// exists (its initial list covers what came before).
	queue    func(spec.Key)
	informer cache.Informer
	reg      toolscache.ResourceEventHandlerRegistration
}

// followHapticConfigs follows haptic's kind: its configs are read through
// m.hapticConfigs, and reach the reconciler once it calls start.
func (m *Module) followHapticConfigs(ctx context.Context) error {
	h := &hapticFollower{ctx: ctx, m: m}
	kind, err := m.host.FollowKind(&hapticv1alpha1.HAProxyTemplateConfig{}, module.Scope{}, h.changed)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.kind = kind
	h.mu.Unlock()
	m.hapticConfigs, m.haptic = kind, h
	return nil
}

// start queues the kind's events through queue from now on.
func (h *hapticFollower) start(queue func(spec.Key)) {
	h.mu.Lock()
	h.queue = queue
	h.mu.Unlock()
	h.changed()
}

// keys lists the haptic configs the kind holds now (none while it cannot
// be read).
func (h *hapticFollower) keys(ctx context.Context) []spec.Key {
	var list hapticv1alpha1.HAProxyTemplateConfigList
	if err := h.m.hapticConfigs.List(ctx, &list); err != nil {
		logf.FromContext(ctx).Error(err, "listing haptic's HAProxyTemplateConfigs")
		return nil
	}
	out := make([]spec.Key, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, spec.KeyOf(spec.HapticConfig{HAProxyTemplateConfig: &list.Items[i]}))
	}
	return out
}

// changed attaches the queue to the kind's informer while there is one;
// without one, the configs loaded from it are queued to be dropped.
func (h *hapticFollower) changed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kind == nil || h.queue == nil {
		return
	}
	informer := h.kind.Informer()
	if informer == h.informer && h.reg != nil {
		return
	}
	if h.reg != nil {
		_ = h.informer.RemoveEventHandler(h.reg)
		h.reg, h.informer = nil, nil
	}
	if informer == nil {
		for _, st := range h.m.allStates() {
			if st.key.Kind == spec.HapticKind {
				h.queue(st.key)
			}
		}
		return
	}
	queue := h.queue
	enqueue := func(obj any) {
		if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if o, ok := obj.(client.Object); ok {
			queue(spec.Key{Kind: spec.HapticKind, NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	if err != nil {
		logf.FromContext(h.ctx).Error(err, "event handler of haptic's HAProxyTemplateConfigs")
		return
	}
	h.reg, h.informer = reg, informer
}
