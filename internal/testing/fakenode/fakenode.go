package fakenode

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// Label marks the Nodes this package registers.
const Label = "gatehouse.dev/fake-node"

// Options configures Start. The zero value registers three Nodes, one in
// each of zone-a, zone-b and zone-c.
type Options struct {
	// Prefix starts every Node name: <prefix>-<zone>-<n>. Default "fake-node".
	Prefix string
	// Zones get NodesPerZone Nodes each. Default zone-a, zone-b, zone-c.
	Zones []string
	// NodesPerZone defaults to 1.
	NodesPerZone int
	// CPU, Memory and Pods are each Node's capacity and allocatable.
	// Defaults 4, 8Gi and 110 (a kubelet's default maxPods).
	CPU, Memory, Pods string
	// Heartbeat is how often the Leases and Ready conditions are renewed.
	// Default 10s, a kubelet's lease renewal interval; the node lifecycle
	// controller's grace period (50s) leaves room for several misses.
	Heartbeat time.Duration
	// Log receives what the heartbeat and the Pod finaliser do. Default: discarded.
	Log logr.Logger
}

func (o *Options) defaults() {
	if o.Prefix == "" {
		o.Prefix = "fake-node"
	}
	if len(o.Zones) == 0 {
		o.Zones = []string{"zone-a", "zone-b", "zone-c"}
	}
	if o.NodesPerZone <= 0 {
		o.NodesPerZone = 1
	}
	if o.CPU == "" {
		o.CPU = "4"
	}
	if o.Memory == "" {
		o.Memory = "8Gi"
	}
	if o.Pods == "" {
		o.Pods = "110"
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 10 * time.Second
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
}

// Nodes are registered fake Nodes kept Ready until Stop.
type Nodes struct {
	client kubernetes.Interface
	opts   Options
	names  []string
	ours   map[string]bool
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// Start registers the Nodes (reusing any that already exist under the same
// names), renews their heartbeats and finishes the graceful deletion of their
// Pods until Stop. It returns once the Nodes report Ready; the not-ready
// taint is removed later by the node lifecycle controller (see
// WaitSchedulable).
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*Nodes, error) {
	opts.defaults()
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "gatehouse-fakenode"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	capacity, err := opts.capacity()
	if err != nil {
		return nil, err
	}
	n := &Nodes{client: cs, opts: opts, ours: map[string]bool{}}
	for _, zone := range opts.Zones {
		for i := 1; i <= opts.NodesPerZone; i++ {
			name := fmt.Sprintf("%s-%s-%d", opts.Prefix, zone, i)
			n.names = append(n.names, name)
			n.ours[name] = true
			if err := n.register(ctx, name, zone, capacity); err != nil {
				return nil, fmt.Errorf("register node %s: %w", name, err)
			}
		}
	}

	runCtx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if err := n.startPodFinaliser(runCtx); err != nil {
		n.Stop()
		return nil, err
	}
	n.done.Add(1)
	go func() {
		defer n.done.Done()
		// The first beat is already done by register; the next one is due
		// one interval later.
		t := time.NewTicker(opts.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				n.beat(runCtx)
			}
		}
	}()
	return n, nil
}

// Names lists the Nodes, zone by zone.
func (n *Nodes) Names() []string { return append([]string(nil), n.names...) }

// Zones lists the zones the Nodes are spread over.
func (n *Nodes) Zones() []string { return append([]string(nil), n.opts.Zones...) }

// Stop ends the heartbeat and the Pod finaliser. The Nodes stay registered:
// within the node lifecycle controller's grace period they turn NotReady.
func (n *Nodes) Stop() {
	if n.cancel != nil {
		n.cancel()
	}
	n.done.Wait()
}

// WaitSchedulable waits until no Node carries a NoSchedule or NoExecute
// taint, i.e. until the node lifecycle controller has seen them Ready.
func (n *Nodes) WaitSchedulable(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, name := range n.names {
			node, err := n.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			for _, taint := range node.Spec.Taints {
				if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
					last = fmt.Sprintf("node %s has taint %s:%s", name, taint.Key, taint.Effect)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("fake nodes not schedulable (%s): %w", last, err)
	}
	return nil
}

func (o Options) capacity() (corev1.ResourceList, error) {
	list := corev1.ResourceList{}
	for name, value := range map[corev1.ResourceName]string{
		corev1.ResourceCPU: o.CPU, corev1.ResourceMemory: o.Memory, corev1.ResourcePods: o.Pods,
		// The scheduler's ephemeral-storage check passes for Pods that do not
		// ask for any, but tools that print node capacity expect it.
		corev1.ResourceEphemeralStorage: "100Gi",
	} {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("fake node %s %q: %w", name, value, err)
		}
		list[name] = q
	}
	return list, nil
}

