package nodegroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Node labels the checks read.
const (
	groupLabel = "node.deckhouse.io/group"
	// customContainerdLabel is what bashible sets today; the legacy label is
	// what older nodes may still carry.
	customContainerdLabel       = "node.deckhouse.io/containerd-config"
	legacyCustomContainerdLabel = "node.deckhouse.io/containerd"
	containerdV2UnsupportedKey  = "node.deckhouse.io/containerd-v2-unsupported"

	groupIndex = "group"
)

var (
	moduleConfigGVR = schema.GroupVersionResource{Group: "deckhouse.io", Version: "v1alpha1", Resource: "moduleconfigs"}
	crdGVR          = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	nodeGVR         = corev1.SchemeGroupVersion.WithResource("nodes")
)

const (
	moduleConfigCRD  = "moduleconfigs.deckhouse.io"
	globalModuleName = "global"
)

// clusterCache follows the few objects the checks and the conversion read,
// each through its own field- or label-selected informer, and keeps them
// parsed: a Secret is parsed once per change, never per request.
type clusterCache struct {
	clusterConfig *followed[clusterConfigState]
	provider      *followed[providerState]
	endpoints     *followed[int]
	tolerations   *moduleConfigFollower
	// customContainerd holds one informer per label: a selector cannot OR two keys.
	customContainerd    []cache.SharedIndexInformer
	withoutContainerdV2 cache.SharedIndexInformer

	// runnables are started by the manager; each reports its sync to /readyz.
	runnables []cacheRunnable
}

type clusterConfigState struct {
	config clusterConfiguration
	err    error
}

type providerState struct {
	permanent    map[string]bool
	permanentErr error
	zones        []string
	zonesErr     error
}

type toleranceState struct {
	keys []string
	err  error
}

// cacheRunnable is one informer the manager runs on every replica.
type cacheRunnable struct {
	// name is the /readyz check and the gatehouse_cache_synced label.
	name   string
	run    func(ctx context.Context)
	synced func() bool
}

func (r cacheRunnable) Start(ctx context.Context) error {
	r.run(ctx)
	return nil
}

// NeedLeaderElection is false: every replica answers webhooks and needs the state.
func (cacheRunnable) NeedLeaderElection() bool { return false }

func newClusterCache(cfg *rest.Config, log logr.Logger) (*clusterCache, error) {
	cfg = rest.CopyConfig(cfg)
	// Listing v1 Endpoints draws a deprecation warning on every request.
	cfg.WarningHandler, cfg.WarningHandlerWithContext = nil, warningLogger{log}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}

	c := &clusterCache{}
	byName := func(name string) func(*metav1.ListOptions) {
		selector := fields.OneTermEqualSelector("metadata.name", name).String()
		return func(o *metav1.ListOptions) { o.FieldSelector = selector }
	}

	clusterSecret := coreinformers.NewFilteredSecretInformer(core, configNamespace, 0, cache.Indexers{}, byName(clusterConfigSecret))
	if c.clusterConfig, err = follow("Secret "+configNamespace+"/"+clusterConfigSecret, clusterSecret, parseClusterConfigSecret); err != nil {
		return nil, err
	}
	providerSecret := coreinformers.NewFilteredSecretInformer(core, configNamespace, 0, cache.Indexers{}, byName(providerConfigSecret))
	if c.provider, err = follow("Secret "+configNamespace+"/"+providerConfigSecret, providerSecret, parseProviderSecret); err != nil {
		return nil, err
	}
	endpoints := coreinformers.NewFilteredEndpointsInformer(core, metav1.NamespaceDefault, 0, cache.Indexers{}, byName("kubernetes"))
	if c.endpoints, err = follow("Endpoints default/kubernetes", endpoints, countEndpointAddresses); err != nil {
		return nil, err
	}
	c.tolerations, err = newModuleConfigFollower(meta, dyn, byName, log)
	if err != nil {
		return nil, err
	}

	nodes := func(selector string) (cache.SharedIndexInformer, error) {
		inf := metadatainformer.NewFilteredMetadataInformer(meta, nodeGVR, "", 0, cache.Indexers{groupIndex: indexByGroup},
			func(o *metav1.ListOptions) { o.LabelSelector = selector }).Informer()
		return inf, inf.SetTransform(dropManagedFields)
	}
	for _, selector := range []string{customContainerdLabel + "=custom", legacyCustomContainerdLabel + "=custom"} {
		inf, err := nodes(selector)
		if err != nil {
			return nil, err
		}
		c.customContainerd = append(c.customContainerd, inf)
		c.runnables = append(c.runnables, informerRunnable("nodes/"+selector, inf))
	}
	if c.withoutContainerdV2, err = nodes(containerdV2UnsupportedKey); err != nil {
		return nil, err
	}
	c.runnables = append(c.runnables,
		informerRunnable("nodes/"+containerdV2UnsupportedKey, c.withoutContainerdV2),
		c.clusterConfig.runnable("secret/"+clusterConfigSecret),
		c.provider.runnable("secret/"+providerConfigSecret),
		c.endpoints.runnable("endpoints/kubernetes"),
		cacheRunnable{name: "moduleconfig/" + globalModuleName, run: c.tolerations.run, synced: c.tolerations.synced},
	)
	return c, nil
}

