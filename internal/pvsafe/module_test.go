package pvsafe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

func deleteRequest(t *testing.T, obj *corev1.PersistentVolumeClaim) admission.Request {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "u", Operation: admissionv1.Delete, Namespace: obj.Namespace, Name: obj.Name,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}, OldObject: runtime.RawExtension{Raw: raw},
	}}
}

// The server decides through the webhook's declaration (module.Webhook.
// Decide): the cached denial is confirmed from live state.
func TestAStaleCacheNeverDenies(t *testing.T) {
	claim := pvc("app", "data", "pv1", bound)
	stale := memLookup{volumes: map[string]*corev1.PersistentVolume{"pv1": pv("pv1", del, corev1.VolumeBound, "app/data")}}
	fresh := memLookup{volumes: stale.volumes, snapshots: map[string]map[string][]Snapshot{"app": {"data": {readyRetained}}}}
	m := &Module{cached: stale, live: fresh}
	m.opts.setDefaults()
	hook := m.Webhooks()[0]

	d := hook.Decide(logf.IntoContext(context.Background(), testr.New(t)), deleteRequest(t, claim))
	if !d.Response.Allowed || d.Confirmation != module.OutcomeOverturned {
		t.Fatalf("denied from a stale cache: %+v, confirmation %q", d.Response.Result, d.Confirmation)
	}

	// When the API server agrees with the cache, the denial stands and
	// carries the API server's reasons.
	m.live = stale
	d = hook.Decide(context.Background(), deleteRequest(t, claim))
	if resp := d.Response; resp.Allowed || !strings.HasPrefix(resp.Result.Message, "DELETION BLOCKED:") || resp.Result.Code != 403 ||
		d.Confirmation != module.OutcomeUpheld || resp.AuditAnnotations[module.ReasonAnnotation] != reasonClaim {
		t.Fatalf("confirmed denial: %+v %v, confirmation %q", resp.Result, resp.AuditAnnotations, d.Confirmation)
	}

	// When the API server cannot be read, the cached denial stands.
	m.live = failingLookup{}
	d = hook.Decide(context.Background(), deleteRequest(t, claim))
	if resp := d.Response; resp.Allowed || !strings.HasPrefix(resp.Result.Message, "DELETION BLOCKED:") || resp.Result.Code != 403 ||
		d.Confirmation != module.OutcomeUnconfirmed {
		t.Fatalf("unconfirmed denial: %+v, confirmation %q", resp.Result, d.Confirmation)
	}
}

// A bypass the live state upholds the denial for is no stale cache.
func TestABypassAfterConfirmationIsNoOverturn(t *testing.T) {
	risky := memLookup{volumes: map[string]*corev1.PersistentVolume{"pv1": pv("pv1", del, corev1.VolumeBound, "app/data")}}
	m := &Module{cached: risky, live: risky, events: record.NewFakeRecorder(10)}
	m.opts.setDefaults()
	m.opts.Bypass = BypassLabelOnly
	claim := pvc("app", "data", "pv1", bound)
	claim.Labels = map[string]string{BypassLabel: "true"}
	// The cache denies without the label (an old copy), the request's
	// object carries it.
	req := deleteRequest(t, claim)
	first := module.Deny(reasonClaim, "DELETION BLOCKED: from the cache")
	c := m.confirm(context.Background(), req, first)
	if !c.Response.Allowed || c.Outcome != module.OutcomeExcused {
		t.Fatalf("labelled deletion refused: %+v (%s)", c.Response.Result, c.Outcome)
	}
	hook := m.Webhooks()[0]
	hook.Admit = func(context.Context, admission.Request) admission.Response { return first }
	if d := hook.Decide(context.Background(), req); !d.Response.Allowed || d.Confirmation != module.OutcomeExcused || d.Confirmation.Result() != module.ConfirmationConfirmed {
		t.Fatalf("bypass counted as %q: %+v", d.Confirmation, d.Response.Result)
	}
	// A bypass judged from the caches, the API server unread, is no
	// confirmation: admitted as it is, counted undecided.
	m.live = failingLookup{}
	if d := hook.Decide(context.Background(), req); !d.Response.Allowed || d.Confirmation != module.OutcomeUnconfirmed || d.Confirmation.Result() != module.ConfirmationUndecided {
		t.Fatalf("unconfirmed bypass counted as %q: %+v", d.Confirmation, d.Response.Result)
	}
}

// failingLookup is an API server that cannot be read.
type failingLookup struct{ memLookup }

var errUnreadable = errors.New("the API server cannot be read")

func (failingLookup) Volume(context.Context, string) (*corev1.PersistentVolume, error) {
	return nil, errUnreadable
}

func (failingLookup) Volumes(context.Context, []string) (map[string]*corev1.PersistentVolume, error) {
	return nil, errUnreadable
}

func (failingLookup) Claim(context.Context, string, string) (*corev1.PersistentVolumeClaim, error) {
	return nil, errUnreadable
}

func (failingLookup) Claims(context.Context, string) ([]*corev1.PersistentVolumeClaim, error) {
	return nil, errUnreadable
}

