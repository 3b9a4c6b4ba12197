package placement

import (
	"context"
	"errors"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels Flux's helm-controller puts on every object a release renders.
const (
	fluxNameLabel      = "helm.toolkit.fluxcd.io/name"
	fluxNamespaceLabel = "helm.toolkit.fluxcd.io/namespace"
)

// maxLineageDepth bounds the walk: real ownership chains are a few hops
// (Pod → ReplicaSet → Deployment; Pod → Job → CronJob; Pod → operator CR).
const maxLineageDepth = 8

// owners reads the objects owner references name.
type owners interface {
	// Owner returns the owner a reference of an object in namespace names.
	// found is false when a synced cache holds no such object; err means the
	// owner's kind cannot be read from a cache (not followed yet, not
	// listable).
	Owner(ctx context.Context, namespace string, ref metav1.OwnerReference) (obj metav1.Object, found bool, err error)
}

// releaseKey names a HelmRelease.
type releaseKey struct{ Namespace, Name string }

func (k releaseKey) String() string { return k.Namespace + "/" + k.Name }

// lineage is what the walk found: the HelmReleases the object belongs to
// and the links it could not follow.
type lineage struct {
	Releases   []releaseKey
	Unresolved []string
	// Err is a link that could lead to a release and cannot be followed
	// (no owner kind left to follow): the walk cannot be judged on the rest.
	Err error
}

// walkLineage follows ownerReferences up from obj (in namespace) to the
// objects that have no owner, and reads Flux's labels there. Every owner
// reference is followed, so an object with two owning releases yields both.
// The walk is cycle-safe (each owner visited once) and depth-bounded.
func walkLineage(ctx context.Context, namespace string, obj metav1.Object, o owners) lineage {
	type step struct {
		obj   metav1.Object
		depth int
	}
	var out lineage
	seen := map[string]bool{}
	found := map[releaseKey]bool{}
	queue := []step{{obj, 0}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		refs := s.obj.GetOwnerReferences()
		if len(refs) == 0 {
			if key, ok := fluxRelease(namespace, s.obj); ok && !found[key] {
				found[key] = true
				out.Releases = append(out.Releases, key)
			}
			continue
		}
		if s.depth >= maxLineageDepth {
			out.Unresolved = append(out.Unresolved, fmt.Sprintf("ownership deeper than %d levels at %s", maxLineageDepth, s.obj.GetName()))
			continue
		}
		for _, ref := range refs {
			id := ref.APIVersion + "/" + ref.Kind + "/" + ref.Name + "/" + string(ref.UID)
			if seen[id] {
				continue
			}
			seen[id] = true
			owner, ok, err := o.Owner(ctx, namespace, ref)
			switch {
			case errors.Is(err, errOwnerKindsExhausted):
				if out.Err == nil {
					out.Err = fmt.Errorf("%s %s: %w", ref.Kind, ref.Name, err)
				}
			case err != nil:
				out.Unresolved = append(out.Unresolved, fmt.Sprintf("%s %s: %v", ref.Kind, ref.Name, err))
			case !ok:
				out.Unresolved = append(out.Unresolved, fmt.Sprintf("%s %s is not in the cache", ref.Kind, ref.Name))
			case ref.UID != "" && owner.GetUID() != ref.UID:
				// A namesake replaced the owner: this one owns nothing here.
				out.Unresolved = append(out.Unresolved, fmt.Sprintf("%s %s has another UID than the reference", ref.Kind, ref.Name))
			default:
				queue = append(queue, step{owner, s.depth + 1})
			}
		}
	}
	sort.Slice(out.Releases, func(i, j int) bool { return out.Releases[i].String() < out.Releases[j].String() })
	return out
}

// fluxRelease reads the release Flux labelled an object with, in the
// object's own namespace only, as Cozystack's lineage webhook does. The
// labels are the object's writer's: anyone who may create a Pod in a
// namespace writes helm.toolkit.fluxcd.io/namespace at will, and a release
// followed there would be read, and named with its class and node
// constraint in the Pod's denial and its namespace's PolicyReport, for a
// tenant who may not read it. So an object whose namespace label names
// another namespace names no release here (unlike Cozystack, which looks up
// the name in the object's namespace whatever the label says, and so may
// take a namesake for the release that rendered the object).
// Applications' releases render into their own namespace.
func fluxRelease(namespace string, obj metav1.Object) (releaseKey, bool) {
	labels := obj.GetLabels()
	name := labels[fluxNameLabel]
	if name == "" {
		return releaseKey{}, false
	}
	if ns := labels[fluxNamespaceLabel]; ns != "" && ns != namespace {
		return releaseKey{}, false
	}
	return releaseKey{Namespace: namespace, Name: name}, true
}