func informerRunnable(name string, inf cache.SharedIndexInformer) cacheRunnable {
	return cacheRunnable{name: name, run: inf.RunWithContext, synced: inf.HasSynced}
}

// IsCloudPermanent answers from the provider cluster configuration as the
// informer holds it. A missing Secret or key lists no group. Before the
// informer has listed, the answer is unknown and the conversion of that
// object fails, to be retried, rather than storing a guess.
func (c *clusterCache) IsCloudPermanent(name string) (bool, error) {
	p, err := c.provider.get()
	if err != nil {
		return false, err
	}
	return p.IsCloudPermanent(name)
}

// IsCloudPermanent answers from one parsed provider Secret.
func (p providerState) IsCloudPermanent(name string) (bool, error) {
	if p.permanentErr != nil {
		return false, p.permanentErr
	}
	return p.permanent[name], nil
}

// snapshot is the state the checks need for group, or an error naming
// every piece that is not loaded or cannot be parsed.
func (c *clusterCache) snapshot(group string) (ClusterState, error) {
	var problems []error
	var s ClusterState
	if cc, err := c.clusterConfig.get(); err != nil {
		problems = append(problems, err)
	} else if cc.err != nil {
		problems = append(problems, cc.err)
	} else {
		s.ClusterType = cc.config.ClusterType
		s.ClusterPrefix = cc.config.Cloud.Prefix
		s.DefaultCRI = cc.config.DefaultCRI
		s.PodSubnetNodeCIDRPrefix = int(cc.config.PodSubnetNodeCIDRPrefix)
	}
	if p, err := c.provider.get(); err != nil {
		problems = append(problems, err)
	} else if p.zonesErr != nil {
		problems = append(problems, p.zonesErr)
	} else {
		s.Zones = p.zones
	}
	if n, err := c.endpoints.get(); err != nil {
		problems = append(problems, err)
	} else {
		s.APIServerEndpoints = n
	}
	if t, err := c.tolerations.get(); err != nil {
		problems = append(problems, err)
	} else if t.err != nil {
		problems = append(problems, t.err)
	} else {
		s.CustomTolerationKeys = t.keys
	}
	custom, err := nodesInGroup(group, c.customContainerd...)
	if err != nil {
		problems = append(problems, err)
	}
	unsupported, err := nodesInGroup(group, c.withoutContainerdV2)
	if err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return ClusterState{}, errors.Join(problems...)
	}
	s.NodesWithCustomContainerd = map[string][]string{group: custom}
	s.NodesWithoutContainerdV2 = map[string][]string{group: unsupported}
	return s, nil
}

func nodesInGroup(group string, informers ...cache.SharedIndexInformer) ([]string, error) {
	var names []string
	for _, inf := range informers {
		if !inf.HasSynced() {
			return nil, fmt.Errorf("Nodes: %w", errNotLoaded)
		}
		objs, err := inf.GetIndexer().ByIndex(groupIndex, group)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			if m, ok := obj.(metav1.Object); ok && !slices.Contains(names, m.GetName()) {
				names = append(names, m.GetName())
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

func indexByGroup(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	if g, ok := m.GetLabels()[groupLabel]; ok {
		return []string{g}, nil
	}
	return nil, nil
}

// dropManagedFields keeps node metadata small: the checks read names and labels.
func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

func parseClusterConfigSecret(obj any) clusterConfigState {
	secret, ok := obj.(*corev1.Secret)
	if !ok || len(secret.Data[clusterConfigKey]) == 0 {
		return clusterConfigState{}
	}
	config, err := parseClusterConfiguration(secret.Data[clusterConfigKey])
	return clusterConfigState{config: config, err: err}
}

func parseProviderSecret(obj any) providerState {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return providerState{}
	}
	var s providerState
	s.permanent, s.permanentErr = parsePermanentGroups(secret.Data[providerConfigKey])
	s.zones, s.zonesErr = parseZones(secret.Data[providerDiscoveryKey])
	return s
}

func countEndpointAddresses(obj any) int {
	ep, ok := obj.(*corev1.Endpoints) //nolint:staticcheck // the checks count Endpoints default/kubernetes, as Deckhouse does
	if !ok {
		return 0
	}
	n := 0
	for _, subset := range ep.Subsets {
		n += len(subset.Addresses)
	}
	return n
}

// followed keeps what parse makes of the one object a field-selected
// informer holds.
type followed[T any] struct {
	name     string
	informer cache.SharedIndexInformer
	handler  cache.ResourceEventHandlerRegistration
	absent   T
	current  atomic.Pointer[T]
}

func follow[T any](name string, informer cache.SharedIndexInformer, parse func(obj any) T) (*followed[T], error) {
	f := &followed[T]{name: name, informer: informer, absent: parse(nil)}
	store := func(obj any) {
		v := parse(obj)
		f.current.Store(&v)
	}
	var err error
	f.handler, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    store,
		UpdateFunc: func(_, obj any) { store(obj) },
		DeleteFunc: func(any) { store(nil) },
	})
	return f, err
}

