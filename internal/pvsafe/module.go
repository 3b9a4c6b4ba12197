package pvsafe

import (
	"context"
	"fmt"
	"net/http"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;persistentvolumes;namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshots;volumesnapshotclasses;volumesnapshotcontents,verbs=get;list;watch
// In the authorized bypass mode, whether the deleting user may bypass.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Webhook identity.
const (
	WebhookName = "pvsafe.gatehouse.dev"
	WebhookPath = "/validate-pvsafe"
)

// Options tunes the module; zero values take the defaults in setDefaults.
// The fields with a json name are its settings (settings.go):
// modules.pvsafe.settings in the --config file and the chart.
type Options struct {
	// ConfirmTimeout bounds a denial's decision with its live confirmation,
	// counted from the start of the decision; it stays under the webhook's
	// 10 s timeout. Default 6 s.
	ConfirmTimeout time.Duration `json:"-"`
	// Bypass is what the bypass label needs to take effect. Default
	// BypassAuthorized.
	Bypass BypassMode `json:"bypass,omitempty" enum:"authorized,label"`
	// AccessReviewTimeout bounds the SubjectAccessReview of a bypass in
	// BypassAuthorized mode. With ConfirmTimeout it stays under the
	// webhook's 10 s timeout. Default 3 s.
	AccessReviewTimeout time.Duration `json:"-"`
}

func (o *Options) setDefaults() {
	if o.ConfirmTimeout == 0 {
		o.ConfirmTimeout = 6 * time.Second
	}
	if o.Bypass == "" {
		o.Bypass = BypassAuthorized
	}
	if o.AccessReviewTimeout == 0 {
		o.AccessReviewTimeout = 3 * time.Second
	}
}

// Module is pvsafe.
type Module struct {
	opts   Options
	cached Lookup
	live   Lookup
	// review asks the API server's authorizers about a bypass.
	review accessReviewer
	// events records admitted bypasses on the deleted object and in
	// namespace; nil in unit tests that do not look at Events.
	events record.EventRecorder
	// namespace is Gatehouse's own, where every bypass is recorded out of
	// the tenants' reach.
	namespace string
}

// New returns the pvsafe module.
func New(opts Options) *Module {
	opts.setDefaults()
	return &Module{opts: opts}
}

func (m *Module) Name() string { return "pvsafe" }

func (m *Module) AddToScheme(s *runtime.Scheme) error { return snapshotv1.AddToScheme(s) }

// snapshotKinds are optional: their CRDs may be installed or removed at any
// time. The host reads them as holding no objects until they are served, so
// until then no snapshot qualifies a deletion.
var snapshotKinds = []client.Object{&snapshotv1.VolumeSnapshotClass{}, &snapshotv1.VolumeSnapshotContent{}, &snapshotv1.VolumeSnapshot{}}

// Setup builds the module's cache. The decision reads these objects but
// never modifies them, so the cache hands them out without copies.
func (m *Module) Setup(ctx context.Context, host module.Host) error {
	readOnly := cache.ByObject{UnsafeDisableDeepCopy: ptr.To(true)}
	volumes, err := host.NewCache("volumes", cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.PersistentVolumeClaim{}: readOnly,
		&corev1.PersistentVolume{}:      readOnly,
		&corev1.Namespace{}:             readOnly,
	}})
	if err != nil {
		return err
	}
	var followed []module.Kind
	for _, obj := range snapshotKinds {
		k, err := host.FollowKind(obj, module.Scope{}, nil)
		if err != nil {
			return err
		}
		followed = append(followed, k)
	}
	m.cached = CacheLookup(module.ReaderWithKinds(volumes, host.Scheme(), followed...))
	m.live = LiveLookup(host.APIReader())
	m.review = subjectAccessReview(host.Client())
	m.events = host.EventRecorder()
	m.namespace = host.Namespace()
	return host.AddAudit(m.inventory(host.Namespace()))
}

