package kinds

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SelfAccess is an Options.MayListWatch that asks the API server with
// SelfSubjectAccessReviews, which every authenticated identity may create
// (system:basic-user): list and watch, cluster-wide, as the caches that
// follow kinds read them.
func SelfAccess(c client.Client) func(context.Context, schema.GroupVersionResource) (bool, error) {
	return func(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
		for _, verb := range []string{"list", "watch"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
			}}
			if err := c.Create(ctx, review); err != nil {
				return false, fmt.Errorf("SelfSubjectAccessReview (%s %s): %w", verb, gvr.GroupResource(), err)
			}
			if !review.Status.Allowed {
				return false, nil
			}
		}
		return true, nil
	}
}
