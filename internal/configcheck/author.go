package configcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// A config is read and published on its author's behalf long after it was
// written: a namespace its namespaceSelector selects may be created or
// labelled a month later, and whether its objects may be rendered is a
// question about the author, asked then (access.go). So the author is
// recorded on the config, in AuthorAnnotation, as the API server named
// them: the userInfo of the admission request that last wrote the spec.
//
// Why a tenant cannot forge it:
//   - the value stored is always the one the author webhook (mutating,
//     failurePolicy Fail) put there, and the API server calls that webhook
//     with the identity it authenticated: on a CREATE or a spec change, the
//     writer; on any other UPDATE (labels, annotations, finalizers), the
//     stored record, so a label change by an administrator does not lend
//     the config the administrator's rights;
//   - the config webhook, which runs after every mutating webhook,
//     refuses a write whose record is not that (a mutating webhook after
//     Gatehouse's, or a configuration without the author webhook);
//   - a review posted straight to the port gets a patch back and stores
//     nothing.
//
// managedFields would not do: their manager is whatever name the client
// sends. A config stored without a record (written while Gatehouse's
// webhooks did not run) has no author to ask about: it renders nothing
// until its author next writes its spec.

// AuthorAnnotation records a config's author (authenticationv1.UserInfo as
// JSON). Gatehouse writes it; a value a client writes is replaced.
const AuthorAnnotation = "configcheck.gatehouse.dev/author"

// Webhook identity of the author record.
const (
	AuthorWebhookName = "configcheck-author.gatehouse.dev"
	AuthorWebhookPath = "/mutate-configcheck-haproxytemplateconfig-author"
)

// configWrites are the rules of the config's own webhooks: every
// HAProxyTemplateConfig written.
func configWrites() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{gatehousev1alpha1.GroupVersion.Group}, APIVersions: []string{gatehousev1alpha1.GroupVersion.Version},
			Resources: []string{"haproxytemplateconfigs"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
}

// authorWebhook records the author. failurePolicy Fail: a config stored
// without the record renders nothing, and configs are rare platform
// objects.
func (m *Module) authorWebhook() module.Webhook {
	return module.Webhook{
		Name: AuthorWebhookName, Path: AuthorWebhookPath, Type: module.Mutating,
		Rules:          configWrites(),
		FailurePolicy:  admissionregistrationv1.Fail,
		SideEffects:    admissionregistrationv1.SideEffectClassNone,
		TimeoutSeconds: 5,
		Admit:          m.admitAuthor,
		Locked: module.Locked{
			FailurePolicy: "the author record decides whose rights a config reads with: a config stored without it would render nothing",
		},
	}
}

// admitAuthor sets the author record: the writer's identity on a CREATE or
// a spec change, else the stored record (none when there is none).
func (m *Module) admitAuthor(_ context.Context, req admission.Request) admission.Response {
	cfg := &gatehousev1alpha1.HAProxyTemplateConfig{}
	if err := utiljson.Unmarshal(req.Object.Raw, cfg); err != nil {
		return module.Deny(reasonInvalidConfig, "failed to parse object: "+err.Error())
	}
	want, err := wantedAuthor(req)
	if err != nil {
		return module.Deny(reasonInvalidConfig, err.Error())
	}
	if cfg.Annotations[AuthorAnnotation] == want {
		return admission.Allowed("")
	}
	switch {
	case want == "":
		delete(cfg.Annotations, AuthorAnnotation)
	case cfg.Annotations == nil:
		cfg.Annotations = map[string]string{AuthorAnnotation: want}
	default:
		cfg.Annotations[AuthorAnnotation] = want
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		return module.Undecided("configcheck: " + err.Error())
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

// wantedAuthor is the record req's object must carry.
func wantedAuthor(req admission.Request) (string, error) {
	if req.Operation == admissionv1.Update {
		cfg, old := &gatehousev1alpha1.HAProxyTemplateConfig{}, &gatehousev1alpha1.HAProxyTemplateConfig{}
		if err := utiljson.Unmarshal(req.Object.Raw, cfg); err != nil {
			return "", errors.New("failed to parse object: " + err.Error())
		}
		if err := utiljson.Unmarshal(req.OldObject.Raw, old); err != nil {
			return "", errors.New("failed to parse old object: " + err.Error())
		}
		if equality.Semantic.DeepEqual(old.Spec, cfg.Spec) {
			// Whoever adds a label or a finalizer (an administrator, the
			// garbage collector) does not lend the config their rights;
			// a config stored without a record keeps none.
			return old.Annotations[AuthorAnnotation], nil
		}
	}
	return encodeAuthor(req.UserInfo), nil
}

func encodeAuthor(u authenticationv1.UserInfo) string {
	b, _ := json.Marshal(u)
	return string(b)
}

// checkAuthorRecord is the config webhook's check of the record; "" when
// it is the one the author webhook sets.
func checkAuthorRecord(req admission.Request, cfg *gatehousev1alpha1.HAProxyTemplateConfig) (string, error) {
	want, err := wantedAuthor(req)
	if err != nil {
		return "", err
	}
	if cfg.Annotations[AuthorAnnotation] != want {
		return fmt.Sprintf("metadata.annotations[%s] is Gatehouse's record of whoever last wrote the spec, and this write does not carry the record Gatehouse sets (is the webhook %s registered?)", AuthorAnnotation, AuthorWebhookName), nil
	}
	return "", nil
}

// authorOf reads a stored config's author record; ok is false when there is
// none or it does not parse.
func authorOf(cfg *gatehousev1alpha1.HAProxyTemplateConfig) (authenticationv1.UserInfo, bool) {
	var u authenticationv1.UserInfo
	raw := cfg.Annotations[AuthorAnnotation]
	if raw == "" || json.Unmarshal([]byte(raw), &u) != nil || (u.Username == "" && len(u.Groups) == 0) {
		return authenticationv1.UserInfo{}, false
	}
	return u, true
}
