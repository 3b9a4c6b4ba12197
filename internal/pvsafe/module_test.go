package pvsafe

import (
	"context"
	"encoding/json"
	"errors"
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
	if !d.Response.Allowed || d.Confirmation != module.ConfirmationOverturned {
		t.Fatalf("denied from a stale cache: %+v, confirmation %q", d.Response.Result, d.Confirmation)
	}

	// When the API server agrees with the cache, the denial stands and
	// carries the API server's reasons.
	m.live = stale
	d = hook.Decide(context.Background(), deleteRequest(t, claim))
	if resp := d.Response; resp.Allowed || !strings.HasPrefix(resp.Result.Message, "DELETION BLOCKED:") || resp.Result.Code != 403 ||
		d.Confirmation != module.ConfirmationConfirmed || resp.AuditAnnotations[module.ReasonAnnotation] != reasonClaim {
		t.Fatalf("confirmed denial: %+v %v, confirmation %q", resp.Result, resp.AuditAnnotations, d.Confirmation)
	}

	// When the API server cannot be read, the cached denial stands.
	m.live = failingLookup{}
	d = hook.Decide(context.Background(), deleteRequest(t, claim))
	if resp := d.Response; resp.Allowed || !strings.HasPrefix(resp.Result.Message, "DELETION BLOCKED:") || resp.Result.Code != 403 ||
		d.Confirmation != module.ConfirmationUndecided {
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
	resp := m.confirm(context.Background(), req, first)
	if !resp.Allowed {
		t.Fatalf("labelled deletion refused: %+v", resp.Result)
	}
	hook := m.Webhooks()[0]
	hook.Admit = func(context.Context, admission.Request) admission.Response { return first }
	if d := hook.Decide(context.Background(), req); !d.Response.Allowed || d.Confirmation != module.ConfirmationConfirmed {
		t.Fatalf("bypass counted as %q: %+v", d.Confirmation, d.Response.Result)
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
