package admissionload

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Teardown deletes every fixture Setup may have created, for all modules,
// and waits until they are gone: a cluster that goes on serving other
// tests must not keep a configcheck config watching every namespace's
// Ingresses, a class, a NodeGroup or claims that were the load's. Call it
// once no Gatehouse serves the cluster any more, or pvsafe refuses to let
// the claims go.
func Teardown(ctx context.Context, c client.Client) error {
	var objs []client.Object
	for _, ns := range []string{pvsafeNamespace, tenantNamespace, lbNamespace, appNamespace} {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for _, claim := range []string{"risky", "kept"} {
		objs = append(objs, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "load-pv-" + claim}})
	}
	for gvk, name := range map[schema.GroupVersionKind]string{
		{Group: "cozystack.io", Version: "v1alpha1", Kind: "AffinityClass"}: affinityClass,
		{Group: "deckhouse.io", Version: "v1", Kind: "NodeGroup"}:           storedNodeGroup,
	} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetName(name)
		objs = append(objs, u)
	}
	var errs []error
	for _, obj := range objs {
		// A kind whose CRD was never installed has no fixture to delete.
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			errs = append(errs, fmt.Errorf("delete %T %s: %w", obj, obj.GetName(), err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return poll(ctx, 3*time.Minute, func() error {
		for _, obj := range objs {
			err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if err == nil {
				return fmt.Errorf("%T %s is not gone yet", obj, obj.GetName())
			}
			if !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
				return err
			}
		}
		return nil
	})
}
