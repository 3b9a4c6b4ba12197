package configcheck

import (
	"context"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// The questions a config's author must answer (authz) asked of this
// cluster: live SubjectAccessReviews, discovery, the namespace cache.

// subjectAccessReview asks the API server about user's rights. A live call,
// on purpose: an authorization decision cannot come from a cache. RBAC is
// one authorizer among several (Node, webhooks, ABAC), and only the API
// server combines them; RoleBindings in a cache would miss all but RBAC,
// and aggregated ClusterRoles and groups besides.
func (m *Module) subjectAccessReview(user authenticationv1.UserInfo) authz.Reviewer {
	return func(ctx context.Context, q authz.Question) (bool, error) {
		allowed, err := module.Allowed(ctx, m.host.Client(), authz.Review(user, q))
		if err != nil {
			return false, fmt.Errorf("SubjectAccessReview (%s %s in %q): %w", q.Verb, q.Target(), q.Namespace, err)
		}
		return allowed, nil
	}
}

// accessTargets resolves the watched resources through discovery, so that
// the authorizer is asked about the resource's own plural (a config may
// write "Secret"; RBAC rules name "secrets") and its scope.
func (m *Module) accessTargets(c *spec.Compiled) map[string]authz.Target {
	out := make(map[string]authz.Target, len(c.Watched))
	for name, w := range c.Watched {
		t := authz.Target{Group: w.GVR.Group, Resource: strings.ToLower(w.GVR.Resource)}
		if gvk, scoped, err := m.resolve(w.GVR); err == nil {
			if mapping, err := m.host.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
				t = authz.Target{Group: mapping.Resource.Group, Resource: mapping.Resource.Resource, ClusterScoped: scoped, Known: true}
			}
		}
		out[name] = t
	}
	return out
}

// selectedNamespaces are the namespaces sel selects now, from the
// namespace cache.
func (m *Module) selectedNamespaces(ctx context.Context, sel labels.Selector) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := m.namespaces.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list.Items))
	for _, ns := range list.Items {
		out = append(out, ns.Name)
	}
	return out, nil
}

// authorizeAuthor checks that the request's user holds the rights config
// key (compiled as c) exercises; see the top of this file. It returns the
// refusal, or an error when the question could not be answered in time.
func (m *Module) authorizeAuthor(ctx context.Context, user authenticationv1.UserInfo, key spec.Key, c *spec.Compiled, certs bool) (string, error) {
	if user.Username == "" && len(user.Groups) == 0 {
		// The API server always names the requester; a review without one
		// was posted to the port by someone else, whose rights are unknown.
		return "the request names no user: a config is judged with its author's rights, and this one has no author", nil
	}
	reqs := authz.Requirements(key, c, m.accessTargets(c), certs)
	return authz.Authorize(ctx, user.Username, reqs, m.access.Reviewer(user), m.selectedNamespaces)
}
