package configcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
	hapticv1alpha1 "github.com/gatehouse-dev/gatehouse/api/haproxy-haptic.org/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/webhookconfig"
)

// A config is read and published on its author's behalf long after it was
// written: a namespace its namespaceSelector selects may be created or
// labelled a month later, and whether its objects may be rendered is a
// question about the author, asked then (access.go). So the author is
// recorded on the config, in AuthorAnnotation, as the API server named
// them: the userInfo of the admission request that last wrote the spec.
//
// An annotation is whatever its writer put there, and the author webhook
// does not run everywhere (kube-system, kube-node-lease, Gatehouse's own
// namespace, while configcheck's webhooks are withdrawn or not registered
// yet). So the record is signed by this install (module.Records: an HMAC
// with a key only Gatehouse reads) over the identity and what it is the
// author of, and read only when it verifies:
//
//   - on an UPDATE that changes the spec, the record binds the object's
//     namespace, name, uid and the generation the API server gives the
//     new spec (the stored one + 1: it bumps metadata.generation exactly
//     when anything but metadata and status changes, the CRD having a
//     status subresource). A later spec change makes it stale; another
//     object, with another uid, cannot use it;
//   - on a CREATE, the mutating webhook runs before the API server sets
//     the uid and the creation time (k8s.io/apiserver's create handler
//     admits before registry.Store.create fills them), so the record
//     binds namespace, name, generation 1 and the time it was signed,
//     and is honoured only when the object's creationTimestamp is within
//     creationWindow after it: a replay needs the object deleted and
//     created again under the same name within that window. The first
//     UPDATE of the object binds its record to the uid;
//   - a generateName'd CREATE is refused: the API server picks the name
//     after this webhook, and a record that binds no name could be
//     copied to any config of the namespace;
//   - on any other UPDATE (labels, annotations, finalizers) the stored
//     record is kept, signed again (bound to the uid, with the newest
//     key) when it verifies: a label change by an administrator does not
//     lend the config the administrator's rights. A writer may ask to
//     become the author without changing the spec with ClaimAnnotation
//     (the migration from unsigned records), which the webhook removes.
//
// The config webhook, which runs after every mutating webhook and sees
// the object as it will be stored (uid, generation, creation time set),
// refuses a write whose record does not verify as the reader will verify
// it, so a mutating webhook after Gatehouse's or a missing author webhook
// is told at once rather than found in the status. A config in a
// namespace the webhooks never see publishes nothing whatever it carries
// (excludedNamespace). managedFields would not do: their manager is
// whatever name the client sends.

// AuthorAnnotation records a config's author: authorRecord as JSON, signed
// by this install. Gatehouse writes it; a value a client writes is
// replaced.
const AuthorAnnotation = "configcheck.gatehouse.dev/author"

// ClaimAnnotation, set to any value on an UPDATE, makes the writer the
// config's author without changing its spec (`kubectl annotate hatc NAME
// configcheck.gatehouse.dev/claim-author=yes`): the author webhook records
// them and removes it. Whoever may update the config could become its
// author by writing its spec anyway.
const ClaimAnnotation = "configcheck.gatehouse.dev/claim-author"

// authorPurpose names the record in its signature, by the config's kind:
// no other record signed by this install reads as an author record, and
// the record of one kind's config never reads as the record of another
// kind's config of the same namespace and name. Gatehouse's kind keeps the
// purpose it had before haptic's kind was followed, so that its stored
// records still verify.
func authorPurpose(kind spec.Kind) string {
	if kind == spec.GatehouseKind {
		return "configcheck.gatehouse.dev/author/v1"
	}
	return "configcheck.gatehouse.dev/author/v1/" + string(kind)
}

// creationWindow is how long after a creation record is signed the API
// server may stamp the object's creationTimestamp: every admission webhook
// of the create runs in between (the API server bounds each to 30 s).
// creationSkew allows for the creation time's truncation to the second
// and for clocks of Gatehouse and the API server a little apart.
const (
	creationWindow = 30 * time.Second
	creationSkew   = 5 * time.Second
)

// Webhook identity of the author record.
const (
	AuthorWebhookName = "configcheck-author.gatehouse.dev"
	AuthorWebhookPath = "/mutate-configcheck-haproxytemplateconfig-author"
)

