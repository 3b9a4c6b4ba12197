package configcheck

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/authz"
	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// The author webhook records a config's author, and the access controller
// keeps the record signed with the newest key (authz's record: who wrote
// the spec, signed by this install).

// configWrites are the rules of the config's own webhooks: every
// HAProxyTemplateConfig written, of either kind. The API server takes a
// rule for a resource it does not serve (haptic's, where haptic's CRD is
// not installed), and applies it once the resource is served.
func configWrites() []admissionregistrationv1.RuleWithOperations {
	var rules []admissionregistrationv1.RuleWithOperations
	for _, gv := range []schema.GroupVersion{gatehousev1alpha1.GroupVersion, hapticv1alpha1.GroupVersion} {
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{gv.Group}, APIVersions: []string{gv.Version},
				Resources: []string{"haproxytemplateconfigs"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		})
	}
	return rules
}

// configWebhooksLocked are the settings the author and config webhooks
// refuse: a namespace or an object neither sees is one whose records
// nobody checked.
const configWebhooksLocked = "a config the webhooks do not see carries a record nobody checked; configs in the always-excluded namespaces publish nothing"

// authorWebhook records the author. failurePolicy Fail: a config stored
// without the record renders nothing, and configs are rare platform
// objects.
func (m *Module) authorWebhook() module.Webhook {
	return module.Webhook{
		Name: authz.AuthorWebhookName, Path: authz.AuthorWebhookPath, Type: module.Mutating,
		Rules:          configWrites(),
		FailurePolicy:  admissionregistrationv1.Fail,
		SideEffects:    admissionregistrationv1.SideEffectClassNone,
		TimeoutSeconds: 5,
		Admit:          m.admitAuthor,
		Locked: module.Locked{
			FailurePolicy:       "the author record decides whose rights a config reads with: a config stored without it would render nothing",
			ObjectSelector:      configWebhooksLocked,
			NamespaceExclusions: configWebhooksLocked,
		},
	}
}

// admitAuthor sets the author record (authz.WantedRecord) and removes
// ClaimAnnotation.
func (m *Module) admitAuthor(_ context.Context, req admission.Request) admission.Response {
	cfg, err := spec.DecodeRequest(req)
	if err != nil {
		return module.Deny(reasonInvalidConfig, err.Error())
	}
	if req.Operation == admissionv1.Create && cfg.GetName() == "" {
		return module.Deny(reasonInvalidConfig, "a HAProxyTemplateConfig needs metadata.name: its author record binds the name, which the API server picks for generateName only after this webhook")
	}
	want, err := authz.WantedRecord(m.host.Records(), m.host.Namespace(), req, cfg)
	if err != nil {
		return module.Deny(reasonInvalidConfig, err.Error())
	}
	annotations := cfg.GetAnnotations()
	_, claimed := annotations[authz.ClaimAnnotation]
	if annotations[authz.AuthorAnnotation] == want && !claimed {
		return admission.Allowed("")
	}
	out, err := authz.WithRecord(req.Object.Raw, want)
	if err != nil {
		return module.Deny(reasonInvalidConfig, "failed to parse object: "+err.Error())
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

// keepAuthorRecordCurrent verifies st's stored author record again, with
// the keys kept now, and returns why it is no longer honoured ("" while
// it is). A record that verifies with a key that no longer signs is signed
// again with the newest one: keys are dropped a few rotations after they
// stop signing, and a config nobody writes for that long must not lose its
// author for it. The access controller asks at every check (at least every
// AccessRecheck), so a record is renewed long before its key goes.
func (m *Module) keepAuthorRecordCurrent(ctx context.Context, st *configState) string {
	cfg, err := m.storedConfig(ctx, st.key)
	if err != nil || cfg.GetUID() != st.uid || cfg.GetGeneration() != st.generation {
		// Gone or written since: the config's reconciler builds its state
		// again, with the record as it is then.
		return st.noAuthor
	}
	record, refusal := authz.RenewedRecord(m.host.Records(), m.host.Namespace(), cfg)
	if record == "" {
		return refusal
	}
	// The author webhook sees an UPDATE that leaves the spec as it is and
	// signs the stored record again itself; where it does not run, this
	// record, Gatehouse's own, is what is stored.
	obj := cfg.Typed()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	annotations := obj.GetAnnotations()
	annotations[authz.AuthorAnnotation] = record
	obj.SetAnnotations(annotations)
	if err := m.host.Client().Patch(ctx, obj, patch); err != nil {
		logf.FromContext(ctx).Info("could not sign the config's author record again with the newest key; it is tried at the next check", "config", st.key, "error", err.Error())
	}
	return ""
}

// checkAuthorRecord is the config webhook's check of the record
// (authz.CheckRecord) with this install's keys.
func (m *Module) checkAuthorRecord(req admission.Request, cfg spec.Object) (string, error) {
	return authz.CheckRecord(m.host.Records(), m.host.Namespace(), req, cfg)
}

// AuthorAnnotation and ClaimAnnotation are the annotations of a config's
// author record (authz.AuthorAnnotation, authz.ClaimAnnotation).
const (
	AuthorAnnotation = authz.AuthorAnnotation
	ClaimAnnotation  = authz.ClaimAnnotation
)
