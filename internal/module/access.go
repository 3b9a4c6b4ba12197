package module

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AccessReview is the SubjectAccessReview of attrs for the user of an
// admission request, carrying every part of its identity (username, uid,
// groups, extra) so that the authorizers answer for that very user.
func AccessReview(user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) *authorizationv1.SubjectAccessReview {
	var extra map[string]authorizationv1.ExtraValue
	if len(user.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			extra[k] = authorizationv1.ExtraValue(append([]string(nil), v...))
		}
	}
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: append([]string(nil), user.Groups...), Extra: extra,
		ResourceAttributes: &attrs,
	}}
}

// Allowed asks the API server for sar's answer. It is a live call on
// purpose: an authorization cannot come from a cache. RBAC is one
// authorizer among several (Node, webhooks, ABAC), and only the API server
// combines them, with groups and aggregated ClusterRoles.
func Allowed(ctx context.Context, c client.Client, sar *authorizationv1.SubjectAccessReview) (bool, error) {
	if err := c.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}
