package placement

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	json "github.com/go-json-experiment/json/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// class is an AffinityClass as the decisions read it.
type class struct {
	Name         string
	NodeSelector map[string]string
	// Required is the class's node affinity terms, nil when it has none.
	Required *corev1.NodeSelector
	// Terminating: the class is being deleted (a finalizer holds it). It
	// still judges the Pods of the releases that use it, but no release may
	// newly take it: the class would vanish under them once its finalizers
	// are removed.
	Terminating bool
}

// podVerdict is the decision on one Pod.
type podVerdict struct {
	// Denials are the reasons the Pod violates a class, one per class
	// requirement broken; empty when it is allowed.
	Denials []string
	// Unresolved are the ownership links that could not be followed.
	Unresolved []string
	// Err is a failure to decide (a class API not served, a cache error).
	Err error
}

// podName names a Pod in messages: ReplicaSet-made Pods have only a
// generateName at admission.
func podName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName
}

// decidePod walks the Pod's lineage to its applications' HelmReleases and
// checks the Pod against each release's AffinityClass, reading releases,
// classes and the Node it is bound to from src. The lineage is always read
// from the owner caches.
func (m *Module) decidePod(ctx context.Context, src view, namespace string, pod *corev1.Pod) podVerdict {
	var v podVerdict
	l := walkLineage(ctx, namespace, pod, m.owners)
	v.Unresolved = l.Unresolved
	if l.Err != nil {
		v.Err = l.Err
		return v
	}
	var node *boundNode
	nodeRead := false
	for _, key := range l.Releases {
		release, found, err := src.releases.get(ctx, key)
		if err != nil {
			v.Err = err
			return v
		}
		if !found {
			continue // not an application's release: nothing to check
		}
		className := release.Labels[classLabel]
		if className == "" {
			continue
		}
		c, found, err := src.classes.get(ctx, className)
		if err != nil {
			v.Err = err
			return v
		}
		if !found {
			v.Denials = append(v.Denials, fmt.Sprintf("AffinityClass %q not found (HelmRelease %s)", className, key))
			continue
		}
		if !nodeRead {
			nodeRead = true
			if node, err = readBoundNode(ctx, src, pod.Spec.NodeName); err != nil {
				v.Err = err
				return v
			}
		}
		v.Denials = append(v.Denials, checkPod(namespace, pod, c, key, node)...)
	}
	return v
}

// boundNode is the Node a Pod names in spec.nodeName, as a decision reads it.
type boundNode struct {
	name   string
	labels map[string]string
	// unknown: the cache holds no such Node. It may be newer than the
	// cache, so the Pod is denied provisionally, and the confirmation reads
	// the Node from the API server.
	unknown bool
}

// readBoundNode reads the Node a Pod is bound to: nil when the Pod names
// none, or names one that does not exist (the API server holds none).
//
// A Pod bound at creation skips the scheduler, so its nodeSelector and node
// affinity, which the class check reads, say nothing of where it runs:
// the Node's labels do. A Pod bound to a Node that does not exist runs
// nowhere; it is judged on its nodeSelector and node affinity alone, which
// is what a Node of that name joining later would be held to (the kubelet
// refuses to run a Pod whose required node affinity does not match its
// Node), and the periodic check judges it against that Node then.
func readBoundNode(ctx context.Context, src view, name string) (*boundNode, error) {
	if name == "" {
		return nil, nil
	}
	if src.nodes == nil {
		return nil, fmt.Errorf("the Pod is bound to node %q and Nodes cannot be read", name)
	}
	labels, found, err := src.nodes.get(ctx, name)
	switch {
	case err != nil:
		return nil, err
	case found:
		return &boundNode{name: name, labels: labels}, nil
	case src.fromAPIServer:
		return nil, nil
	}
	return &boundNode{name: name, unknown: true}, nil
}

// nodeInClass says whether a Node's labels satisfy the class, as the
// scheduler and the kubelet match a Pod carrying the class's nodeSelector
// and node affinity.
func nodeInClass(c *class, labels map[string]string) (bool, error) {
	var affinity *corev1.Affinity
	if c.Required != nil {
		affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: c.Required}}
	}
	return nodeaffinity.NewRequiredNodeAffinity(c.NodeSelector, affinity).Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}})
}

