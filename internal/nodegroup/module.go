package nodegroup

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha2"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// Names and paths of the module's webhooks.
const (
	CRDName        = "nodegroups.deckhouse.io"
	ConversionName = "nodegroup-conversion.gatehouse.dev"
	ConversionPath = "/convert-nodegroup"
	ValidationName = "nodegroup-policy.gatehouse.dev"
	ValidationPath = "/validate-nodegroup"
)

// The caches list and watch single objects selected by name (RBAC
// resourceNames apply to such requests) and Nodes by label; nothing is read
// with GET, so no get verb is granted. The conversion stanza of the CRD is
// written by Gatehouse's webhook configuration reconciler.
//
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=secrets,resourceNames=d8-cluster-configuration;d8-provider-cluster-configuration,verbs=list;watch
// +kubebuilder:rbac:groups="",namespace=default,resources=endpoints,resourceNames=kubernetes,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups=deckhouse.io,resources=moduleconfigs,resourceNames=global,verbs=list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=nodegroups.deckhouse.io,verbs=get;patch

// Module converts and validates deckhouse.io NodeGroups.
type Module struct {
	conv converter
	val  validator
}

// New returns the nodegroup module.
func New() *Module { return &Module{} }

// Name is "nodegroup".
func (*Module) Name() string { return "nodegroup" }

// AddToScheme registers the three served NodeGroup versions.
func (*Module) AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, v1alpha2.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// ClusterScopedKinds are NodeGroup and ModuleConfig, both cluster-scoped
// (module.ClusterScoper).
func (*Module) ClusterScopedKinds() []schema.GroupKind {
	return []schema.GroupKind{v1.GroupVersion.WithKind("NodeGroup").GroupKind(), moduleConfigGVK.GroupKind()}
}

// Setup builds the caches the checks and the Hybrid conversion read.
func (m *Module) Setup(ctx context.Context, host module.Host) error {
	state, err := newClusterCache(ctx, host)
	if err != nil {
		return fmt.Errorf("cluster state caches: %w", err)
	}
	m.conv.lookup = state
	m.val.state = state
	return host.AddAudit(m.audit(host))
}

// Webhooks declares the conversion webhook and the policy validator.
func (m *Module) Webhooks() []module.Webhook {
	return []module.Webhook{conversionWebhook(&m.conv), validationWebhook(&m.val)}
}
func conversionWebhook(conv *converter) module.Webhook {
	return module.Webhook{
		Name: ConversionName, Path: ConversionPath, Type: module.Conversion,
		CRDs: []string{CRDName}, Convert: conv.Convert,
	}
}

func validationWebhook(val *validator) module.Webhook {
	return module.Webhook{
		Name: ValidationName, Path: ValidationPath, Type: module.Validating,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{v1.GroupVersion.Group}, APIVersions: []string{v1.GroupVersion.Version},
				Resources: []string{"nodegroups"}, Scope: ptr.To(admissionregistrationv1.ClusterScope),
			},
		}},
		FailurePolicy:  admissionregistrationv1.Fail,
		MatchPolicy:    admissionregistrationv1.Equivalent,
		SideEffects:    admissionregistrationv1.SideEffectClassNone,
		TimeoutSeconds: 10,
		Admit:          val.Admit,
		DenialReasons:  denialReasons(),
	}
}
