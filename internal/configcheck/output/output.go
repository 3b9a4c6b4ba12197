package output

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// Keys and names of the published rendering.
const (
	configMapConfigKey = "haproxy.cfg"
	mapKeyPrefix       = "map."
	fileKeyPrefix      = "file."
	ChecksumAnnotation = "gatehouse.dev/checksum"
	ConfigLabel        = "gatehouse.dev/haproxytemplateconfig"
)

// managedByLabel marks what Gatehouse wrote; with the config's controller
// reference it makes a published object the config's.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// NotOwnedError: an object of a published name exists and is not the
// config's, so nothing was written.
type NotOwnedError struct {
	Kind, Namespace, Name string
	Why                   string
}

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("%s %s/%s already exists and is not this config's (%s): Gatehouse does not write to or adopt it, so nothing is published; delete or rename that %s, or rename the config",
		e.Kind, e.Namespace, e.Name, e.Why, e.Kind)
}

// NotOwned says why obj is not the config's output, "" when it is: it must
// be controlled by this very config (its UID: a config deleted and made
// again under the name is another one) and labelled as Gatehouse's. An
// object someone else made under the name (before the config, or to take
// its place) is theirs: writing it would overwrite their data, and owning
// it would let the garbage collector delete it with the config.
func NotOwned(obj metav1.Object, cfg *gatehousev1alpha1.HAProxyTemplateConfig) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	switch {
	case ref == nil:
		return "it has no controller ownerReference"
	case ref.UID != cfg.UID || ref.Kind != "HAProxyTemplateConfig" || ref.APIVersion != gatehousev1alpha1.GroupVersion.String():
		return fmt.Sprintf("its controller is %s %s (uid %s), not HAProxyTemplateConfig %s (uid %s)", ref.Kind, ref.Name, ref.UID, cfg.Name, cfg.UID)
	case obj.GetLabels()[ManagedByLabel] != "gatehouse":
		return "it lacks the label " + ManagedByLabel + "=gatehouse"
	}
	return ""
}

// maxPublishedBytes is what the API server accepts in one ConfigMap or
// Secret: the sum of the sizes of its values (core/v1's MaxSecretSize, which
// the ConfigMap's validation applies too). A rendering over it is refused
// before anything is written, rather than found when the write fails.
const maxPublishedBytes = corev1.MaxSecretSize

// Data is a rendering as it is written: the ConfigMap's data, and the
// Secret's (nil without certificates).
type Data struct {
	ConfigMap map[string]string
	Secret    map[string][]byte
}

// Of is out as it is published.
func Of(out render.Output) Data {
	p := Data{ConfigMap: map[string]string{configMapConfigKey: out.HAProxyConfig}}
	for name, text := range out.Maps {
		p.ConfigMap[mapKeyPrefix+name] = text
	}
	for name, text := range out.Files {
		p.ConfigMap[fileKeyPrefix+name] = text
	}
	if len(out.Certs) > 0 {
		p.Secret = map[string][]byte{}
		for name, text := range out.Certs {
			p.Secret[name] = []byte(text)
		}
	}
	return p
}

// TooLargeError: the rendering does not fit in the object that would hold
// it, so nothing was written.
type TooLargeError struct {
	Kind, namespace, Name string
	Size                  int
	// largest are the object's biggest keys with their sizes, largest first.
	largest []keySize
}

type keySize struct {
	key  string
	size int
}

func (e *TooLargeError) Error() string {
	parts := make([]string, 0, len(e.largest))
	for _, k := range e.largest {
		parts = append(parts, fmt.Sprintf("%s %d bytes", k.key, k.size))
	}
	return fmt.Sprintf("the rendering does not fit in %s %s/%s: its keys hold %d bytes (%s), over the %d bytes the API server accepts in one %s; "+
		"nothing was written and the last accepted rendering stays published. Split the config into several that each render less (for example one per group of namespaces, with each watched resource's namespaceSelector)",
		e.Kind, e.namespace, e.Name, e.Size, strings.Join(parts, ", "), maxPublishedBytes, e.Kind)
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
	return &TooLargeError{Kind: kind, namespace: namespace, Name: name, Size: total, largest: keys}
}

// Fits says whether p can be written: a *tooLargeError naming the object
// that would not hold it.
func (p Data) Fits(namespace, config string) error {
	sizes := make(map[string]int, len(p.ConfigMap))
	for k, v := range p.ConfigMap {
		sizes[k] = len(v)
	}
	if err := tooLarge("ConfigMap", namespace, spec.RenderedConfigMapName(config), sizes); err != nil {
		return err
	}
	sizes = make(map[string]int, len(p.Secret))
	for k, v := range p.Secret {
		sizes[k] = len(v)
	}
	return tooLarge("Secret", namespace, spec.RenderedSecretName(config), sizes)
}