// checkPod applies one class to a Pod: the class's nodeSelector pairs must
// all be in the Pod's nodeSelector (the seed's contract), the Pod's
// placement must guarantee the class's node affinity, and the Node the Pod
// is bound to, if any, must be in the class.
func checkPod(namespace string, pod *corev1.Pod, c *class, release releaseKey, node *boundNode) []string {
	var out []string
	name := namespace + "/" + podName(pod)
	if missing := MissingSelectorPairs(c.NodeSelector, pod.Spec.NodeSelector); len(missing) > 0 {
		out = append(out, fmt.Sprintf("pod %s belongs to application with AffinityClass %q but missing required nodeSelector %s",
			name, c.Name, strings.Join(missing, ", ")))
	}
	if c.Required != nil {
		var podRequired *corev1.NodeSelector
		if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
			podRequired = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		if ok, why := ImpliesNodeAffinity(pod.Spec.NodeSelector, podRequired, c.Required); !ok {
			out = append(out, fmt.Sprintf("pod %s belongs to application with AffinityClass %q but its placement does not guarantee the class's node affinity: %s",
				name, c.Name, why))
		}
	}
	if node != nil {
		// The message says whether the Node is in the class, never which of
		// its labels are not: a Pod's author may not be able to read Nodes.
		if node.unknown {
			out = append(out, fmt.Sprintf("pod %s belongs to application with AffinityClass %q and is bound to node %q (spec.nodeName), which Gatehouse's cache does not hold yet",
				name, c.Name, node.name))
		} else if in, err := nodeInClass(c, node.labels); err != nil || !in {
			// err: a class the CRD admitted but the matcher cannot read;
			// no Node is in it.
			out = append(out, fmt.Sprintf("pod %s belongs to application with AffinityClass %q but is bound to node %q (spec.nodeName), which is not in the class: leave spec.nodeName to the scheduler, or name a node of the class",
				name, c.Name, node.name))
		}
	}
	if len(out) > 0 {
		out = append(out, fmt.Sprintf("to proceed: render the Pod template of HelmRelease %s from its values' _scheduling (nodeSelector and nodeAffinity of the class), or choose another class in spec.values.affinityClass", release))
	}
	return out
}

// podBytesPerToken is the Pod webhook's declared decoding cost, per JSON
// token (module.Cost), measured by BenchmarkDecodeCost in internal/server.
const podBytesPerToken = 1280

// admitPod judges a Pod at CREATE (its nodeSelector and affinity are
// immutable afterwards) from the caches; the server makes a denial again
// from the API server before it is returned (confirmPod). A Pod that cannot
// be judged is answered undecided: the API server applies the webhook's
// failure policy (Ignore admits it, and records the webhook as failed open),
// never a silent allow from Gatehouse; the periodic check judges it again
// later.
func (m *Module) admitPod(ctx context.Context, req admission.Request) admission.Response {
	return m.judgePod(ctx, m.view, req, true)
}

// confirmPod makes a Pod's denial again from the API server. When the API
// server cannot be read in time (a read fails, or the webhook's timeout
// less a second is spent), the caches' denial stands (module.Unconfirmed,
// counted undecided), as pvsafe's does. The Pod webhook fails open so that
// a Gatehouse the API server cannot reach never stops Pods from starting;
// this one was reached, and its caches found the Pod outside its class. An
// API server slow for a moment (a node under load while Gatehouse's own
// replicas roll) would otherwise admit, for good, every Pod the caches
// refuse meanwhile: the install suite saw two admitted during an upgrade,
// each confirmation cut at its 2 s. Only an API no longer served (the
// class CRD gone) leaves the Pod undecided: that was read live, and the
// cached denial rests on what is gone.
func (m *Module) confirmPod(ctx context.Context, req admission.Request, denial admission.Response) module.Confirmed {
	if m.live == nil {
		return module.Upheld(denial)
	}
	pod, bad := decodePod(req)
	if bad != nil {
		return module.LiveDecision(*bad)
	}
	v := m.decidePod(ctx, *m.live, req.Namespace, pod)
	if v.Err != nil && !errors.Is(v.Err, errClassAPI) {
		logf.FromContext(ctx).WithValues("pod", req.Namespace+"/"+podName(pod)).Error(v.Err,
			"could not confirm the Pod's denial against the API server; denying from the caches")
		return module.Unconfirmed(denial)
	}
	return module.LiveDecision(m.answerPod(ctx, req, pod, v, false))
}

// judgePod judges a Pod over src; cached says src is the caches, whose
// unresolved links are counted and logged.
func (m *Module) judgePod(ctx context.Context, src view, req admission.Request, cached bool) admission.Response {
	pod, bad := decodePod(req)
	if bad != nil {
		return *bad
	}
	return m.answerPod(ctx, req, pod, m.decidePod(ctx, src, req.Namespace, pod), cached)
}

func decodePod(req admission.Request) (*corev1.Pod, *admission.Response) {
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		resp := admission.Errored(http.StatusBadRequest, fmt.Errorf("decode Pod: %w", err))
		return nil, &resp
	}
	return pod, nil
}

// answerPod turns a verdict into the webhook's answer.
func (m *Module) answerPod(ctx context.Context, req admission.Request, pod *corev1.Pod, v podVerdict, cached bool) admission.Response {
	log := logf.FromContext(ctx).WithValues("pod", req.Namespace+"/"+podName(pod))
	if cached && len(v.Unresolved) > 0 {
		unresolved.Inc()
		log.Info("ownership not fully resolved from the caches; judged on what was found", "unresolved", v.Unresolved)
	}
	if v.Err != nil {
		log.Error(v.Err, "placement could not be decided; answered undecided, the webhook's failure policy applies and the periodic check judges it again")
		return module.Undecided(undecidedMessage(req.Namespace, pod, v.Err))
	}
	if len(v.Denials) > 0 {
		return module.Deny(reasonPlacementMismatch, strings.Join(v.Denials, "\n"))
	}
	return admission.Allowed("")
}