// Webhooks declares the DELETE webhook. failurePolicy Fail: an outage must
// not let data be destroyed unchecked (docs/pvsafe.md gives the break-glass).
// sideEffects NoneOnDryRun: an admitted bypass records an Event, except for
// a dry run.
func (m *Module) Webhooks() []module.Webhook {
	return []module.Webhook{{
		Name:           WebhookName,
		Path:           WebhookPath,
		Type:           module.Validating,
		Rules:          protectedKindRules(),
		FailurePolicy:  admissionregistrationv1.Fail,
		SideEffects:    admissionregistrationv1.SideEffectClassNoneOnDryRun,
		TimeoutSeconds: 10,
		Admit:          m.Admit,
		Confirm:        &module.Confirmation{Decide: m.confirm, Timeout: m.opts.ConfirmTimeout},
		DenialReasons:  denialReasons(),
	}}
}

// Denial reasons (gatehouse_webhook_denials_total, the audit annotation
// pvsafe.gatehouse.dev/reason), by what the deletion would lose data of.
const (
	reasonClaim       = "claim-would-lose-data"
	reasonVolume      = "volume-would-lose-data"
	reasonNamespace   = "namespace-would-lose-data"
	reasonStatefulSet = "statefulset-would-lose-data"
	// reasonBypassRefused: the object carried the bypass label, and the
	// deleting user may not bypass (BypassAuthorized).
	reasonBypassRefused = "bypass-refused"
)

// denialReasons are each protected kind's and the bypass's.
func denialReasons() []string {
	var reasons []string
	for _, k := range protectedKinds {
		reasons = append(reasons, k.reason)
	}
	return append(reasons, reasonBypassRefused)
}

// Admit decides one DELETE from the caches. A denial is made again from the
// API server before it is returned (confirm, run by the server).
func (m *Module) Admit(ctx context.Context, req admission.Request) admission.Response {
	p := onlyPass
	if m.live != nil {
		p = cachedPass
	}
	return m.admit(ctx, req, p).Response
}

// pass says which of a request's decisions admit makes.
type pass int

const (
	// onlyPass: no confirmation follows (no live reader).
	onlyPass pass = iota
	// cachedPass: from the caches; a denial is confirmed next, and its
	// confirmation's answer, bypass included, is what counts.
	cachedPass
	// livePass: the confirmation, from the API server, or from the caches
	// when it cannot be read.
	livePass
)

// confirm decides a deletion the caches would refuse again from the API
// server: a snapshot that became ready a moment ago, or a namespace that
// started terminating, is honoured. Its answer replaces the cached one; when
// the API server cannot be read, the cached denial stands (Unconfirmed): it
// keeps its advice and its bypass, and warn mode warns of it.
func (m *Module) confirm(ctx context.Context, req admission.Request, _ admission.Response) module.Confirmed {
	return m.admit(ctx, req, livePass)
}

