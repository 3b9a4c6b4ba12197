package configcheck

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// Keys and names of the published rendering.
const (
	configMapConfigKey = "haproxy.cfg"
	mapKeyPrefix       = "map."
	fileKeyPrefix      = "file."
	checksumAnnotation = "gatehouse.dev/checksum"
	configLabel        = "gatehouse.dev/haproxytemplateconfig"
)

// RenderedConfigMapName and RenderedSecretName name a config's published
// rendering (spec's names, which its author's rights are checked for).
func RenderedConfigMapName(config string) string { return spec.RenderedConfigMapName(config) }
func RenderedSecretName(config string) string    { return spec.RenderedSecretName(config) }

// managedByLabel marks what Gatehouse wrote; with the config's controller
// reference it makes a published object the config's.
const managedByLabel = "app.kubernetes.io/managed-by"

// notOwnedError: an object of a published name exists and is not the
// config's, so nothing was written.
type notOwnedError struct {
	kind, namespace, name string
	why                   string
}

func (e *notOwnedError) Error() string {
	return fmt.Sprintf("%s %s/%s already exists and is not this config's (%s): Gatehouse does not write to or adopt it, so nothing is published; delete or rename that %s, or rename the config",
		e.kind, e.namespace, e.name, e.why, e.kind)
}

// notOwned says why obj is not the config's output, "" when it is: it must
// be controlled by this very config (its UID: a config deleted and made
// again under the name is another one) and labelled as Gatehouse's. An
// object someone else made under the name (before the config, or to take
// its place) is theirs: writing it would overwrite their data, and owning
// it would let the garbage collector delete it with the config.
func notOwned(obj metav1.Object, cfg *gatehousev1alpha1.HAProxyTemplateConfig) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	switch {
	case ref == nil:
		return "it has no controller ownerReference"
	case ref.UID != cfg.UID || ref.Kind != "HAProxyTemplateConfig" || ref.APIVersion != gatehousev1alpha1.GroupVersion.String():
		return fmt.Sprintf("its controller is %s %s (uid %s), not HAProxyTemplateConfig %s (uid %s)", ref.Kind, ref.Name, ref.UID, cfg.Name, cfg.UID)
	case obj.GetLabels()[managedByLabel] != "gatehouse":
		return "it lacks the label " + managedByLabel + "=gatehouse"
	}
	return ""
}

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
	if why := notOwned(obj, cfg); why != "" {
		return true, &notOwnedError{kind: kind, namespace: obj.GetNamespace(), name: obj.GetName(), why: why}
	}
	return true, nil
}

// maxPublishedBytes is what the API server accepts in one ConfigMap or
// Secret: the sum of the sizes of its values (core/v1's MaxSecretSize, which
// the ConfigMap's validation applies too). A rendering over it is refused
// before anything is written, rather than found when the write fails.
const maxPublishedBytes = corev1.MaxSecretSize

// publishedData is a rendering as it is written: the ConfigMap's data, and the
// Secret's (nil without certificates).
type publishedData struct {
	configMap map[string]string
	secret    map[string][]byte
}

func publishedOf(out render.Output) publishedData {
	p := publishedData{configMap: map[string]string{configMapConfigKey: out.HAProxyConfig}}
	for name, text := range out.Maps {
		p.configMap[mapKeyPrefix+name] = text
	}
	for name, text := range out.Files {
		p.configMap[fileKeyPrefix+name] = text
	}
	if len(out.Certs) > 0 {
		p.secret = map[string][]byte{}
		for name, text := range out.Certs {
			p.secret[name] = []byte(text)
		}
	}
	return p
}

// tooLargeError: the rendering does not fit in the object that would hold
// it, so nothing was written.
type tooLargeError struct {
	kind, namespace, name string
	size                  int
	// largest are the object's biggest keys with their sizes, largest first.
	largest []keySize
}

type keySize struct {
	key  string
	size int
}

