package pvsafe

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/textcut"
)

// BypassMode is what the bypass label needs to take effect.
type BypassMode string

const (
	// BypassAuthorized: the label takes effect only for a deleting user
	// whom the API server's authorizers allow the verb BypassVerb on the
	// object's resource in BypassGroup. Whoever may label a claim (a
	// namespace's edit role) is not thereby allowed to destroy its data.
	BypassAuthorized BypassMode = "authorized"
	// BypassLabelOnly is upstream pv-safe's behaviour: the label alone
	// allows the deletion, whoever set it and whoever deletes.
	BypassLabelOnly BypassMode = "label"
)

// ParseBypassMode accepts "authorized" or "label".
func ParseBypassMode(s string) (BypassMode, error) {
	switch BypassMode(s) {
	case BypassAuthorized, BypassLabelOnly:
		return BypassMode(s), nil
	}
	return "", fmt.Errorf("pvsafe bypass mode %q: want %q or %q", s, BypassAuthorized, BypassLabelOnly)
}

// The virtual permission the authorized mode checks: no API serves this
// group; RBAC grants it like any other rule, and only the ClusterRole
// BypassClusterRole (shipped in config/ and the chart, aggregated into no
// other role) holds it.
const (
	BypassGroup       = "pvsafe.gatehouse.dev"
	BypassVerb        = "bypass"
	BypassClusterRole = "gatehouse-pvsafe-bypass"
)

