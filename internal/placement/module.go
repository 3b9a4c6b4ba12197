package placement

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cozyv1alpha1 "github.com/gatehouse-dev/gatehouse/api/cozystack.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// Labels Cozystack and this module put on HelmReleases.
const (
	// applicationKindLabel marks the HelmReleases Cozystack's API creates
	// for applications; only those are mutated.
	applicationKindLabel = "apps.cozystack.io/application.kind"
	// classLabel names the release's AffinityClass once resolved.
	classLabel = "apps.cozystack.io/affinity-class"
)

// Webhook identities.
const (
	ReleaseWebhookName = "placement-helmrelease.gatehouse.dev"
	ReleaseWebhookPath = "/mutate-placement-helmrelease"
	PodWebhookName     = "placement-pod.gatehouse.dev"
	PodWebhookPath     = "/validate-placement-pod"
	LabelsWebhookName  = "placement-pod-labels.gatehouse.dev"
	LabelsWebhookPath  = "/mutate-placement-pod-labels"
	ClassWebhookName   = "placement-affinityclass.gatehouse.dev"
	ClassWebhookPath   = "/validate-placement-affinityclass"
	ValuesWebhookName  = "placement-tenant-values.gatehouse.dev"
	ValuesWebhookPath  = "/validate-placement-tenant-values"
)

// Denial reasons (gatehouse_webhook_denials_total, the audit annotation
// <webhook>/reason), per webhook; docs/placement.md lists them. NotPermitted
// refusals (the application label, a tenant's placement settings) give
// "not-permitted".
const (
	reasonTenantValuesInvalid = "tenant-values-invalid"
	reasonClassValueInvalid   = "class-value-invalid"
	reasonClassNotFound       = "class-not-found"
	reasonClassTerminating    = "class-terminating"
	reasonClassNotAllowed     = "class-not-allowed"
	reasonPlacementMismatch   = "placement-mismatch"
	reasonClassInUse          = "class-in-use"
)

// Default platform identities: who may change a tenant's placement
// settings. Cozystack's tenant chart writes cozystack-values through Flux's
// helm-controller; cluster administrators may always repair it.
var (
	DefaultPlatformUsers  = []string{"system:serviceaccount:flux-system:helm-controller"}
	DefaultPlatformGroups = []string{"system:masters"}
)

// namespaceController deletes a terminating namespace's Secrets, tenant
// values included; a tenant cannot act as it, and it deletes only in a
// namespace already being deleted.
const namespaceController = "system:serviceaccount:kube-system:namespace-controller"

// The module reads classes, tenant Secrets (by name only), the metadata of
// HelmReleases, Pods (for the periodic check: their nodeSelector and node
// affinity, more than metadata) and the metadata of the owners Pods name.
// Owners of other kinds (operator CRs) need their list/watch granted too;
// the chart's placement.ownerResources adds them (docs/placement.md). Before
// following such a kind it asks, with a SelfSubjectAccessReview, whether it
// may list and watch it (a kind it may not takes no slot).
//
// A Pod bound to a node at creation (spec.nodeName) is judged against the
// Node's labels, read from a cache of Nodes' metadata.
//
// A denial is confirmed by a live read, hence get on classes, releases,
// Nodes and the tenant Secrets (by name). The tenant-values guard reads only the
// request.
//
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=selfsubjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=cozystack.io,resources=affinityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,resourceNames=cozystack-values,verbs=get;list;watch
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=replicasets;deployments;statefulsets;daemonsets,verbs=list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=list;watch
// +kubebuilder:rbac:groups=postgresql.cnpg.io,resources=clusters,verbs=list;watch

// Options tunes the module; zero values take the defaults in setDefaults.
type Options struct {
	// AuditInterval is how often the leader re-checks every running Pod,
	// so that nothing admitted while the Pod webhook was unreachable (it
	// fails open) goes unseen. Default 5 minutes.
	AuditInterval time.Duration `json:"-"`
	// MaxOwnerKinds bounds the owner kinds followed on first sight. Default 64.
	MaxOwnerKinds int `json:"-"`
	// OwnerWait is how long a Pod decision waits for the informer of an
	// owner kind seen for the first time. Default 1 s, well inside the Pod
	// webhook's timeout.
	OwnerWait time.Duration `json:"-"`
	// PlatformUsers and PlatformGroups are the identities that may change a
	// tenant's placement settings (defaultAffinityClass,
	// allowedAffinityClasses in Secret cozystack-values) and remove a
	// release's application label. Their writes never reach Gatehouse (the
	// webhooks' matchConditions exempt them). nil takes the defaults
	// (DefaultPlatformUsers, DefaultPlatformGroups); an empty, non-nil list
	// names nobody.
	PlatformUsers  []string `json:"platformUsers"`
	PlatformGroups []string `json:"platformGroups"`
	// LineageLabels has a mutating Pod webhook put the labels of the Pod's
	// application on it (apps.cozystack.io/application.{group,kind,name},
	// internal.cozystack.io/managed-by-cozystack and tenantresource), as
	// Cozystack's lineage webhook does, from the same cached walk. Off by
	// default: where Cozystack's webhook still handles Pods, the managed-by
	// label set first makes it skip them, and with them its SchedulingClass
	// injection (docs/placement.md, "Lineage labels").
	LineageLabels bool `json:"lineageLabels,omitempty"`
}

