package configcheck

import (
	"context"
	"encoding/json"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/guard"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/ondemand"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// onDemandFetcher fetches for a config whose author is author (hasAuthor
// false: nobody's, so nothing is fetched): after a SubjectAccessReview of
// the author's get, a live read by Gatehouse.
func (m *Module) onDemandFetcher(author authenticationv1.UserInfo, hasAuthor bool) ondemand.Fetch {
	return func(ctx context.Context, w *spec.Watched, namespace, name string) (map[string]any, error) {
		if !hasAuthor || namespace == "" || name == "" {
			return nil, nil
		}
		gvk, _, err := m.resolve(w.GVR)
		if err != nil {
			return nil, nil // a kind not served holds nothing
		}
		may, err := m.access.Reviewer(author)(ctx, authz.Question{Verb: "get", Group: w.GVR.Group, Resource: w.GVR.Resource, Namespace: namespace, Name: name})
		if err != nil {
			return nil, err
		}
		if !may {
			return nil, nil
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		err = m.host.APIReader().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case apierrors.IsForbidden(err):
			m.onDemandForbidden.Do(func() {
				logf.FromContext(ctx).Error(err, "configcheck: Gatehouse may not get the objects of an on-demand watched resource, so templates find none; grant get on it (the chart's modules.configcheck.onDemandResources)",
					"resource", w.GVR.String())
			})
			return nil, nil
		case err != nil:
			return nil, err
		}
		if raw, err := json.Marshal(obj.Object); err != nil || guard.Exceeds(w.Bounds, guard.MeasureRaw(raw)) {
			return nil, nil // as a watched store refuses it
		}
		return w.Stored(obj.Object), nil
	}
}
