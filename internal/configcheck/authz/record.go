package authz

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
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

// AuthorAnnotation records a config's author: Record as JSON, signed
// by this install. Gatehouse writes it; a value a client writes is
// replaced.
const AuthorAnnotation = "configcheck.gatehouse.dev/author"

// ClaimAnnotation, set to any value on an UPDATE, makes the writer the
// config's author without changing its spec (`kubectl annotate hatc NAME
// configcheck.gatehouse.dev/claim-author=yes`): the author webhook records
// them and removes it. Whoever may update the config could become its
// author by writing its spec anyway.
const ClaimAnnotation = "configcheck.gatehouse.dev/claim-author"

// RecordPurpose names the record in its signature, by the config's kind:
// no other record signed by this install reads as an author record, and
// the record of one kind's config never reads as the record of another
// kind's config of the same namespace and name. Gatehouse's kind keeps the
// purpose it had before haptic's kind was followed, so that its stored
// records still verify.
func RecordPurpose(kind spec.Kind) string {
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

// Record is what AuthorAnnotation holds.
type Record struct {
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
func (r Record) Claims(namespace, name string) []byte {
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
func signAuthor(rs module.Records, kind spec.Kind, namespace, name string, r Record) (string, error) {
	r.Sig = rs.Sign(RecordPurpose(kind), r.Claims(namespace, name))
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

// VerifiedAuthor reads cfg's author record as stored: the author, whether
// it was signed with the current key, or why it is not honoured.
func VerifiedAuthor(rs module.Records, own string, cfg spec.Object) (user authenticationv1.UserInfo, current bool, refusal string) {
	if why := excludedNamespace(cfg.GetNamespace(), own); why != "" {
		return user, false, why
	}
	raw, ok := cfg.GetAnnotations()[AuthorAnnotation]
	if !ok || raw == "" {
		return user, false, "the config records no author (" + AuthorAnnotation + "): it was stored while Gatehouse's webhooks did not run"
	}
	var r Record
	if err := json.Unmarshal([]byte(raw), &r); err != nil || r.Sig == "" || (r.User.Username == "" && len(r.User.Groups) == 0) {
		return user, false, "the config's author record (" + AuthorAnnotation + ") is not one this install signed (records written before Gatehouse signed them are not honoured)"
	}
	ok, current = rs.Verify(RecordPurpose(cfg.ConfigKind()), r.Claims(cfg.GetNamespace(), cfg.GetName()), r.Sig)
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

// ClaimHint tells whoever reads a config without a valid record how to
// give it one.
const ClaimHint = "; to record its author, write its spec again or, without changing it, `kubectl annotate haproxytemplateconfig NAME " + ClaimAnnotation + "=yes` as the author (Gatehouse then checks that user's rights)"

// WithRecord is the object raw with record as its author annotation
// ("" removes it) and without ClaimAnnotation, everything else as it was:
// the object is patched as the client sent it, never through a typed
// struct, which would drop the fields it does not know (a field of a
// newer haptic CRD).
func WithRecord(raw []byte, record string) ([]byte, error) {
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

// WantedRecord is the record req's object must carry: the writer's on a
// CREATE, a spec change or a claim; else the stored one, signed again
// when it verifies ("" when none was stored, the stored value when it
// does not verify: it is honoured nowhere).
func WantedRecord(rs module.Records, own string, req admission.Request, cfg spec.Object) (string, error) {
	kind := cfg.ConfigKind()
	if req.Operation != admissionv1.Update {
		return signAuthor(rs, kind, cfg.GetNamespace(), cfg.GetName(), Record{User: req.UserInfo, Generation: 1, SignedAt: time.Now().Unix()})
	}
	old, changed, err := storedAndBumped(req)
	if err != nil {
		return "", err
	}
	if changed {
		return signAuthor(rs, kind, old.GetNamespace(), old.GetName(), Record{User: req.UserInfo, UID: old.GetUID(), Generation: old.GetGeneration() + 1})
	}
	if _, claimed := cfg.GetAnnotations()[ClaimAnnotation]; claimed {
		return signAuthor(rs, kind, old.GetNamespace(), old.GetName(), Record{User: req.UserInfo, UID: old.GetUID(), Generation: old.GetGeneration()})
	}
	// Whoever adds a label or a finalizer (an administrator, the garbage
	// collector) does not lend the config their rights; a config stored
	// without a valid record keeps none.
	user, _, refusal := VerifiedAuthor(rs, own, old)
	if refusal != "" {
		return old.GetAnnotations()[AuthorAnnotation], nil
	}
	return signAuthor(rs, kind, old.GetNamespace(), old.GetName(), Record{User: user, UID: old.GetUID(), Generation: old.GetGeneration()})
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
func CheckRecord(rs module.Records, own string, req admission.Request, cfg spec.Object) (string, error) {
	if excludedNamespace(cfg.GetNamespace(), own) != "" {
		// Never sent by the API server; a config stored there is never
		// read whatever it carries.
		return "", nil
	}
	wrong := fmt.Sprintf("metadata.annotations[%s] is Gatehouse's record of whoever last wrote the spec, and this write does not carry the record Gatehouse sets (is the webhook %s registered, and does no later mutating webhook change the spec?)", AuthorAnnotation, AuthorWebhookName)
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
			if user, _, refusal := VerifiedAuthor(rs, own, old); refusal == "" {
				writers = append(writers, user)
			}
		}
	}
	writers = append(writers, req.UserInfo)
	user, _, refusal := VerifiedAuthor(rs, own, cfg)
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

// RenewedRecord verifies cfg's author record with the keys kept now:
// refusal says why it is not honoured; record is the same record signed
// with the newest key when it verifies with an older one ("" when it
// needs no renewal).
func RenewedRecord(rs module.Records, own string, cfg spec.Object) (record, refusal string) {
	user, current, refusal := VerifiedAuthor(rs, own, cfg)
	if refusal != "" || current {
		return "", refusal
	}
	record, err := signAuthor(rs, cfg.ConfigKind(), cfg.GetNamespace(), cfg.GetName(), Record{User: user, UID: cfg.GetUID(), Generation: cfg.GetGeneration()})
	if err != nil {
		return "", ""
	}
	return record, ""
}