func (n *Nodes) register(ctx context.Context, name, zone string, capacity corev1.ResourceList) error {
	nodes := n.client.CoreV1().Nodes()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelHostname:           name,
		corev1.LabelTopologyZone:       zone,
		corev1.LabelOSStable:           "linux",
		corev1.LabelArchStable:         runtime.GOARCH,
		corev1.LabelInstanceTypeStable: "fake",
		Label:                          "true",
	}}}
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = nodes.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	// A Node's status is ignored on create, so it is written separately, as
	// a kubelet does after registering.
	now := metav1.Now()
	created.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions:  conditions(now),
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
			{Type: corev1.NodeHostName, Address: name},
		},
		NodeInfo: corev1.NodeSystemInfo{
			OperatingSystem:         "linux",
			Architecture:            runtime.GOARCH,
			KubeletVersion:          "fake",
			ContainerRuntimeVersion: "fake://0",
		},
	}
	if _, err := nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return n.renewLease(ctx, created)
}

func conditions(now metav1.Time) []corev1.NodeCondition {
	c := []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "fake node: no kubelet, kept Ready by gatehouse's fakenode heartbeat",
	}}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		c = append(c, corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: "KubeletHasNo" + string(t)})
	}
	for i := range c {
		c[i].LastHeartbeatTime, c[i].LastTransitionTime = now, now
	}
	return c
}

// beat renews every Node's Lease, which is what the node lifecycle
// controller watches, and the Ready condition's heartbeat time, for those
// who read the condition.
func (n *Nodes) beat(ctx context.Context) {
	for _, name := range n.names {
		node, err := n.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			n.logError(ctx, err, "heartbeat: get node", "node", name)
			continue
		}
		if err := n.renewLease(ctx, node); err != nil {
			n.logError(ctx, err, "heartbeat: renew lease", "node", name)
		}
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":%q}]}}`,
			time.Now().UTC().Format(time.RFC3339))
		if _, err := n.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			n.logError(ctx, err, "heartbeat: node status", "node", name)
		}
	}
}

func (n *Nodes) logError(ctx context.Context, err error, msg string, kv ...any) {
	// Errors after Stop come from the cancelled context, not the cluster.
	if ctx.Err() == nil {
		n.opts.Log.Error(err, msg, kv...)
	}
}

func (n *Nodes) renewLease(ctx context.Context, node *corev1.Node) error {
	leases := n.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, node.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: corev1.NamespaceNodeLease,
				// As a kubelet does: the garbage collector removes the
				// Lease with its Node.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(node.Name),
				LeaseDurationSeconds: ptr.To(int32(40)),
				RenewTime:            &now,
			},
		}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// startPodFinaliser watches the Pods bound to any Node and completes the
// graceful deletion of those on ours.
func (n *Nodes) startPodFinaliser(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(n.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	}))
	pods := factory.Core().V1().Pods()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
		workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "fakenode-pods"})
	enqueue := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if ok && pod.DeletionTimestamp != nil && n.ours[pod.Spec.NodeName] {
			queue.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	lister := pods.Lister()
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			factory.Shutdown()
			return fmt.Errorf("fake nodes: the %v informer did not sync", typ)
		}
	}

	n.done.Add(2)
	go func() {
		defer n.done.Done()
		<-ctx.Done()
		queue.ShutDown()
		factory.Shutdown()
	}()
	go func() {
		defer n.done.Done()
		for {
			key, quit := queue.Get()
			if quit {
				return
			}
			err := n.finishDeletion(ctx, lister, key)
			if err != nil && ctx.Err() == nil {
				n.opts.Log.Error(err, "finish pod deletion", "pod", key)
				queue.AddRateLimited(key)
			} else {
				queue.Forget(key)
			}
			queue.Done(key)
		}
	}()
	return nil
}

func (n *Nodes) finishDeletion(ctx context.Context, lister corelisters.PodLister, key types.NamespacedName) error {
	pod, err := lister.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp == nil || !n.ours[pod.Spec.NodeName] {
		return nil
	}
	// The UID precondition keeps a Pod recreated under the same name (a
	// StatefulSet's) from being deleted in its predecessor's place.
	err = n.client.CoreV1().Pods(key.Namespace).Delete(ctx, key.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		n.opts.Log.V(1).Info("finished the graceful deletion of a pod", "pod", key, "node", pod.Spec.NodeName)
	}
	return err
}