// admit decides one DELETE in pass p, and says what its answer makes of a
// denial when p is the confirmation's (Admit keeps the answer alone).
func (m *Module) admit(ctx context.Context, req admission.Request, p pass) module.Confirmed {
	if req.Operation != admissionv1.Delete {
		return module.LiveDecision(admission.Allowed("pvsafe judges deletions only"))
	}
	pk := protectedKindOf(req.Kind.Group, req.Kind.Kind)
	if pk == nil {
		return module.LiveDecision(admission.Allowed("pvsafe does not protect " + req.Kind.Kind))
	}
	t, kind := targetOf(pk, req), pk.kind
	if len(req.OldObject.Raw) == 0 {
		return module.LiveDecision(admission.Errored(http.StatusBadRequest, fmt.Errorf("DELETE of %s %s without oldObject", kind, req.Name)))
	}
	obj, err := pk.decode(req.OldObject.Raw)
	if err != nil {
		return module.LiveDecision(admission.Errored(http.StatusBadRequest, fmt.Errorf("decode oldObject: %w", err)))
	}
	dryRun := req.DryRun != nil && *req.DryRun

	// The decision comes first, labelled or not: a bypass is one only when
	// the deletion would otherwise be denied, and only then does the
	// authorized mode ask the API server about the user.
	answer := func(c module.Confirmed) module.Confirmed { return c }
	var verdict Verdict
	if p == livePass {
		if verdict, err = pk.decide(ctx, obj, m.live); err != nil {
			logf.FromContext(ctx).Error(err, "could not confirm the denial against the API server; denying from the cache")
			// Whatever the caches decide is answered as it is.
			answer = func(c module.Confirmed) module.Confirmed { return module.Unconfirmed(c.Response) }
		}
	}
	if p != livePass || err != nil {
		if verdict, err = pk.decide(ctx, obj, m.cached); err != nil {
			// Not even the caches decide: undecided, never Unconfirmed.
			return module.LiveDecision(admission.Errored(http.StatusInternalServerError, err))
		}
	}
	if verdict.CascadeBypass {
		logf.FromContext(ctx).Info("BYPASS: deletion allowed by the namespace's label", "label", BypassLabel+"=true", "kind", kind,
			"namespace", obj.GetNamespace(), "name", obj.GetName(), "user", req.UserInfo.Username, "groups", req.UserInfo.Groups, "dryRun", dryRun)
		bypasses.WithLabelValues(kind, "namespace").Inc()
		decisions.WithLabelValues(kind, "bypassed").Inc()
		summary := cascadeSummary(obj, kind)
		if !dryRun {
			m.recordCascade(obj, kind, summary, req.UserInfo)
		}
		// The namespace's state allows it: a denial is overturned.
		return answer(module.Overturned(withBypassAnnotation(admission.Allowed(verdict.Reason), summary)))
	}
	if verdict.Allowed {
		decisions.WithLabelValues(kind, "allowed").Inc()
		return answer(module.Overturned(admission.Allowed(verdict.Reason)))
	}
	if p == cachedPass {
		// Confirmed next: the bypass is judged on what the confirmation
		// finds, and the answer counted there.
		return module.Upheld(module.Deny(pk.reason, denialMessage(verdict, t, m.cached.RetainedSnapshotClass(ctx), m.opts.Bypass, "")))
	}
	var refusal string
	if obj.GetLabels()[BypassLabel] == "true" {
		granted, why := m.authorizeBypass(ctx, req.UserInfo, t)
		if granted {
			logf.FromContext(ctx).Info("BYPASS: deletion allowed by label", "label", BypassLabel+"=true", "mode", m.opts.Bypass, "kind", kind,
				"namespace", obj.GetNamespace(), "name", obj.GetName(), "user", req.UserInfo.Username, "groups", req.UserInfo.Groups, "dryRun", dryRun)
			bypasses.WithLabelValues(kind, "object").Inc()
			decisions.WithLabelValues(kind, "bypassed").Inc()
			summary := m.bypassSummary(obj, kind, t, req, verdict)
			if !dryRun {
				m.recordBypass(obj, kind, summary, req.UserInfo)
			}
			// The state upholds the denial; the label admits it. The audit
			// annotation records it where no tenant can reach, dry runs
			// included (they are audited as such).
			return answer(module.Excused(withBypassAnnotation(admission.Allowed(fmt.Sprintf("%s %s allowed by %s=true", kind, t.name, BypassLabel)), summary)))
		}
		refusal = why
	}
	decisions.WithLabelValues(kind, "denied").Inc()
	reason := pk.reason
	if refusal != "" {
		reason = reasonBypassRefused
	}
	return answer(module.Upheld(module.Deny(reason, denialMessage(verdict, t, m.cached.RetainedSnapshotClass(ctx), m.opts.Bypass, refusal))))
}

// targetOf names the request's object as kubectl does.
func targetOf(pk *protectedKind, req admission.Request) target {
	t := target{kind: pk, namespace: req.Namespace, name: req.Name}
	if pk.clusterScoped {
		t.namespace = ""
	}
	return t
}