func TestOnlyDeletionsOfProtectedKindsAreJudged(t *testing.T) {
	m := New(Options{})
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}}}
	if resp := m.Admit(context.Background(), req); !resp.Allowed {
		t.Fatalf("CREATE judged: %+v", resp)
	}
	req.Operation = admissionv1.Delete
	req.Kind.Kind = "ConfigMap"
	if resp := m.Admit(context.Background(), req); !resp.Allowed {
		t.Fatalf("ConfigMap DELETE judged: %+v", resp)
	}
	req.Kind.Kind = "PersistentVolumeClaim"
	if resp := m.Admit(context.Background(), req); resp.Allowed || resp.Result.Code != 400 {
		t.Fatalf("DELETE without oldObject: %+v", resp)
	}
}

// TestTheAuthorizedBypassAsksTheAPIServerOnlyWhenItMatters: the review is
// made only for a labelled deletion that would be denied, refused when the
// user lacks the permission or the review fails, and an admitted bypass
// records an Event naming the user (none for a dry run).
func TestTheAuthorizedBypassAsksTheAPIServerOnlyWhenItMatters(t *testing.T) {
	risky := memLookup{volumes: map[string]*corev1.PersistentVolume{"pv1": pv("pv1", del, corev1.VolumeBound, "app/data")}}
	var asked []*authorizationv1.SubjectAccessReview
	answer, failure := false, error(nil)
	recorder := record.NewFakeRecorder(10)
	m := &Module{cached: risky, live: risky, events: recorder,
		review: func(_ context.Context, sar *authorizationv1.SubjectAccessReview) (bool, error) {
			asked = append(asked, sar)
			return answer, failure
		}}
	m.opts.setDefaults()
	// As the server decides: Admit, then the confirmation of its denial.
	admit := func(ctx context.Context, req admission.Request) admission.Response {
		return m.Webhooks()[0].Decide(ctx, req).Response
	}
	claim := pvc("app", "data", "pv1", bound)
	claim.Labels = map[string]string{BypassLabel: "true"}
	req := deleteRequest(t, claim)
	req.UserInfo = authenticationv1.UserInfo{Username: "alice", Groups: []string{"team-a", "system:authenticated"}}

	resp := admit(context.Background(), req)
	if resp.Allowed || !strings.Contains(resp.Result.Message, `pv-safe.io/force-delete=true is set, but user "alice" may not bypass pvsafe: that needs verb "bypass" on persistentvolumeclaims.pvsafe.gatehouse.dev in namespace app`) ||
		!strings.Contains(resp.Result.Message, "kubectl -n app create rolebinding pvsafe-bypass --clusterrole=gatehouse-pvsafe-bypass --user=alice") {
		t.Fatalf("bypass without the permission: %+v", resp.Result)
	}
	if len(asked) != 1 {
		t.Fatalf("%d reviews", len(asked))
	}
	if a := asked[0].Spec; a.User != "alice" || len(a.Groups) != 2 || *a.ResourceAttributes != (authorizationv1.ResourceAttributes{
		Verb: "bypass", Group: "pvsafe.gatehouse.dev", Resource: "persistentvolumeclaims", Namespace: "app", Name: "data"}) {
		t.Fatalf("review %+v", a)
	}

	failure = errors.New("connection refused")
	if resp := admit(context.Background(), req); resp.Allowed || !strings.Contains(resp.Result.Message, `whether user "alice" may bypass pvsafe could not be checked (SubjectAccessReview: connection refused)`) {
		t.Fatalf("bypass with a failing review: %+v", resp.Result)
	}
	if len(recorder.Events) != 0 {
		t.Fatalf("an Event for a refused bypass: %v", <-recorder.Events)
	}

	failure, answer = nil, true
	req.DryRun = ptr.To(true)
	if resp := admit(context.Background(), req); !resp.Allowed {
		t.Fatalf("authorized dry-run bypass: %+v", resp.Result)
	}
	if len(recorder.Events) != 0 {
		t.Fatalf("an Event for a dry run: %v", <-recorder.Events)
	}
	req.DryRun = nil
	if resp := admit(context.Background(), req); !resp.Allowed {
		t.Fatalf("authorized bypass: %+v", resp.Result)
	}
	if e := <-recorder.Events; !strings.HasPrefix(e, "Warning DeletionBypassed pvsafe allowed user \"alice\"") ||
		!strings.Contains(e, "the user may bypass persistentvolumeclaims.pvsafe.gatehouse.dev") {
		t.Fatalf("event %q", e)
	}

	// A labelled claim that is safe to delete asks nothing.
	asked = nil
	m.cached, m.live = memLookup{}, memLookup{}
	if resp := admit(context.Background(), req); !resp.Allowed || len(asked) != 0 || len(recorder.Events) != 0 {
		t.Fatalf("safe labelled claim: %+v, %d reviews, %d events", resp.Result, len(asked), len(recorder.Events))
	}
}

// capturedEvent is one Event a captureRecorder was asked to record.
type capturedEvent struct {
	namespace, kind, name, reason, message string
}