// authorRecord is what AuthorAnnotation holds.
type authorRecord struct {
	User authenticationv1.UserInfo `json:"user"`
	// UID binds the record to one object; "" in a creation record.
	UID types.UID `json:"uid,omitempty"`
	// Generation is the generation of the spec the user wrote.
	Generation int64 `json:"generation"`
	// SignedAt (Unix seconds) dates a creation record.
	SignedAt int64 `json:"signedAt,omitempty"`
	// Sig is the install's signature of claims().
	Sig string `json:"sig"`
}

// claims is what the signature covers: the record and the object it is
// about, whose namespace and name it does not repeat.
func (r authorRecord) claims(namespace, name string) []byte {
	b, _ := json.Marshal(struct {
		Namespace  string                    `json:"namespace"`
		Name       string                    `json:"name"`
		UID        types.UID                 `json:"uid"`
		Generation int64                     `json:"generation"`
		SignedAt   int64                     `json:"signedAt"`
		User       authenticationv1.UserInfo `json:"user"`
	}{namespace, name, r.UID, r.Generation, r.SignedAt, r.User})
	return b
}

// signAuthor signs r for the config of kind namespace/name and encodes it.
func signAuthor(rs module.Records, kind spec.Kind, namespace, name string, r authorRecord) (string, error) {
	r.Sig = rs.Sign(authorPurpose(kind), r.claims(namespace, name))
	if r.Sig == "" {
		return "", errors.New("no key to sign the author record with")
	}
	b, err := json.Marshal(r)
	return string(b), err
}

// excludedNamespace says why a config in namespace is never read: the
// webhooks never see that namespace, so nothing there was judged. "" for
// any other namespace.
func excludedNamespace(namespace, own string) string {
	for _, ns := range append(append([]string(nil), webhookconfig.AlwaysExcluded...), own) {
		if namespace == ns {
			return fmt.Sprintf("configs in namespace %s are never read: Gatehouse's webhooks never see that namespace, so no write there was checked; create the config in a tenant namespace", namespace)
		}
	}
	return ""
}

// verifiedAuthor reads cfg's author record as stored: the author, whether
// it was signed with the current key, or why it is not honoured.
func verifiedAuthor(rs module.Records, own string, cfg spec.Object) (user authenticationv1.UserInfo, current bool, refusal string) {
	if why := excludedNamespace(cfg.GetNamespace(), own); why != "" {
		return user, false, why
	}
	raw, ok := cfg.GetAnnotations()[AuthorAnnotation]
	if !ok || raw == "" {
		return user, false, "the config records no author (" + AuthorAnnotation + "): it was stored while Gatehouse's webhooks did not run"
	}
	var r authorRecord
	if err := json.Unmarshal([]byte(raw), &r); err != nil || r.Sig == "" || (r.User.Username == "" && len(r.User.Groups) == 0) {
		return user, false, "the config's author record (" + AuthorAnnotation + ") is not one this install signed (records written before Gatehouse signed them are not honoured)"
	}
	ok, current = rs.Verify(authorPurpose(cfg.ConfigKind()), r.claims(cfg.GetNamespace(), cfg.GetName()), r.Sig)
	switch {
	case !ok:
		return user, false, "the config's author record (" + AuthorAnnotation + ") is not one this install signed for this config"
	case r.Generation != cfg.GetGeneration():
		return user, false, fmt.Sprintf("the config's author record is of generation %d, and its spec has been written since (generation %d) while Gatehouse's webhooks did not run", r.Generation, cfg.GetGeneration())
	case r.UID != "" && r.UID != cfg.GetUID():
		return user, false, "the config's author record was signed for another object of the same name"
	case r.UID == "":
		created := cfg.GetCreationTimestamp().Time
		signed := time.Unix(r.SignedAt, 0)
		if r.Generation != 1 || signed.Before(created.Add(-creationWindow)) || signed.After(created.Add(creationSkew)) {
			return user, false, "the config's author record was signed for the creation of another object of the same name"
		}
	}
	return r.User, current, ""
}

