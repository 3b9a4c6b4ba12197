package spec

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
)

// The module follows two kinds of config, both HAProxyTemplateConfig:
// Gatehouse's own (gatehouse.dev), whose status it writes and whose
// renderings it publishes, and haptic's (haproxy-haptic.org), where
// haptic's CRD is served: haptic's controller owns that kind's status and
// deploys its renderings, and Gatehouse judges what the writes of watched
// resources would make of them, with the same confinement, author rights,
// tenant fairness and redaction as for its own kind. Everything past the
// decoding reads a config through Object.

// Kind names a config kind by its API group.
type Kind string

const (
	GatehouseKind Kind = "gatehouse.dev"
	HapticKind    Kind = "haproxy-haptic.org"
)

// Key names one config: two kinds may hold a config of the same
// namespace and name.
type Key struct {
	Kind Kind
	types.NamespacedName
}

// GatehouseKey is the key of Gatehouse's config namespace/name.
func GatehouseKey(nn types.NamespacedName) Key {
	return Key{Kind: GatehouseKind, NamespacedName: nn}
}

// String is namespace/name for Gatehouse's kind, followed by the group
// for haptic's: what logs, readiness, fair shares and messages name.
func (k Key) String() string {
	if k.Kind == HapticKind {
		return k.NamespacedName.String() + " (" + string(HapticKind) + ")"
	}
	return k.NamespacedName.String()
}

// untilFixed says what a rendering that fails holds back until cond: a
// Gatehouse config publishes nothing (its condition Published says so,
// when withCondition); a haptic config's rendering is haptic's
// controller's to deploy, which it does not while it fails.
func (k Key) UntilFixed(cond string, withCondition bool) string {
	if k.Kind == HapticKind {
		return "haptic's controller does not deploy its rendering until " + cond
	}
	if withCondition {
		return "nothing is published until " + cond + " (condition Published)"
	}
	return "nothing is published until " + cond
}

// MarshalLog is the embedded NamespacedName's form for Gatehouse's kind
// (as logged before haptic's kind was followed), with the group for
// haptic's: the NamespacedName's own would drop the kind.
func (k Key) MarshalLog() any {
	if k.Kind == HapticKind {
		return struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			Group     string `json:"group"`
		}{k.Name, k.Namespace, string(k.Kind)}
	}
	return k.NamespacedName.MarshalLog()
}

// request is k as a controller's workqueue item. A haptic config's name
// carries its group before a slash, which no object's name holds, so that
// the items of the two kinds never meet.
func (k Key) Request() reconcile.Request {
	nn := k.NamespacedName
	if k.Kind == HapticKind {
		nn.Name = string(HapticKind) + "/" + nn.Name
	}
	return reconcile.Request{NamespacedName: nn}
}

// KeyOfRequest reads a workqueue item back (request).
func KeyOfRequest(req reconcile.Request) Key {
	if name, ok := strings.CutPrefix(req.Name, string(HapticKind)+"/"); ok {
		return Key{Kind: HapticKind, NamespacedName: types.NamespacedName{Namespace: req.Namespace, Name: name}}
	}
	return GatehouseKey(req.NamespacedName)
}

// Object is a stored or written config of either kind.
type Object interface {
	client.Object
	ConfigKind() Kind
	// compileWith compiles the spec as the cluster reads it.
	CompileWith(compile TemplateCompiler) (*Compiled, field.ErrorList)
	// sameSpec says whether other, of the same kind, has the same spec.
	SameSpec(other Object) bool
	// publishesSecrets says whether its renderings include certificates,
	// published as Secrets (the author must be allowed to write them).
	PublishesSecrets() bool
	// object is the typed API object.
	Typed() client.Object
}

// KeyOf is obj's key.
func KeyOf(obj Object) Key {
	return Key{Kind: obj.ConfigKind(), NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
}

// GatehouseConfig is Gatehouse's kind as an Object.
type GatehouseConfig struct {
	*gatehousev1alpha1.HAProxyTemplateConfig
}

func (c GatehouseConfig) ConfigKind() Kind     { return GatehouseKind }
func (c GatehouseConfig) Typed() client.Object { return c.HAProxyTemplateConfig }
func (c GatehouseConfig) CompileWith(compile TemplateCompiler) (*Compiled, field.ErrorList) {
	return Compile(&c.Spec, compile)
}
func (c GatehouseConfig) PublishesSecrets() bool { return len(c.Spec.SSLCertificates) > 0 }
func (c GatehouseConfig) SameSpec(other Object) bool {
	o, ok := other.(GatehouseConfig)
	return ok && equality.Semantic.DeepEqual(c.Spec, o.Spec)
}

// HapticConfig is haptic's kind as an Object. Gatehouse publishes
// nothing of it (haptic's controller deploys its renderings), so nothing
// is written on its author's behalf.
type HapticConfig struct {
	*hapticv1alpha1.HAProxyTemplateConfig
}

func (c HapticConfig) ConfigKind() Kind     { return HapticKind }
func (c HapticConfig) Typed() client.Object { return c.HAProxyTemplateConfig }
func (c HapticConfig) CompileWith(compile TemplateCompiler) (*Compiled, field.ErrorList) {
	return CompileHaptic(&c.Spec, compile)
}
func (c HapticConfig) PublishesSecrets() bool { return false }
func (c HapticConfig) SameSpec(other Object) bool {
	o, ok := other.(HapticConfig)
	return ok && equality.Semantic.DeepEqual(c.Spec, o.Spec)
}

// NewObject is an empty config of kind, for reading one into.
func NewObject(kind Kind) (Object, error) {
	switch kind {
	case GatehouseKind:
		return GatehouseConfig{&gatehousev1alpha1.HAProxyTemplateConfig{}}, nil
	case HapticKind:
		return HapticConfig{&hapticv1alpha1.HAProxyTemplateConfig{}}, nil
	}
	return nil, fmt.Errorf("%q is not a kind of config configcheck follows (%s, %s)", kind, GatehouseKind, HapticKind)
}

// requestKind is the kind of config an admission request writes. The API
// server names it; a review without a kind (posted to the port by hand) is
// read as Gatehouse's, as before haptic's kind was followed.
func requestKind(req admission.Request) Kind {
	if req.Kind.Group != "" {
		return Kind(req.Kind.Group)
	}
	return GatehouseKind
}

// decodeConfig reads raw as a config of kind.
func decodeConfig(kind Kind, raw []byte) (Object, error) {
	obj, err := NewObject(kind)
	if err != nil {
		return nil, err
	}
	if err := utiljson.Unmarshal(raw, obj.Typed()); err != nil {
		return nil, err
	}
	return obj, nil
}

// DecodeRequest reads the config req writes.
func DecodeRequest(req admission.Request) (Object, error) {
	cfg, err := decodeConfig(requestKind(req), req.Object.Raw)
	if err != nil {
		return nil, errors.New("failed to parse object: " + err.Error())
	}
	return cfg, nil
}

// DecodeOld reads the config an UPDATE replaces.
func DecodeOld(req admission.Request) (Object, error) {
	cfg, err := decodeConfig(requestKind(req), req.OldObject.Raw)
	if err != nil {
		return nil, errors.New("failed to parse old object: " + err.Error())
	}
	return cfg, nil
}

// RenderedConfigMapName and RenderedSecretName name the objects a config of
// Gatehouse's kind publishes its rendering to, in its namespace.
func RenderedConfigMapName(config string) string { return config + "-haproxy" }
func RenderedSecretName(config string) string    { return config + "-haproxy-certs" }