func (o *Options) setDefaults() {
	if o.AuditInterval == 0 {
		o.AuditInterval = 5 * time.Minute
	}
	if o.MaxOwnerKinds == 0 {
		o.MaxOwnerKinds = 64
	}
	if o.OwnerWait == 0 {
		o.OwnerWait = time.Second
	}
	if o.PlatformUsers == nil {
		// A copy: the settings are decoded into the slice.
		o.PlatformUsers = slices.Clone(DefaultPlatformUsers)
	}
	if o.PlatformGroups == nil {
		o.PlatformGroups = slices.Clone(DefaultPlatformGroups)
	}
}

// Module is placement.
type Module struct {
	opts Options

	// view is what every decision reads: the module's caches.
	view
	// live reads the API server. A decision that would deny is made again
	// from it, so that nothing is denied from a stale cache (a class created
	// a moment ago, a release relabelled, a tenant's allow-list widened).
	// Denials are rare, so the hot path stays on the caches. nil in tests
	// that exercise the cache path alone.
	live *view

	owners owners
	pods   client.Reader
}

// view is where decisions read tenants, classes, releases and Nodes from.
type view struct {
	tenants  tenants
	classes  classes
	releases releases
	nodes    nodes
	// fromAPIServer: the view reads the API server, so a Node it does not
	// hold does not exist. A Node missing from a cache may only be newer
	// than the cache: the decision denies provisionally, and the
	// confirmation reads the Node live (readBoundNode).
	fromAPIServer bool
}

// What the decisions read: in production one implementation over a
// client.Reader (readers.go), the caches or the API server to confirm a
// denial; maps in tests.
type (
	tenants interface {
		get(ctx context.Context, namespace string) (*tenant, error)
	}
	classes interface {
		get(ctx context.Context, name string) (*class, bool, error)
	}
	releases interface {
		get(ctx context.Context, key releaseKey) (*metav1.PartialObjectMetadata, bool, error)
		usingClass(ctx context.Context, class string) ([]releaseKey, error)
	}
	nodes interface {
		// get returns the labels of the Node named name; found is false
		// when the reader holds no such Node.
		get(ctx context.Context, name string) (labels map[string]string, found bool, err error)
	}
)

// New returns the placement module.
func New(opts Options) *Module {
	opts.setDefaults()
	return &Module{opts: opts}
}

func (m *Module) Name() string { return "placement" }

func (m *Module) AddToScheme(s *runtime.Scheme) error {
	if err := cozyv1alpha1.AddToScheme(s); err != nil {
		return err
	}
	return helmv2.AddToScheme(s)
}

// ClusterScopedKinds is AffinityClass, cluster-scoped
// (module.ClusterScoper).
func (*Module) ClusterScopedKinds() []schema.GroupKind {
	return []schema.GroupKind{cozyv1alpha1.GroupVersion.WithKind("AffinityClass").GroupKind()}
}

// Setup builds the module's caches: every decision reads them.
func (m *Module) Setup(ctx context.Context, host module.Host) error {
	var err error
	if m.tenants, err = newTenantIndex(ctx, host); err != nil {
		return err
	}
	classKind, err := newClassKind(host)
	if err != nil {
		return err
	}
	releaseKind, err := newReleaseKind(host)
	if err != nil {
		return err
	}
	m.classes, m.releases = readerClasses{classKind}, readerReleases{releaseKind}
	if m.owners, err = newOwnerCache(host, m.opts); err != nil {
		return err
	}
	pods, err := host.NewCache("pods", cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Transform: KeepPlacementFields, UnsafeDisableDeepCopy: ptr.To(true)},
	}})
	if err != nil {
		return err
	}
	m.pods = pods
	if m.nodes, err = newNodeCache(host); err != nil {
		return err
	}
	live := host.APIReader()
	m.live = &view{tenants: readerTenants{live}, classes: readerClasses{live}, releases: readerReleases{live}, nodes: readerNodes{live}, fromAPIServer: true}
	// The namespaces no webhook intercepts are not audited either.
	excluded := map[string]bool{"kube-system": true, "kube-node-lease": true, host.Namespace(): true}
	a := &audit{m: m, events: host.EventRecorder(), excluded: excluded, reported: map[types.UID]bool{}}
	return host.AddAudit(module.Audit{Period: m.opts.AuditInterval, Run: a.run})
}