// claimHint tells whoever reads a config without a valid record how to
// give it one.
const claimHint = "; to record its author, write its spec again or, without changing it, `kubectl annotate haproxytemplateconfig NAME " + ClaimAnnotation + "=yes` as the author (Gatehouse then checks that user's rights)"

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
		Name: AuthorWebhookName, Path: AuthorWebhookPath, Type: module.Mutating,
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

// admitAuthor sets the author record (wantedAuthor) and removes
// ClaimAnnotation.
func (m *Module) admitAuthor(_ context.Context, req admission.Request) admission.Response {
	cfg, err := spec.DecodeRequest(req)
	if err != nil {
		return module.Deny(reasonInvalidConfig, err.Error())
	}
	if req.Operation == admissionv1.Create && cfg.GetName() == "" {
		return module.Deny(reasonInvalidConfig, "a HAProxyTemplateConfig needs metadata.name: its author record binds the name, which the API server picks for generateName only after this webhook")
	}
	want, err := m.wantedAuthor(req, cfg)
	if err != nil {
		return module.Deny(reasonInvalidConfig, err.Error())
	}
	annotations := cfg.GetAnnotations()
	_, claimed := annotations[ClaimAnnotation]
	if annotations[AuthorAnnotation] == want && !claimed {
		return admission.Allowed("")
	}
	out, err := withAuthorRecord(req.Object.Raw, want)
	if err != nil {
		return module.Deny(reasonInvalidConfig, "failed to parse object: "+err.Error())
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

// withAuthorRecord is the object raw with record as its author annotation
// ("" removes it) and without ClaimAnnotation, everything else as it was:
// the object is patched as the client sent it, never through a typed
// struct, which would drop the fields it does not know (a field of a
// newer haptic CRD).
func withAuthorRecord(raw []byte, record string) ([]byte, error) {
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	metadata, _ := obj["metadata"].(map[string]any)
	if metadata == nil {
		metadata = map[string]any{}
		obj["metadata"] = metadata
	}
	annotations, _ := metadata["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
	}
	delete(annotations, ClaimAnnotation)
	if record == "" {
		delete(annotations, AuthorAnnotation)
	} else {
		annotations[AuthorAnnotation] = record
	}
	if len(annotations) == 0 {
		delete(metadata, "annotations")
	} else {
		metadata["annotations"] = annotations
	}
	return json.Marshal(obj)
}

// wantedAuthor is the record req's object must carry: the writer's on a
// CREATE, a spec change or a claim; else the stored one, signed again
// when it verifies ("" when none was stored, the stored value when it
// does not verify: it is honoured nowhere).
func (m *Module) wantedAuthor(req admission.Request, cfg spec.Object) (string, error) {
	rs, kind := m.host.Records(), cfg.ConfigKind()
	if req.Operation != admissionv1.Update {
		return signAuthor(rs, kind, cfg.GetNamespace(), cfg.GetName(), authorRecord{User: req.UserInfo, Generation: 1, SignedAt: time.Now().Unix()})
	}
	old, changed, err := storedAndBumped(req)
	if err != nil {
		return "", err
	}
	if changed {
		return signAuthor(rs, kind, old.GetNamespace(), old.GetName(), authorRecord{User: req.UserInfo, UID: old.GetUID(), Generation: old.GetGeneration() + 1})
	}
	if _, claimed := cfg.GetAnnotations()[ClaimAnnotation]; claimed {
		return signAuthor(rs, kind, old.GetNamespace(), old.GetName(), authorRecord{User: req.UserInfo, UID: old.GetUID(), Generation: old.GetGeneration()})
	}
	// Whoever adds a label or a finalizer (an administrator, the garbage
	// collector) does not lend the config their rights; a config stored
	// without a valid record keeps none.
	user, _, refusal := verifiedAuthor(rs, m.host.Namespace(), old)
	if refusal != "" {
		return old.GetAnnotations()[AuthorAnnotation], nil
	}
	return signAuthor(rs, kind, old.GetNamespace(), old.GetName(), authorRecord{User: user, UID: old.GetUID(), Generation: old.GetGeneration()})
}

// storedAndBumped reads an UPDATE's stored object and says whether the
// write gives it a new generation (generationBumped).
func storedAndBumped(req admission.Request) (spec.Object, bool, error) {
	old, err := spec.DecodeOld(req)
	if err != nil {
		return nil, false, err
	}
	changed, err := generationBumped(req)
	return old, changed, err
}

// generationBumped says whether the API server will give req's object a
// new generation, judged as it judges (customresource's PrepareForUpdate):
// anything but metadata and status differs from the stored object.
func generationBumped(req admission.Request) (bool, error) {
	var obj, old map[string]any
	if err := utiljson.Unmarshal(req.Object.Raw, &obj); err != nil {
		return false, errors.New("failed to parse object: " + err.Error())
	}
	if err := utiljson.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return false, errors.New("failed to parse old object: " + err.Error())
	}
	for _, m := range []map[string]any{obj, old} {
		delete(m, "metadata")
		delete(m, "status")
	}
	return !equality.Semantic.DeepEqual(obj, old), nil
}

// checkAuthorRecord is the config webhook's check of the record on the
// object as it will be stored: "" when it verifies and names whom the
// author webhook records (the writer when the spec changes; on another
// UPDATE the stored author or a claiming writer, or an unchanged record).
func (m *Module) checkAuthorRecord(req admission.Request, cfg spec.Object) (string, error) {
	if excludedNamespace(cfg.GetNamespace(), m.host.Namespace()) != "" {
		// Never sent by the API server; a config stored there is never
		// read whatever it carries.
		return "", nil
	}
	wrong := fmt.Sprintf("metadata.annotations[%s] is Gatehouse's record of whoever last wrote the spec, and this write does not carry the record Gatehouse sets (is the webhook %s registered, and does no later mutating webhook change the spec?)", AuthorAnnotation, AuthorWebhookName)
	rs := m.host.Records()
	var writers []authenticationv1.UserInfo
	if req.Operation == admissionv1.Update {
		old, changed, err := storedAndBumped(req)
		if err != nil {
			return "", err
		}
		if !changed {
			if cfg.GetAnnotations()[AuthorAnnotation] == old.GetAnnotations()[AuthorAnnotation] {
				return "", nil
			}
			if user, _, refusal := verifiedAuthor(rs, m.host.Namespace(), old); refusal == "" {
				writers = append(writers, user)
			}
		}
	}
	writers = append(writers, req.UserInfo)
	user, _, refusal := verifiedAuthor(rs, m.host.Namespace(), cfg)
	if refusal != "" {
		return wrong, nil
	}
	for _, w := range writers {
		if equality.Semantic.DeepEqual(w, user) {
			return "", nil
		}
	}
	return wrong, nil
}

// encodeAuthor is a whole identity as one string, to key answers by.
func encodeAuthor(u authenticationv1.UserInfo) string {
	b, _ := json.Marshal(u)
	return string(b)
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
	record, refusal := renewedAuthorRecord(m.host.Records(), m.host.Namespace(), cfg)
	if record == "" {
		return refusal
	}
	// The author webhook sees an UPDATE that leaves the spec as it is and
	// signs the stored record again itself; where it does not run, this
	// record, Gatehouse's own, is what is stored.
	obj := cfg.Typed()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	annotations := obj.GetAnnotations()
	annotations[AuthorAnnotation] = record
	obj.SetAnnotations(annotations)
	if err := m.host.Client().Patch(ctx, obj, patch); err != nil {
		logf.FromContext(ctx).Info("could not sign the config's author record again with the newest key; it is tried at the next check", "config", st.key, "error", err.Error())
	}
	return ""
}

// renewedAuthorRecord verifies cfg's author record with the keys kept now:
// refusal says why it is not honoured; record is the same record signed
// with the newest key when it verifies with an older one ("" when it
// needs no renewal).
func renewedAuthorRecord(rs module.Records, own string, cfg spec.Object) (record, refusal string) {
	user, current, refusal := verifiedAuthor(rs, own, cfg)
	if refusal != "" || current {
		return "", refusal
	}
	record, err := signAuthor(rs, cfg.ConfigKind(), cfg.GetNamespace(), cfg.GetName(), authorRecord{User: user, UID: cfg.GetUID(), Generation: cfg.GetGeneration()})
	if err != nil {
		return "", ""
	}
	return record, ""
}
