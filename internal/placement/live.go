package placement

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cozyv1alpha1 "github.com/gatehouse-dev/gatehouse/api/cozystack.io/v1alpha1"
)

// The live readers answer what the cache readers answer, from the API
// server. They confirm denials only: a denial costs one to three reads, an
// admission none.

type liveTenants struct{ r client.Reader }

func (l liveTenants) get(ctx context.Context, namespace string) (*tenant, error) {
	s := &corev1.Secret{}
	err := l.r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: tenantSecretName}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, tenantSecretName, err)
	}
	return parseTenant(namespace, s.Data[tenantValuesKey]), nil
}

type liveClasses struct{ r client.Reader }

func (l liveClasses) get(ctx context.Context, name string) (*class, bool, error) {
	ac := &cozyv1alpha1.AffinityClass{}
	err := l.r.Get(ctx, client.ObjectKey{Name: name}, ac)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read AffinityClass %s: %w", name, err)
	}
	return classOf(ac), true, nil
}

type liveReleases struct{ r client.Reader }

// get reads as the cache does: a release that is not an application's is
// not found, and so is every release when the Flux API is not served.
func (l liveReleases) get(ctx context.Context, key releaseKey) (*metav1.PartialObjectMetadata, bool, error) {
	m := releaseMetadata()
	err := l.r.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, m)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read HelmRelease %s: %w", key, err)
	}
	if _, ok := m.Labels[applicationKindLabel]; !ok {
		return nil, false, nil
	}
	return m, true, nil
}

func (l liveReleases) usingClass(ctx context.Context, class string) ([]releaseKey, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(releaseGVK.GroupVersion().WithKind("HelmReleaseList"))
	err := l.r.List(ctx, list, client.MatchingLabels{classLabel: class}, client.HasLabels{applicationKindLabel})
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list HelmReleases: %w", err)
	}
	out := make([]releaseKey, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, releaseKey{Namespace: m.Namespace, Name: m.Name})
	}
	return out, nil
}