// KeepPlacementFields is the Pod cache's transform: it keeps what a
// placement decision reads (exported for the memory benchmark).
func KeepPlacementFields(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: pod.ObjectMeta,
		Spec:       corev1.PodSpec{NodeSelector: pod.Spec.NodeSelector, NodeName: pod.Spec.NodeName},
		Status:     corev1.PodStatus{Phase: pod.Status.Phase},
	}
	slim.ManagedFields = nil
	if pod.Spec.Affinity != nil && pod.Spec.Affinity.NodeAffinity != nil {
		slim.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
		}}
	}
	return slim, nil
}

// podCreate is the rule of both Pod webhooks: a Pod's lineage, its
// placement and its labels are fixed when it is created. A function, so that
// no declaration shares another's slices.
func podCreate() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
}

// Webhooks declares the module's webhooks and their failure policies
// (doc.go says why each); the lineage-labels webhook only when switched on.
func (m *Module) Webhooks() []module.Webhook {
	createUpdate := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	hooks := []module.Webhook{
		{
			Name: ReleaseWebhookName, Path: ReleaseWebhookPath, Type: module.Mutating,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: createUpdate,
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{helmv2.GroupVersion.Group}, APIVersions: []string{helmv2.GroupVersion.Version},
					Resources: []string{"helmreleases"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			// Whether a release is an application's is decided on the old
			// and the new object together: a write that removes the label
			// still reaches Gatehouse, which refuses it (admitRelease), so
			// the label cannot be dropped to switch the webhook off for the
			// next write. Releases that never were applications' (the
			// platform's own) are not sent, so they never wait for Gatehouse
			// under this Fail policy.
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name:       "application-before-or-after",
				Expression: hasLabelCEL("object", applicationKindLabel) + " || " + hasLabelCEL("oldObject", applicationKindLabel),
			}},
			FailurePolicy:      admissionregistrationv1.Fail,
			SideEffects:        admissionregistrationv1.SideEffectClassNone,
			TimeoutSeconds:     5,
			ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy,
			Admit:              m.admitRelease,
			Confirm:            &module.Confirmation{Decide: m.confirmRelease},
			DenialReasons: []string{reasonTenantValuesInvalid, reasonClassValueInvalid, reasonClassNotFound,
				reasonClassTerminating, reasonClassNotAllowed},
			Locked: guardLocked,
		},
		{
			Name: PodWebhookName, Path: PodWebhookPath, Type: module.Validating,
			Rules: podCreate(),
			// Only Pods that have a lineage to walk reach Gatehouse.
			MatchConditions: []admissionregistrationv1.MatchCondition{hasLineageCondition()},
			FailurePolicy:   admissionregistrationv1.Ignore,
			SideEffects:     admissionregistrationv1.SideEffectClassNone,
			TimeoutSeconds:  3,
			Admit:           m.admitPod,
			Confirm:         &module.Confirmation{Decide: m.confirmPod},
			DenialReasons:   []string{reasonPlacementMismatch},
			// A Pod is decoded whole into corev1.Pod: an array of empty
			// objects in spec.containers takes 1,160 bytes per token
			// allocated (a 2.9 MB review: 2.2 GB), the worst shape
			// measured (docs/reliability.md, "Hostile load").
			Cost: module.Cost{BytesPerToken: podBytesPerToken},
		},
		{
			Name: ClassWebhookName, Path: ClassWebhookPath, Type: module.Validating,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{cozyv1alpha1.GroupVersion.Group}, APIVersions: []string{cozyv1alpha1.GroupVersion.Version},
					Resources: []string{"affinityclasses"}, Scope: ptr.To(admissionregistrationv1.ClusterScope),
				},
			}},
			FailurePolicy:  admissionregistrationv1.Fail,
			SideEffects:    admissionregistrationv1.SideEffectClassNone,
			TimeoutSeconds: 5,
			Admit:          m.admitClass,
			Confirm:        &module.Confirmation{Decide: m.confirmClass},
			DenialReasons:  []string{reasonClassInUse},
			Locked:         guardLocked,
		},
		{
			Name: ValuesWebhookName, Path: ValuesWebhookPath, Type: module.Validating,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			MatchConditions: m.valuesMatchConditions(),
			// Fail: the allow-list is a tenant's boundary, and a change
			// admitted while Gatehouse is unreachable would last. The
			// platform's own writes never depend on Gatehouse: the match
			// conditions exempt them, and no other Secret is sent.
			FailurePolicy:  admissionregistrationv1.Fail,
			SideEffects:    admissionregistrationv1.SideEffectClassNone,
			TimeoutSeconds: 5,
			Admit:          m.admitTenantValues,
			Locked:         guardLocked,
		},
	}
	if m.opts.LineageLabels {
		hooks = append(hooks, m.labelsWebhook())
	}
	return hooks
}

