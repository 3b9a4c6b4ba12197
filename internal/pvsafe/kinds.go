package pvsafe

import (
	"context"
	"fmt"
	"slices"

	json "github.com/go-json-experiment/json/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// protectedKind is one kind whose DELETE pvsafe judges: everything that
// differs between kinds is here, and the webhook's rules, the decoding of
// oldObject, the decision, the denial's reason and its message all read it.
// Adding a kind is one entry in protectedKinds and one Decide function
// (docs/pvsafe.md, "Adding a protected kind").
type protectedKind struct {
	// group and kind are the admission request's; version is the one the
	// webhook asks for.
	group, version, kind string
	// plural is the API's resource name: the webhook rule's resource and
	// the bypass permission's (verb BypassVerb on <plural>.BypassGroup).
	plural string
	// short is kubectl's name for it in the commands of a denial.
	short string
	// clusterScoped objects are named without a namespace.
	clusterScoped bool
	// reason is the denial reason (gatehouse_webhook_denials_total, the
	// audit annotation).
	reason string
	// manyClaims: the object stands for several claims (a namespace's, a
	// StatefulSet's templates'); its denial lists them even when one is at
	// risk.
	manyClaims bool
	// moreVolumes, when set, is the command a denial gives for the volumes
	// beyond the first few (else "the same for the N other volumes").
	moreVolumes func(t target, more int) string
	// labelNote is said after the bypass label's commands.
	labelNote string
	// decode reads oldObject into the fields decide reads.
	decode func(raw []byte) (client.Object, error)
	// decide is the kind's decision.
	decide func(ctx context.Context, obj client.Object, l Lookup) (Verdict, error)
}

// protectedKinds are the kinds pvsafe protects, each once.
var protectedKinds = []*protectedKind{
	{
		group: "", version: "v1", kind: "PersistentVolumeClaim", plural: "persistentvolumeclaims", short: "pvc",
		reason: reasonClaim, decode: decodeClaim, decide: decideAs(DecideClaim),
	},
	{
		group: "", version: "v1", kind: "PersistentVolume", plural: "persistentvolumes", short: "pv", clusterScoped: true,
		reason: reasonVolume, decode: decodeVolume, decide: decideAs(DecideVolume),
	},
	{
		group: "", version: "v1", kind: "Namespace", plural: "namespaces", short: "namespace", clusterScoped: true,
		reason: reasonNamespace, manyClaims: true, decode: decodeNamespace, decide: decideAs(DecideNamespace),
		moreVolumes: func(t target, more int) string {
			return fmt.Sprintf("       ... and %d more volumes; for every bound claim of the namespace at once:\n       kubectl -n %s get pvc -o jsonpath='{range .items[*]}{.spec.volumeName}{\"\\n\"}{end}' | xargs -r -I{} kubectl patch pv {} -p '{\"spec\":{\"persistentVolumeReclaimPolicy\":\"Retain\"}}'\n",
				more, t.name)
		},
		labelNote: "     The label also lets the namespace's claims be deleted while it terminates.\n",
	},
	{
		group: "apps", version: "v1", kind: "StatefulSet", plural: "statefulsets", short: "statefulset",
		reason: reasonStatefulSet, manyClaims: true, decode: decodeStatefulSet, decide: decideAs(DecideStatefulSet),
	},
}

// protectedKindOf is the entry of the request's group and kind, nil for a
// kind pvsafe does not protect.
func protectedKindOf(group, kind string) *protectedKind {
	for _, k := range protectedKinds {
		if k.group == group && k.kind == kind {
			return k
		}
	}
	return nil
}

// protectedKindRules are the webhook's rules: DELETE of every protected
// kind, one rule per API group and version, resources in alphabetical
// order; cluster-scoped kinds need AllScopes, as a rule's scope covers all
// its resources.
func protectedKindRules() []admissionregistrationv1.RuleWithOperations {
	var rules []admissionregistrationv1.RuleWithOperations
	for _, k := range protectedKinds {
		i := slices.IndexFunc(rules, func(r admissionregistrationv1.RuleWithOperations) bool {
			return r.APIGroups[0] == k.group && r.APIVersions[0] == k.version
		})
		if i < 0 {
			rules = append(rules, admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{k.group}, APIVersions: []string{k.version},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			})
			i = len(rules) - 1
		}
		rules[i].Resources = append(rules[i].Resources, k.plural)
		slices.Sort(rules[i].Resources)
		if k.clusterScoped {
			rules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
		}
	}
	return rules
}

// decideAs adapts a kind's typed decision to the table's.
func decideAs[T client.Object](decide func(context.Context, T, Lookup) (Verdict, error)) func(context.Context, client.Object, Lookup) (Verdict, error) {
	return func(ctx context.Context, obj client.Object, l Lookup) (Verdict, error) {
		typed, ok := obj.(T)
		if !ok {
			return Verdict{}, fmt.Errorf("unexpected object %T", obj)
		}
		return decide(ctx, typed, l)
	}
}

// decodeObject decodes raw into a typed object holding the fields the
// decision for kind reads; nil for a kind pvsafe does not protect.
func decodeObject(kind string, raw []byte) (client.Object, error) {
	for _, k := range protectedKinds {
		if k.kind == kind {
			return k.decode(raw)
		}
	}
	return nil, nil
}

func decodeClaim(raw []byte) (client.Object, error) {
	var l liteClaim
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, err
	}
	return &corev1.PersistentVolumeClaim{ObjectMeta: l.Metadata.objectMeta(),
		Spec:   corev1.PersistentVolumeClaimSpec{VolumeName: l.Spec.VolumeName},
		Status: corev1.PersistentVolumeClaimStatus{Phase: l.Status.Phase}}, nil
}

func decodeVolume(raw []byte) (client.Object, error) {
	var l liteVolume
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, err
	}
	pv := &corev1.PersistentVolume{ObjectMeta: l.Metadata.objectMeta(),
		Spec:   corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: l.Spec.PersistentVolumeReclaimPolicy, ClaimRef: l.Spec.ClaimRef},
		Status: corev1.PersistentVolumeStatus{Phase: l.Status.Phase}}
	if l.Spec.CSI != nil {
		pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{VolumeHandle: l.Spec.CSI.VolumeHandle}
	}
	return pv, nil
}

func decodeNamespace(raw []byte) (client.Object, error) {
	var l liteNamespace
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, err
	}
	return &corev1.Namespace{ObjectMeta: l.Metadata.objectMeta()}, nil
}

func decodeStatefulSet(raw []byte) (client.Object, error) {
	var l liteStatefulSet
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, err
	}
	sts := &appsv1.StatefulSet{ObjectMeta: l.Metadata.objectMeta()}
	sts.Spec.PersistentVolumeClaimRetentionPolicy = l.Spec.PersistentVolumeClaimRetentionPolicy
	for _, t := range l.Spec.VolumeClaimTemplates {
		sts.Spec.VolumeClaimTemplates = append(sts.Spec.VolumeClaimTemplates, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: t.Metadata.Name}})
	}
	return sts, nil
}