// accessReviewer asks the API server's authorizers one SubjectAccessReview.
type accessReviewer func(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (allowed bool, err error)

// subjectAccessReview is a live call, on purpose, and made only when a
// labelled deletion would otherwise be denied: an authorization decision
// cannot come from a cache (RBAC is one authorizer among several, and only
// the API server combines them with groups and aggregated roles).
func subjectAccessReview(c client.Client) accessReviewer {
	return func(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (bool, error) {
		return module.Allowed(ctx, c, sar)
	}
}

// bypassReview is the SubjectAccessReview of the bypass of t for user.
// Cluster-scoped objects (Namespaces,
// PersistentVolumes) are asked about without a namespace: only a
// ClusterRoleBinding grants their bypass, never a RoleBinding a namespace
// admin could write.
func bypassReview(user authenticationv1.UserInfo, t target) *authorizationv1.SubjectAccessReview {
	return module.AccessReview(user, authorizationv1.ResourceAttributes{
		Verb: BypassVerb, Group: BypassGroup, Resource: t.kind.plural, Namespace: t.namespace, Name: t.name,
	})
}

// authorizeBypass decides whether the bypass label takes effect for user.
// When it does not, it returns why, for the denial. A review that fails
// (timeout, API server unavailable) refuses the bypass: the deletion it
// would allow cannot be undone, and the user can retry.
func (m *Module) authorizeBypass(ctx context.Context, user authenticationv1.UserInfo, t target) (bool, string) {
	if m.opts.Bypass == BypassLabelOnly {
		return true, ""
	}
	allowed, err := false, errors.New("no client for the API server")
	if m.review != nil {
		reviewCtx, cancel := context.WithTimeout(ctx, m.opts.AccessReviewTimeout)
		allowed, err = m.review(reviewCtx, bypassReview(user, t))
		cancel()
	}
	if err != nil {
		bypassReviewFailures.Inc()
		logf.FromContext(ctx).Error(err, "SubjectAccessReview of a bypass failed; refusing the bypass", "user", user.Username, "name", t.name)
		return false, fmt.Sprintf("%s=true is set, but whether user %q may bypass pvsafe could not be checked (SubjectAccessReview: %v); the bypass is refused rather than risk the data. Retry the deletion.", BypassLabel, user.Username, err)
	}
	if allowed {
		return true, ""
	}
	return false, missingPermission(user.Username, t)
}

// missingPermission says which permission a bypass lacks and how to get it.
func missingPermission(user string, t target) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s=true is set, but user %q may not bypass pvsafe: that needs verb %q on %s.%s", BypassLabel, user, BypassVerb, t.kind.plural, BypassGroup)
	if t.namespace != "" {
		fmt.Fprintf(&b, " in namespace %s", t.namespace)
	}
	fmt.Fprintf(&b, ", which the ClusterRole %s grants (no built-in role does). A cluster administrator grants it with:\n", BypassClusterRole)
	if t.namespace != "" {
		fmt.Fprintf(&b, "       kubectl -n %s create rolebinding pvsafe-bypass --clusterrole=%s --user=%s\n", t.namespace, BypassClusterRole, user)
	} else {
		fmt.Fprintf(&b, "       kubectl create clusterrolebinding pvsafe-bypass --clusterrole=%s --user=%s\n", BypassClusterRole, user)
	}
	fmt.Fprintf(&b, "     Check it with: kubectl auth can-i %s %s.%s/%s", BypassVerb, t.kind.plural, BypassGroup, t.name)
	if t.namespace != "" {
		fmt.Fprintf(&b, " -n %s", t.namespace)
	}
	return b.String()
}

// Event reasons.
const (
	EventBypassed        = "DeletionBypassed"
	EventCascadeBypassed = "ClaimDeletionBypassed"
	// maxEventMessageLength is what the API server accepts for an Event's
	// message (events.k8s.io's note limit); audit annotations are held to
	// it too.
	maxEventMessageLength = 1024
)

// BypassAnnotation is the audit annotation an admitted bypass is recorded
// in: kube-apiserver writes it into the deletion's audit event as
// "pvsafe.gatehouse.dev/bypass", beside the user who deleted, where no
// tenant can erase or forge it.
const BypassAnnotation = "bypass"

// RecordKind is the kind of the reference the bypass records in
// Gatehouse's namespace are about. No API serves it: an Event's object must
// be in the Event's namespace, and the deleted object is in a tenant's (or
// in none); the Event's message names it.
const RecordKind = "DeletionBypass"

// bounded cuts s to what an Event's message or an audit annotation holds.
func bounded(s string) string { return textcut.Bound(s, maxEventMessageLength, "...") }

// bypassSummary says what an admitted bypass deleted and on what grounds:
// how the bypass was granted, the label's last writer and the data lost.
func (m *Module) bypassSummary(obj client.Object, kind string, t target, req admission.Request, v Verdict) string {
	how := "the label alone allows it (bypass mode label)"
	if m.opts.Bypass == BypassAuthorized {
		how = fmt.Sprintf("the user may %s %s.%s (bypass mode authorized)", BypassVerb, t.kind.plural, BypassGroup)
	}
	setter := labelSetter(req.OldObject.Raw)
	if setter == "" {
		setter = "an unknown writer (no managedFields)"
	}
	lost := "its data is not kept"
	if len(v.Risks) > 0 {
		r := v.Risks[0]
		lost = fmt.Sprintf("data lost: %s: %s", r.Claim, r.Reason)
		if r.Claim == "" {
			lost = "data lost: " + r.Reason
		}
		if len(v.Risks) > 1 {
			lost += fmt.Sprintf(" (and %d more claims)", len(v.Risks)-1)
		}
	}
	return fmt.Sprintf("delete %s %s with %s=true: %s; the label was last set by %s; %s", kind, displayName(obj), BypassLabel, how, setter, lost)
}

// cascadeSummary says what a bypass by the terminating namespace's label
// deleted.
func cascadeSummary(obj client.Object, kind string) string {
	return fmt.Sprintf("delete %s %s/%s while namespace %s terminates with %s=true; its data is not kept",
		kind, obj.GetNamespace(), obj.GetName(), obj.GetNamespace(), BypassLabel)
}

// withBypassAnnotation records an admitted bypass in the admission
// response's audit annotations.
func withBypassAnnotation(resp admission.Response, summary string) admission.Response {
	annotations := make(map[string]string, len(resp.AuditAnnotations)+1)
	maps.Copy(annotations, resp.AuditAnnotations)
	annotations[BypassAnnotation] = bounded(summary)
	resp.AuditAnnotations = annotations
	return resp
}

// recordBypass records an admitted bypass as a Warning Event on the deleted
// object, naming the deleting user and the summary, and the same in
// Gatehouse's namespace (recordInOwnNamespace). Events about cluster-scoped
// objects (Namespaces, PersistentVolumes) are stored in the default
// namespace, so that the record of a namespace's deletion does not go with
// it.
func (m *Module) recordBypass(obj client.Object, kind, summary string, user authenticationv1.UserInfo) {
	if m.events == nil {
		return
	}
	msg := bounded(fmt.Sprintf("pvsafe allowed user %q (groups %s) to %s", user.Username, strings.Join(user.Groups, ","), summary))
	m.events.Event(obj, corev1.EventTypeWarning, EventBypassed, msg)
	m.recordInOwnNamespace(obj, kind, EventBypassed, msg)
}

func displayName(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// recordCascade records a claim deleted while its namespace terminates with
// the bypass label. The claim's own namespace refuses new objects while it
// terminates, so the Event is on the Namespace (stored in the default
// namespace), and in Gatehouse's namespace.
func (m *Module) recordCascade(obj client.Object, kind, summary string, user authenticationv1.UserInfo) {
	if m.events == nil {
		return
	}
	ns := &corev1.Namespace{}
	ns.Name = obj.GetNamespace()
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	msg := bounded(fmt.Sprintf("pvsafe allowed %q to %s", user.Username, summary))
	m.events.Event(ns, corev1.EventTypeWarning, EventCascadeBypassed, msg)
	m.recordInOwnNamespace(obj, kind, EventCascadeBypassed, msg)
}

// recordInOwnNamespace records a bypass in Gatehouse's namespace. An Event
// in the tenant's namespace is the tenant's to delete, and to forge: the
// edit role writes Events there. No tenant role reaches Gatehouse's
// namespace, so this copy stays for the Events' time to live, and a
// "DeletionBypassed" Event there was written by Gatehouse (or by whoever
// administers Gatehouse). The Event is about a reference named after the
// deleted object's kind and UID, one per deletion, so that the recorder
// neither aggregates nor rate-limits the records of different deletions.
func (m *Module) recordInOwnNamespace(obj client.Object, kind, reason, msg string) {
	if m.namespace == "" {
		return
	}
	name := string(obj.GetUID())
	if name == "" {
		name = "no-uid"
	}
	ref := &corev1.ObjectReference{
		APIVersion: BypassGroup + "/v1", Kind: RecordKind, Namespace: m.namespace,
		Name: strings.ToLower(kind) + "-" + name,
	}
	m.events.Event(ref, corev1.EventTypeWarning, reason, msg)
}