// guardLocked keeps placement's guards (a HelmRelease's application label,
// AffinityClasses in use, a tenant's placement settings) closed: each keeps
// a tenant's boundary, which an outage with Ignore, or a label the tenant
// sets to leave an objectSelector, would open for good. Their timeouts and
// namespace exclusions stay the operator's to set.
var guardLocked = module.Locked{
	FailurePolicy:  "it keeps a tenant's placement boundary, which a change admitted while Gatehouse is unreachable would open for good (docs/placement.md)",
	ObjectSelector: "it keeps a tenant's placement boundary, and whoever may label the object would choose whether the guard sees it (docs/placement.md)",
}

// labelsWebhook labels Pods with their application (Options.LineageLabels).
// It fails open, as the Pod check does: a fail-closed Pod webhook turns an
// outage into a cluster that cannot start Pods, and a label missing from a
// Pod admitted during one is the lesser harm (docs/placement.md). CREATE
// only: a Pod's lineage is fixed when it is created. Its patch is the same
// on every pass, so reinvocation (after another webhook's mutation) is safe.
func (m *Module) labelsWebhook() module.Webhook {
	return module.Webhook{
		Name: LabelsWebhookName, Path: LabelsWebhookPath, Type: module.Mutating,
		Rules:              podCreate(),
		MatchConditions:    []admissionregistrationv1.MatchCondition{hasLineageCondition()},
		FailurePolicy:      admissionregistrationv1.Ignore,
		SideEffects:        admissionregistrationv1.SideEffectClassNone,
		TimeoutSeconds:     3,
		ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy,
		Admit:              m.labelPod,
		// Only the metadata is decoded, and ObjectMeta is a part of what
		// the Pod check decodes per token: its measured cost bounds this.
		Cost: module.Cost{BytesPerToken: podBytesPerToken},
	}
}

// hasLineageCondition sends only Pods that have a lineage to walk.
func hasLineageCondition() admissionregistrationv1.MatchCondition {
	return admissionregistrationv1.MatchCondition{
		Name:       "has-lineage",
		Expression: `has(object.metadata.ownerReferences) || (has(object.metadata.labels) && '` + fluxNameLabel + `' in object.metadata.labels)`,
	}
}

// valuesMatchConditions send Gatehouse the writes of Secrets named
// cozystack-values by anyone but the platform: a name cannot be changed,
// so the tenant does not control this filter, and no other Secret write in
// the cluster waits for Gatehouse.
func (m *Module) valuesMatchConditions() []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{
		{
			Name:       "tenant-values",
			Expression: `(request.operation == 'DELETE' ? oldObject.metadata.name : object.metadata.name) == '` + tenantSecretName + `'`,
		},
		{
			Name: "not-the-platform",
			Expression: `!(request.userInfo.username in ` + celStrings(m.opts.PlatformUsers) + `) && ` +
				`!(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ` + celStrings(m.opts.PlatformGroups) + `))`,
		},
		{
			Name:       "not-the-namespace-controller",
			Expression: `!(request.operation == 'DELETE' && request.userInfo.username == '` + namespaceController + `')`,
		},
	}
}

// hasLabelCEL is a CEL test that obj (object or oldObject, null on CREATE
// and DELETE respectively) carries label.
func hasLabelCEL(obj, label string) string {
	return fmt.Sprintf("(%[1]s != null && has(%[1]s.metadata.labels) && %[2]s in %[1]s.metadata.labels)", obj, strconv.Quote(label))
}

// celStrings is a CEL list literal of ss.
func celStrings(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// labelExists selects a cache's objects by the presence of a label.
func labelExists(key string) labels.Selector {
	s, err := labels.Parse(key)
	if err != nil {
		panic(fmt.Sprintf("label %q: %v", key, err))
	}
	return s
}

// tenantSecrets scopes a cache to the Secrets named cozystack-values, in
// every namespace: never any other Secret.
func tenantSecrets() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", tenantSecretName)},
	}}
}
