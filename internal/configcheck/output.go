package configcheck

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/output"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// RenderedConfigMapName and RenderedSecretName name a config's published
// rendering (spec's names, which its author's rights are checked for).
func RenderedConfigMapName(config string) string { return spec.RenderedConfigMapName(config) }
func RenderedSecretName(config string) string    { return spec.RenderedSecretName(config) }

// existing reads obj by its key, and says whether it exists; one that
// exists must be cfg's. The read is live: Gatehouse caches no ConfigMaps or
// Secrets (that would mean caching every Secret of the cluster), and a
// stale cache would let an update carry an old resourceVersion anyway.
func (p *publisher) existing(ctx context.Context, cfg *gatehousev1alpha1.HAProxyTemplateConfig, obj client.Object, kind string) (bool, error) {
	if err := p.m.host.Client().Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("%s %s: %w", kind, obj.GetName(), err)
	}
	if why := output.NotOwned(obj, cfg); why != "" {
		return true, &output.NotOwnedError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Why: why}
	}
	return true, nil
}

// write creates or updates the ConfigMap (and the Secret, when there are
// certificates) holding out, controlled by cfg so that they go with it. A
// rendering either object could not hold is refused first (a
// *output.TooLargeError): nothing is read or written. An object of either
// name that is not cfg's is left alone, and then neither is written (a
// *output.NotOwnedError): a ConfigMap naming certificates that are not
// published would be no better than the last one. An update keeps what
// others added to the metadata (labels, annotations, ownerReferences), and
// carries the resourceVersion read, so it fails rather than overwrite an
// object that changed hands meanwhile.
func (p *publisher) write(ctx context.Context, cfg *gatehousev1alpha1.HAProxyTemplateConfig, out render.Output, checksum string) (*gatehousev1alpha1.RenderedOutput, error) {
	data := output.Of(out)
	if err := data.Fits(cfg.Namespace, cfg.Name); err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: RenderedConfigMapName(cfg.Name)}}
	cmExists, err := p.existing(ctx, cfg, cm, "ConfigMap")
	if err != nil {
		return nil, err
	}
	var secret *corev1.Secret
	secretExists := false
	if data.Secret != nil {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: RenderedSecretName(cfg.Name)}}
		if secretExists, err = p.existing(ctx, cfg, secret, "Secret"); err != nil {
			return nil, err
		}
	}

	p.label(&cm.ObjectMeta, cfg, checksum)
	cm.Data = data.ConfigMap
	if err := p.put(ctx, cfg, cm, cmExists); err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", cm.Name, err)
	}
	rendered := &gatehousev1alpha1.RenderedOutput{ConfigMapName: cm.Name, Checksum: checksum}
	if secret == nil {
		return rendered, nil
	}
	p.label(&secret.ObjectMeta, cfg, checksum)
	secret.Data = data.Secret
	if err := p.put(ctx, cfg, secret, secretExists); err != nil {
		return nil, fmt.Errorf("Secret %s: %w", secret.Name, err)
	}
	rendered.SecretName = secret.Name
	return rendered, nil
}

// put creates obj, controlled by cfg, or updates it when it exists (it is
// cfg's: existing checked).
func (p *publisher) put(ctx context.Context, cfg *gatehousev1alpha1.HAProxyTemplateConfig, obj client.Object, exists bool) error {
	c := p.m.host.Client()
	if exists {
		return c.Update(ctx, obj)
	}
	if err := controllerutil.SetControllerReference(cfg, obj, c.Scheme()); err != nil {
		return err
	}
	// Created meanwhile by someone else: AlreadyExists, and the next
	// round reads it and judges whose it is.
	return c.Create(ctx, obj)
}

func (p *publisher) label(obj *metav1.ObjectMeta, cfg *gatehousev1alpha1.HAProxyTemplateConfig, checksum string) {
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[output.ManagedByLabel] = "gatehouse"
	obj.Labels[output.ConfigLabel] = cfg.Name
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[output.ChecksumAnnotation] = checksum
}