func (e *tooLargeError) Error() string {
	parts := make([]string, 0, len(e.largest))
	for _, k := range e.largest {
		parts = append(parts, fmt.Sprintf("%s %d bytes", k.key, k.size))
	}
	return fmt.Sprintf("the rendering does not fit in %s %s/%s: its keys hold %d bytes (%s), over the %d bytes the API server accepts in one %s; "+
		"nothing was written and the last accepted rendering stays published. Split the config into several that each render less (for example one per group of namespaces, with each watched resource's namespaceSelector)",
		e.kind, e.namespace, e.name, e.size, strings.Join(parts, ", "), maxPublishedBytes, e.kind)
}

// tooLarge returns the error for an object whose values exceed
// maxPublishedBytes, nil when they fit. It names the three largest keys.
func tooLarge(kind, namespace, name string, sizes map[string]int) error {
	total := 0
	keys := make([]keySize, 0, len(sizes))
	for k, n := range sizes {
		total += n
		keys = append(keys, keySize{k, n})
	}
	if total <= maxPublishedBytes {
		return nil
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].size != keys[j].size {
			return keys[i].size > keys[j].size
		}
		return keys[i].key < keys[j].key
	})
	if len(keys) > 3 {
		keys = keys[:3]
	}
	return &tooLargeError{kind: kind, namespace: namespace, name: name, size: total, largest: keys}
}

// fits says whether p can be written: a *tooLargeError naming the object
// that would not hold it.
func (p publishedData) fits(namespace, config string) error {
	sizes := make(map[string]int, len(p.configMap))
	for k, v := range p.configMap {
		sizes[k] = len(v)
	}
	if err := tooLarge("ConfigMap", namespace, RenderedConfigMapName(config), sizes); err != nil {
		return err
	}
	sizes = make(map[string]int, len(p.secret))
	for k, v := range p.secret {
		sizes[k] = len(v)
	}
	return tooLarge("Secret", namespace, RenderedSecretName(config), sizes)
}

// write creates or updates the ConfigMap (and the Secret, when there are
// certificates) holding out, controlled by cfg so that they go with it. A
// rendering either object could not hold is refused first (a
// *tooLargeError): nothing is read or written. An object of either name
// that is not cfg's is left alone, and then neither is written (a
// *notOwnedError): a ConfigMap naming certificates that are not published
// would be no better than the last one. An update keeps what others added
// to the metadata (labels, annotations, ownerReferences), and carries the
// resourceVersion read, so it fails rather than overwrite an object that
// changed hands meanwhile.
func (p *publisher) write(ctx context.Context, cfg *gatehousev1alpha1.HAProxyTemplateConfig, out render.Output, checksum string) (*gatehousev1alpha1.RenderedOutput, error) {
	data := publishedOf(out)
	if err := data.fits(cfg.Namespace, cfg.Name); err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: RenderedConfigMapName(cfg.Name)}}
	cmExists, err := p.existing(ctx, cfg, cm, "ConfigMap")
	if err != nil {
		return nil, err
	}
	var secret *corev1.Secret
	secretExists := false
	if data.secret != nil {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: RenderedSecretName(cfg.Name)}}
		if secretExists, err = p.existing(ctx, cfg, secret, "Secret"); err != nil {
			return nil, err
		}
	}

	p.label(&cm.ObjectMeta, cfg, checksum)
	cm.Data = data.configMap
	if err := p.put(ctx, cfg, cm, cmExists); err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", cm.Name, err)
	}
	output := &gatehousev1alpha1.RenderedOutput{ConfigMapName: cm.Name, Checksum: checksum}
	if secret == nil {
		return output, nil
	}
	p.label(&secret.ObjectMeta, cfg, checksum)
	secret.Data = data.secret
	if err := p.put(ctx, cfg, secret, secretExists); err != nil {
		return nil, fmt.Errorf("Secret %s: %w", secret.Name, err)
	}
	output.SecretName = secret.Name
	return output, nil
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
	obj.Labels[managedByLabel] = "gatehouse"
	obj.Labels[configLabel] = cfg.Name
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[checksumAnnotation] = checksum
}