// get returns the parsed object, the parse of nothing when the informer
// listed and found none, or errNotLoaded before it listed.
func (f *followed[T]) get() (T, error) {
	if v := f.current.Load(); v != nil {
		return *v, nil
	}
	// The handler has seen the initial list once it reports synced, so an
	// empty value then means the object does not exist.
	if f.handler.HasSynced() {
		return f.absent, nil
	}
	var zero T
	return zero, fmt.Errorf("%s: %w", f.name, errNotLoaded)
}

func (f *followed[T]) runnable(name string) cacheRunnable {
	return cacheRunnable{name: name, run: f.informer.RunWithContext, synced: f.handler.HasSynced}
}

// moduleConfigFollower follows ModuleConfig global, whose CRD may be
// installed or removed while Gatehouse runs. It watches that one CRD and
// runs the ModuleConfig informer only while the CRD exists, so a missing
// CRD means no custom toleration keys instead of an informer failing
// forever, and a CRD installed later is picked up without a restart.
type moduleConfigFollower struct {
	log   logr.Logger
	dyn   dynamic.Interface
	scope func(string) func(*metav1.ListOptions)

	crd        cache.SharedIndexInformer
	crdHandler cache.ResourceEventHandlerRegistration
	changed    chan struct{}

	mu      sync.Mutex
	current *followed[toleranceState]
	stop    context.CancelFunc
}

func newModuleConfigFollower(meta metadata.Interface, dyn dynamic.Interface, scope func(string) func(*metav1.ListOptions), log logr.Logger) (*moduleConfigFollower, error) {
	m := &moduleConfigFollower{
		log: log, dyn: dyn, scope: scope,
		crd:     metadatainformer.NewFilteredMetadataInformer(meta, crdGVR, "", 0, cache.Indexers{}, scope(moduleConfigCRD)).Informer(),
		changed: make(chan struct{}, 1),
	}
	notify := func(any) {
		select {
		case m.changed <- struct{}{}:
		default:
		}
	}
	var err error
	m.crdHandler, err = m.crd.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, DeleteFunc: notify,
	})
	return m, err
}

func (m *moduleConfigFollower) crdExists() bool {
	return len(m.crd.GetStore().ListKeys()) > 0
}

// run starts and stops the ModuleConfig informer as the CRD comes and goes.
func (m *moduleConfigFollower) run(ctx context.Context) {
	go m.crd.RunWithContext(ctx)
	defer m.stopInformer()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
		}
		exists := m.crdExists()
		m.mu.Lock()
		running := m.current != nil
		m.mu.Unlock()
		switch {
		case exists && !running:
			if err := m.startInformer(ctx); err != nil {
				m.log.Error(err, "following ModuleConfig global")
				continue
			}
			m.log.Info("ModuleConfig CRD found; following ModuleConfig global")
		case !exists && running:
			m.stopInformer()
			m.log.Info("ModuleConfig CRD gone; no custom toleration keys")
		}
	}
}

func (m *moduleConfigFollower) startInformer(ctx context.Context) error {
	informer := dynamicinformer.NewFilteredDynamicInformer(m.dyn, moduleConfigGVR, "", 0, cache.Indexers{}, m.scope(globalModuleName)).Informer()
	f, err := follow("ModuleConfig "+globalModuleName, informer, parseModuleConfig)
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	go informer.RunWithContext(runCtx)
	m.mu.Lock()
	m.current, m.stop = f, stop
	m.mu.Unlock()
	return nil
}

func (m *moduleConfigFollower) stopInformer() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stop != nil {
		m.stop()
	}
	m.current, m.stop = nil, nil
}

// get returns the toleration keys: none while the CRD does not exist.
func (m *moduleConfigFollower) get() (toleranceState, error) {
	if !m.crdHandler.HasSynced() {
		return toleranceState{}, fmt.Errorf("CustomResourceDefinition %s: %w", moduleConfigCRD, errNotLoaded)
	}
	m.mu.Lock()
	current := m.current
	m.mu.Unlock()
	if current == nil {
		if m.crdExists() {
			return toleranceState{}, fmt.Errorf("ModuleConfig %s: %w", globalModuleName, errNotLoaded)
		}
		return toleranceState{}, nil
	}
	return current.get()
}

func (m *moduleConfigFollower) synced() bool {
	_, err := m.get()
	return err == nil
}

func parseModuleConfig(obj any) toleranceState {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return toleranceState{}
	}
	keys, _, err := unstructured.NestedStringSlice(u.Object, "spec", "settings", "modules", "placement", "customTolerationKeys")
	if err != nil {
		return toleranceState{err: fmt.Errorf("ModuleConfig %s: .spec.settings.modules.placement.customTolerationKeys: %w", globalModuleName, err)}
	}
	return toleranceState{keys: keys}
}

// warningLogger logs API warnings at debug level instead of on stderr.
type warningLogger struct{ log logr.Logger }

func (w warningLogger) HandleWarningHeaderWithContext(_ context.Context, _ int, _, text string) {
	w.log.V(1).Info("API server warning", "warning", text)
}
