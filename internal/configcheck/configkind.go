package configcheck

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
// decoding reads a config through configObject.

// configKind names a config kind by its API group.
type configKind string

const (
	gatehouseKind configKind = "gatehouse.dev"
	hapticKind    configKind = "haproxy-haptic.org"
)

// configKey names one config: two kinds may hold a config of the same
// namespace and name.
type configKey struct {
	kind configKind
	types.NamespacedName
}

// gatehouseKey is the key of Gatehouse's config namespace/name.
func gatehouseKey(nn types.NamespacedName) configKey {
	return configKey{kind: gatehouseKind, NamespacedName: nn}
}

// String is namespace/name for Gatehouse's kind, followed by the group
// for haptic's: what logs, readiness, fair shares and messages name.
func (k configKey) String() string {
	if k.kind == hapticKind {
		return k.NamespacedName.String() + " (" + string(hapticKind) + ")"
	}
	return k.NamespacedName.String()
}

// untilFixed says what a rendering that fails holds back until cond: a
// Gatehouse config publishes nothing (its condition Published says so,
// when withCondition); a haptic config's rendering is haptic's
// controller's to deploy, which it does not while it fails.
func (k configKey) untilFixed(cond string, withCondition bool) string {
	if k.kind == hapticKind {
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
func (k configKey) MarshalLog() any {
	if k.kind == hapticKind {
		return struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			Group     string `json:"group"`
		}{k.Name, k.Namespace, string(k.kind)}
	}
	return k.NamespacedName.MarshalLog()
}

// request is k as a controller's workqueue item. A haptic config's name
// carries its group before a slash, which no object's name holds, so that
// the items of the two kinds never meet.
func (k configKey) request() reconcile.Request {
	nn := k.NamespacedName
	if k.kind == hapticKind {
		nn.Name = string(hapticKind) + "/" + nn.Name
	}
	return reconcile.Request{NamespacedName: nn}
}

// configKeyOf reads a workqueue item back (request).
func configKeyOf(req reconcile.Request) configKey {
	if name, ok := strings.CutPrefix(req.Name, string(hapticKind)+"/"); ok {
		return configKey{kind: hapticKind, NamespacedName: types.NamespacedName{Namespace: req.Namespace, Name: name}}
	}
	return gatehouseKey(req.NamespacedName)
}

// configObject is a stored or written config of either kind.
type configObject interface {
	client.Object
	kind() configKind
	// compileWith compiles the spec as the cluster reads it.
	compileWith(compile templateCompiler) (*compiled, field.ErrorList)
	// sameSpec says whether other, of the same kind, has the same spec.
	sameSpec(other configObject) bool
	// publishesSecrets says whether its renderings include certificates,
	// published as Secrets (the author must be allowed to write them).
	publishesSecrets() bool
	// object is the typed API object.
	object() client.Object
}

// keyOf is obj's key.
func keyOf(obj configObject) configKey {
	return configKey{kind: obj.kind(), NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
}

// gatehouseConfig is Gatehouse's kind as a configObject.
type gatehouseConfig struct {
	*gatehousev1alpha1.HAProxyTemplateConfig
}

func (c gatehouseConfig) kind() configKind      { return gatehouseKind }
func (c gatehouseConfig) object() client.Object { return c.HAProxyTemplateConfig }
func (c gatehouseConfig) compileWith(compile templateCompiler) (*compiled, field.ErrorList) {
	return compileConfig(&c.Spec, compile)
}
func (c gatehouseConfig) publishesSecrets() bool { return len(c.Spec.SSLCertificates) > 0 }
func (c gatehouseConfig) sameSpec(other configObject) bool {
	o, ok := other.(gatehouseConfig)
	return ok && equality.Semantic.DeepEqual(c.Spec, o.Spec)
}

// hapticConfig is haptic's kind as a configObject. Gatehouse publishes
// nothing of it (haptic's controller deploys its renderings), so nothing
// is written on its author's behalf.
type hapticConfig struct {
	*hapticv1alpha1.HAProxyTemplateConfig
}

func (c hapticConfig) kind() configKind      { return hapticKind }
func (c hapticConfig) object() client.Object { return c.HAProxyTemplateConfig }
func (c hapticConfig) compileWith(compile templateCompiler) (*compiled, field.ErrorList) {
	return compileHapticConfig(&c.Spec, compile)
}
func (c hapticConfig) publishesSecrets() bool { return false }
func (c hapticConfig) sameSpec(other configObject) bool {
	o, ok := other.(hapticConfig)
	return ok && equality.Semantic.DeepEqual(c.Spec, o.Spec)
}

// newConfigObject is an empty config of kind, for reading one into.
func newConfigObject(kind configKind) (configObject, error) {
	switch kind {
	case gatehouseKind:
		return gatehouseConfig{&gatehousev1alpha1.HAProxyTemplateConfig{}}, nil
	case hapticKind:
		return hapticConfig{&hapticv1alpha1.HAProxyTemplateConfig{}}, nil
	}
	return nil, fmt.Errorf("%q is not a kind of config configcheck follows (%s, %s)", kind, gatehouseKind, hapticKind)
}

// requestKind is the kind of config an admission request writes. The API
// server names it; a review without a kind (posted to the port by hand) is
// read as Gatehouse's, as before haptic's kind was followed.
func requestKind(req admission.Request) configKind {
	if req.Kind.Group != "" {
		return configKind(req.Kind.Group)
	}
	return gatehouseKind
}

// decodeConfig reads raw as a config of kind.
func decodeConfig(kind configKind, raw []byte) (configObject, error) {
	obj, err := newConfigObject(kind)
	if err != nil {
		return nil, err
	}
	if err := utiljson.Unmarshal(raw, obj.object()); err != nil {
		return nil, err
	}
	return obj, nil
}

// decodeRequestConfig reads the config req writes.
func decodeRequestConfig(req admission.Request) (configObject, error) {
	cfg, err := decodeConfig(requestKind(req), req.Object.Raw)
	if err != nil {
		return nil, errors.New("failed to parse object: " + err.Error())
	}
	return cfg, nil
}

// decodeOldConfig reads the config an UPDATE replaces.
func decodeOldConfig(req admission.Request) (configObject, error) {
	cfg, err := decodeConfig(requestKind(req), req.OldObject.Raw)
	if err != nil {
		return nil, errors.New("failed to parse old object: " + err.Error())
	}
	return cfg, nil
}