// captureRecorder records where each Event would be stored and what about.
type captureRecorder struct{ events []capturedEvent }

func (r *captureRecorder) Event(obj runtime.Object, _, reason, message string) {
	e := capturedEvent{reason: reason, message: message}
	switch o := obj.(type) {
	case *corev1.ObjectReference:
		e.namespace, e.kind, e.name = o.Namespace, o.Kind, o.Name
	case client.Object:
		e.namespace, e.kind, e.name = o.GetNamespace(), o.GetObjectKind().GroupVersionKind().Kind, o.GetName()
	}
	r.events = append(r.events, e)
}

func (r *captureRecorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (r *captureRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	r.Eventf(obj, eventtype, reason, format, args...)
}

// An admitted bypass is recorded where the tenant who may delete (or
// forge) Events in its own namespace cannot reach: in Gatehouse's
// namespace, and in the admission response's audit annotations, which
// kube-apiserver writes into its audit log (a dry run gets the annotation,
// no Event). So is a claim deleted by the cascade of a labelled namespace.
func TestABypassIsRecordedOutOfTheTenantsReach(t *testing.T) {
	risky := memLookup{volumes: map[string]*corev1.PersistentVolume{"pv1": pv("pv1", del, corev1.VolumeBound, "app/data")}}
	recorder := &captureRecorder{}
	m := &Module{cached: risky, live: risky, events: recorder, namespace: "gatehouse-system",
		review: func(context.Context, *authorizationv1.SubjectAccessReview) (bool, error) { return true, nil }}
	m.opts.setDefaults()
	claim := pvc("app", "data", "pv1", bound)
	claim.UID = "1234-abcd"
	claim.Labels = map[string]string{BypassLabel: "true"}
	req := deleteRequest(t, claim)
	req.UserInfo = authenticationv1.UserInfo{Username: "alice", Groups: []string{"team-a"}}

	req.DryRun = ptr.To(true)
	d := m.Webhooks()[0].Decide(context.Background(), req)
	const summary = "delete PersistentVolumeClaim app/data with pv-safe.io/force-delete=true: the user may bypass persistentvolumeclaims.pvsafe.gatehouse.dev (bypass mode authorized)"
	if !d.Response.Allowed || !strings.HasPrefix(d.Response.AuditAnnotations[BypassAnnotation], summary) || len(recorder.events) != 0 {
		t.Fatalf("dry-run bypass: %+v, %d events", d.Response.AdmissionResponse, len(recorder.events))
	}
	req.DryRun = nil
	d = m.Webhooks()[0].Decide(context.Background(), req)
	annotation := d.Response.AuditAnnotations[BypassAnnotation]
	if !d.Response.Allowed || !strings.HasPrefix(annotation, summary) || !strings.Contains(annotation, "data lost: data: volume pv1 has reclaimPolicy Delete") {
		t.Fatalf("bypass: allowed=%v, audit annotations %v", d.Response.Allowed, d.Response.AuditAnnotations)
	}
	want := []capturedEvent{
		{namespace: "app", name: "data", reason: EventBypassed},
		{namespace: "gatehouse-system", kind: RecordKind, name: "persistentvolumeclaim-1234-abcd", reason: EventBypassed},
	}
	if len(recorder.events) != len(want) {
		t.Fatalf("events %+v", recorder.events)
	}
	for i, w := range want {
		got := recorder.events[i]
		if got.namespace != w.namespace || got.name != w.name || got.reason != w.reason || (w.kind != "" && got.kind != w.kind) ||
			!strings.HasPrefix(got.message, `pvsafe allowed user "alice" (groups team-a) to `+summary) {
			t.Fatalf("event %d: %+v, want %+v", i, got, w)
		}
	}

	// The namespace-controller's deletion of a claim of a namespace
	// terminating with the label.
	recorder.events = nil
	terminating := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app", DeletionTimestamp: ptr.To(metav1.Now()), Labels: map[string]string{BypassLabel: "true"}}}
	m.cached = memLookup{volumes: risky.volumes, namespaces: map[string]*corev1.Namespace{"app": terminating}}
	claim.Labels = nil
	req = deleteRequest(t, claim)
	req.UserInfo = authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:namespace-controller"}
	d = m.Webhooks()[0].Decide(context.Background(), req)
	if want := "delete PersistentVolumeClaim app/data while namespace app terminates with pv-safe.io/force-delete=true"; !d.Response.Allowed ||
		!strings.HasPrefix(d.Response.AuditAnnotations[BypassAnnotation], want) {
		t.Fatalf("cascade: allowed=%v, audit annotations %v", d.Response.Allowed, d.Response.AuditAnnotations)
	}
	if len(recorder.events) != 2 || recorder.events[0].reason != EventCascadeBypassed || recorder.events[0].name != "app" ||
		recorder.events[1].namespace != "gatehouse-system" || recorder.events[1].reason != EventCascadeBypassed {
		t.Fatalf("cascade events %+v", recorder.events)
	}
}
