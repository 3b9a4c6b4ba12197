package pvsafe

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// memLookup is an in-memory Lookup: the decision functions are pure over it.
type memLookup struct {
	volumes    map[string]*corev1.PersistentVolume
	claims     map[string][]*corev1.PersistentVolumeClaim
	snapshots  map[string]map[string][]Snapshot
	namespaces map[string]*corev1.Namespace
}

func (m memLookup) Volume(_ context.Context, name string) (*corev1.PersistentVolume, error) {
	return m.volumes[name], nil
}
func (m memLookup) Volumes(_ context.Context, names []string) (map[string]*corev1.PersistentVolume, error) {
	out := map[string]*corev1.PersistentVolume{}
	for _, n := range names {
		if v := m.volumes[n]; v != nil {
			out[n] = v
		}
	}
	return out, nil
}
func (m memLookup) Claims(_ context.Context, ns string) ([]*corev1.PersistentVolumeClaim, error) {
	return m.claims[ns], nil
}
func (m memLookup) Claim(_ context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	for _, c := range m.claims[ns] {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, nil
}
func (m memLookup) Snapshots(_ context.Context, ns string) (map[string][]Snapshot, error) {
	return m.snapshots[ns], nil
}
func (m memLookup) Namespace(_ context.Context, name string) (*corev1.Namespace, error) {
	return m.namespaces[name], nil
}
func (m memLookup) RetainedSnapshotClass(context.Context) string { return "" }

func pv(name string, policy corev1.PersistentVolumeReclaimPolicy, phase corev1.PersistentVolumePhase, claim string) *corev1.PersistentVolume {
	v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:   corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy},
		Status: corev1.PersistentVolumeStatus{Phase: phase}}
	if claim != "" {
		ns, n, _ := strings.Cut(claim, "/")
		v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: n}
	}
	return v
}

// claimCreated is when the test claims were created; the test snapshots
// are an hour younger, so that they may hold the claims' data.
var claimCreated = metav1.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func pvc(ns, name, volume string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: claimCreated},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
}

const (
	del    = corev1.PersistentVolumeReclaimDelete
	retain = corev1.PersistentVolumeReclaimRetain
	bound  = corev1.ClaimBound
)

var (
	snapshotCreated = metav1.NewTime(claimCreated.Add(time.Hour))
	readyRetained   = Snapshot{Name: "snap", Ready: true, Retained: true, Policy: "VolumeSnapshotClass c has deletionPolicy Retain", Created: snapshotCreated}
	readyDeleted    = Snapshot{Name: "snap-del", Ready: true, Retained: false, Policy: "VolumeSnapshotClass d has deletionPolicy Delete", Created: snapshotCreated}
	pendingRetains  = Snapshot{Name: "snap-wip", Ready: false, Retained: true, Created: snapshotCreated}
)

func TestDecideClaim(t *testing.T) {
	terminating := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app", DeletionTimestamp: &metav1.Time{Time: time.Now()},
		Labels: map[string]string{BypassLabel: "true"}}}
	terminatingNoLabel := terminating.DeepCopy()
	terminatingNoLabel.Labels = nil
	cases := []struct {
		name      string
		claim     *corev1.PersistentVolumeClaim
		volume    *corev1.PersistentVolume
		snapshots []Snapshot
		namespace *corev1.Namespace
		allowed   bool
		cascade   bool
		want      string
	}{
		{name: "pending claim", claim: pvc("app", "data", "", corev1.ClaimPending), allowed: true, want: "not bound"},
		{name: "lost claim", claim: pvc("app", "data", "pv1", corev1.ClaimLost), allowed: true, want: "not bound"},
		{name: "volume gone", claim: pvc("app", "data", "pv1", bound), allowed: true, want: "no longer exists"},
		{name: "retain", claim: pvc("app", "data", "pv1", bound), volume: pv("pv1", retain, corev1.VolumeBound, "app/data"), allowed: true, want: "reclaimPolicy Retain"},
		{name: "delete, no snapshot", claim: pvc("app", "data", "pv1", bound), volume: pv("pv1", del, corev1.VolumeBound, "app/data"),
			want: "volume pv1 has reclaimPolicy Delete and no VolumeSnapshot"},
		{name: "recycle counts as loss", claim: pvc("app", "data", "pv1", bound), volume: pv("pv1", corev1.PersistentVolumeReclaimRecycle, corev1.VolumeBound, "app/data"),
			want: "reclaimPolicy Recycle"},
		{name: "ready retained snapshot", claim: pvc("app", "data", "pv1", bound), volume: pv("pv1", del, corev1.VolumeBound, "app/data"),
			snapshots: []Snapshot{readyRetained}, allowed: true, want: "VolumeSnapshot snap is ready and retained"},
		{name: "snapshot not ready", claim: pvc("app", "data", "pv1", bound), volume: pv("pv1", del, corev1.VolumeBound, "app/data"),
			snapshots: []Snapshot{pendingRetains}, want: "VolumeSnapshot snap-wip is not ready"},
		{name: "snapshot deleted with its object", claim: pvc("app", "data", "pv1", bound), volume: pv("pv1", del, corev1.VolumeBound, "app/data"),
			snapshots: []Snapshot{readyDeleted}, want: "VolumeSnapshot snap-del is not retained (VolumeSnapshotClass d has deletionPolicy Delete)"},
		{name: "one qualifying among several", claim: pvc("app", "data", "pv1", bound), volume: pv("pv1", del, corev1.VolumeBound, "app/data"),
			snapshots: []Snapshot{readyDeleted, pendingRetains, readyRetained}, allowed: true, want: "snap is ready and retained"},
		{name: "namespace terminating with bypass", claim: pvc("app", "data", "pv1", bound), volume: pv("pv1", del, corev1.VolumeBound, "app/data"),
			namespace: terminating, allowed: true, cascade: true, want: "namespace app is being deleted with pv-safe.io/force-delete=true"},
		{name: "namespace terminating without bypass", claim: pvc("app", "data", "pv1", bound), volume: pv("pv1", del, corev1.VolumeBound, "app/data"),
			namespace: terminatingNoLabel, want: "no VolumeSnapshot"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := memLookup{volumes: map[string]*corev1.PersistentVolume{}, namespaces: map[string]*corev1.Namespace{},
				snapshots: map[string]map[string][]Snapshot{"app": {"data": tc.snapshots}}}
			if tc.volume != nil {
				l.volumes[tc.volume.Name] = tc.volume
			}
			if tc.namespace != nil {
				l.namespaces[tc.namespace.Name] = tc.namespace
			}
			v, err := DecideClaim(context.Background(), tc.claim, l)
			if err != nil {
				t.Fatal(err)
			}
			if v.Allowed != tc.allowed || v.CascadeBypass != tc.cascade {
				t.Fatalf("allowed=%v cascade=%v, want %v %v: %+v", v.Allowed, v.CascadeBypass, tc.allowed, tc.cascade, v)
			}
			text := v.Reason
			if !v.Allowed {
				text = v.Risks[0].Reason
			}
			if !strings.Contains(text, tc.want) {
				t.Fatalf("%q does not contain %q", text, tc.want)
			}
		})
	}
}

func TestDecideVolume(t *testing.T) {
	cases := []struct {
		name      string
		volume    *corev1.PersistentVolume
		snapshots []Snapshot
		allowed   bool
		want      string
	}{
		{"retain", pv("pv1", retain, corev1.VolumeBound, "app/data"), nil, true, "reclaimPolicy Retain"},
		{"pending", pv("pv1", del, corev1.VolumePending, ""), nil, true, "Pending"},
		{"released", pv("pv1", del, corev1.VolumeReleased, "app/data"), nil, true, "Released"},
		{"bound, no snapshot", pv("pv1", del, corev1.VolumeBound, "app/data"), nil, false, "bound to app/data, and there is no VolumeSnapshot"},
		{"bound, claim snapshotted", pv("pv1", del, corev1.VolumeBound, "app/data"), []Snapshot{readyRetained}, true, "VolumeSnapshot app/snap of claim data is ready and retained"},
		{"bound, snapshot not retained", pv("pv1", del, corev1.VolumeBound, "app/data"), []Snapshot{readyDeleted}, false, "not retained"},
		{"available with data unknown", pv("pv1", del, corev1.VolumeAvailable, ""), nil, false, "it is Available and no claim references it"},
		{"failed reclaim", pv("pv1", del, corev1.VolumeFailed, ""), nil, false, "it is Failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := memLookup{snapshots: map[string]map[string][]Snapshot{"app": {"data": tc.snapshots}},
				claims: map[string][]*corev1.PersistentVolumeClaim{"app": {pvc("app", "data", "pv1", bound)}}}
			v, err := DecideVolume(context.Background(), tc.volume, l)
			if err != nil {
				t.Fatal(err)
			}
			text := v.Reason
			if !v.Allowed {
				text = v.Risks[0].Reason
			}
			if v.Allowed != tc.allowed || !strings.Contains(text, tc.want) {
				t.Fatalf("allowed=%v %q, want %v and %q", v.Allowed, text, tc.allowed, tc.want)
			}
		})
	}
}

func TestDecideNamespaceNamesEveryRiskyClaim(t *testing.T) {
	l := memLookup{volumes: map[string]*corev1.PersistentVolume{}, snapshots: map[string]map[string][]Snapshot{"app": {"b": {readyRetained}}}}
	l.claims = map[string][]*corev1.PersistentVolumeClaim{"app": {
		pvc("app", "c", "pv-c", bound), pvc("app", "a", "pv-a", bound), pvc("app", "b", "pv-b", bound),
		pvc("app", "kept", "pv-kept", bound), pvc("app", "unbound", "", corev1.ClaimPending),
	}}
	for _, name := range []string{"a", "b", "c"} {
		l.volumes["pv-"+name] = pv("pv-"+name, del, corev1.VolumeBound, "app/"+name)
	}
	l.volumes["pv-kept"] = pv("pv-kept", retain, corev1.VolumeBound, "app/kept")
	v, err := DecideNamespace(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, l)
	if err != nil {
		t.Fatal(err)
	}
	if v.Allowed || len(v.Risks) != 2 || v.Risks[0].Claim != "a" || v.Risks[1].Claim != "c" {
		t.Fatalf("verdict %+v, want a and c risky", v)
	}
	msg := denialMessage(v, target{kind: protectedKindOf("", "Namespace"), name: "app"}, "retain-class", BypassLabelOnly, "")
	for _, want := range []string{
		"DELETION BLOCKED: Namespace 'app' would lose data permanently.",
		"2 PersistentVolumeClaim(s) would lose data:",
		"  - a: volume pv-a has reclaimPolicy Delete and no VolumeSnapshot",
		"  - c: volume pv-c has reclaimPolicy Delete",
		`kubectl -n app apply -f - <<<'{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshot","metadata":{"name":"a-before-delete"},"spec":{"volumeSnapshotClassName":"retain-class","source":{"persistentVolumeClaimName":"a"}}}'`,
		`kubectl patch pv pv-c -p '{"spec":{"persistentVolumeReclaimPolicy":"Retain"}}'`,
		"kubectl label namespace app pv-safe.io/force-delete=true",
		"kubectl delete namespace app",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, " - b:") || strings.Contains(msg, "kept") {
		t.Errorf("message names a safe claim:\n%s", msg)
	}
}

func TestDecideStatefulSet(t *testing.T) {
	sts := func(policy appsv1.PersistentVolumeClaimRetentionPolicyType) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"},
			Spec: appsv1.StatefulSetSpec{VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}}
		if policy != "" {
			s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: policy}
		}
		return s
	}
	l := memLookup{volumes: map[string]*corev1.PersistentVolume{
		"pv0": pv("pv0", del, corev1.VolumeBound, "app/data-db-0"),
		"pv7": pv("pv7", del, corev1.VolumeBound, "app/data-db-7"),
		"pvx": pv("pvx", del, corev1.VolumeBound, "app/data-dbx-0"),
	}, claims: map[string][]*corev1.PersistentVolumeClaim{"app": {
		pvc("app", "data-db-0", "pv0", bound), pvc("app", "data-db-7", "pv7", bound), pvc("app", "data-dbx-0", "pvx", bound),
	}}}
	for _, tc := range []struct {
		policy  appsv1.PersistentVolumeClaimRetentionPolicyType
		allowed bool
	}{{"", true}, {appsv1.RetainPersistentVolumeClaimRetentionPolicyType, true}, {appsv1.DeletePersistentVolumeClaimRetentionPolicyType, false}} {
		v, err := DecideStatefulSet(context.Background(), sts(tc.policy), l)
		if err != nil {
			t.Fatal(err)
		}
		if v.Allowed != tc.allowed {
			t.Fatalf("policy %q: allowed=%v", tc.policy, v.Allowed)
		}
		if !v.Allowed {
			got := fmt.Sprint(v.Risks[0].Claim, ",", v.Risks[1].Claim, ",", len(v.Risks))
			if got != "data-db-0,data-db-7,2" {
				t.Fatalf("risky claims %s: data-dbx-0 belongs to another StatefulSet and a scaled-down ordinal counts", got)
			}
		}
	}
}

func TestDenialMessageForAClaim(t *testing.T) {
	v := Verdict{Reason: "PersistentVolumeClaim 'app/data'", Risks: []Risk{{Namespace: "app", Claim: "data", Volume: "pv1", Reason: "volume pv1 has reclaimPolicy Delete and no VolumeSnapshot"}}}
	msg := denialMessage(v, target{kind: protectedKindOf("", "PersistentVolumeClaim"), namespace: "app", name: "data"}, "", BypassLabelOnly, "")
	for _, want := range []string{
		"DELETION BLOCKED: PersistentVolumeClaim 'app/data' would lose data permanently.\n\nReason: volume pv1 has reclaimPolicy Delete and no VolumeSnapshot.\n",
		`"volumeSnapshotClassName":"<a VolumeSnapshotClass with deletionPolicy: Retain>"`,
		"kubectl -n app label pvc data pv-safe.io/force-delete=true",
		"kubectl -n app delete pvc data",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}

// TestDenialMessageIsBounded: a namespace of 500 risky claims is refused
// with a message of a few KB (it was 220 KB) that names the first claims,
// says how many more there are, and gives commands covering them all.
func TestDenialMessageIsBounded(t *testing.T) {
	v := Verdict{Reason: "Namespace 'big'"}
	for i := range 500 {
		claim := fmt.Sprintf("claim-%04d", i)
		v.Risks = append(v.Risks, Risk{Namespace: "big", Claim: claim, Volume: "pv-" + claim, Reason: "volume pv-" + claim + " has reclaimPolicy Delete and no VolumeSnapshot"})
	}
	msg := denialMessage(v, target{kind: protectedKindOf("", "Namespace"), name: "big"}, "", BypassLabelOnly, "")
	if len(msg) > 4096 {
		t.Fatalf("message of %d bytes:\n%s", len(msg), msg)
	}
	for _, want := range []string{
		"500 PersistentVolumeClaim(s) would lose data:",
		"  - claim-0009: volume pv-claim-0009 has reclaimPolicy Delete",
		"  ... and 490 more; list the claims and their volumes with:\n       kubectl -n big get pvc -o custom-columns=",
		`"persistentVolumeClaimName":"claim-0004"`,
		"... and the same for the 495 other claims",
		"kubectl patch pv pv-claim-0004 -p",
		"... and 495 more volumes; for every bound claim of the namespace at once:\n       kubectl -n big get pvc -o jsonpath=",
		"kubectl label namespace big pv-safe.io/force-delete=true",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	for _, unwanted := range []string{"claim-0010:", `"persistentVolumeClaimName":"claim-0005"`, "patch pv pv-claim-0005 "} {
		if strings.Contains(msg, unwanted) {
			t.Errorf("message names %q beyond the bound:\n%s", unwanted, msg)
		}
	}
}

// BenchmarkDecideNamespace1000 decides a namespace of 1,000 bound claims, half
// of them risky, against the floor of listing the same claims.
func BenchmarkDecideNamespace1000(b *testing.B) {
	l := memLookup{volumes: map[string]*corev1.PersistentVolume{}, claims: map[string][]*corev1.PersistentVolumeClaim{},
		snapshots: map[string]map[string][]Snapshot{"big": {}}}
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("claim-%04d", i)
		policy := retain
		if i%2 == 0 {
			policy = del
		}
		l.claims["big"] = append(l.claims["big"], pvc("big", name, "pv-"+name, bound))
		l.volumes["pv-"+name] = pv("pv-"+name, policy, corev1.VolumeBound, "big/"+name)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "big"}}
	ctx := context.Background()
	b.Run("decision", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, _ := DecideNamespace(ctx, ns, l)
			if len(v.Risks) != 500 {
				b.Fatalf("%d risks", len(v.Risks))
			}
		}
	})
	b.Run("decision+message", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, _ := DecideNamespace(ctx, ns, l)
			_ = denialMessage(v, target{kind: protectedKindOf("", "Namespace"), name: "big"}, "", BypassLabelOnly, "")
		}
	})
}

// TestASnapshotCountsOnlyWhenItHoldsThisVolumesData: snapshots are found by
// claim name, and a claim name outlives its claim.
func TestASnapshotCountsOnlyWhenItHoldsThisVolumesData(t *testing.T) {
	csi := func(handle string) *corev1.PersistentVolume {
		v := pv("pv1", del, corev1.VolumeBound, "app/data")
		v.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: handle}
		return v
	}
	older := metav1.NewTime(claimCreated.Add(-time.Hour))
	snap := func(created metav1.Time, handle string) Snapshot {
		return Snapshot{Name: "snap", Ready: true, Retained: true, Policy: "p", Created: created, SourceVolumeHandle: handle}
	}
	cases := []struct {
		name    string
		volume  *corev1.PersistentVolume
		snap    Snapshot
		allowed bool
		want    string
	}{
		{"content of this volume, older than the claim", csi("h-now"), snap(older, "h-now"), true, "holds this volume's data"},
		{"content of an earlier volume, newer than the claim", csi("h-now"), snap(snapshotCreated, "h-before"), false, "VolumeSnapshot snap was taken of another volume, not pv1"},
		{"content unknown, newer than the claim", csi("h-now"), snap(snapshotCreated, ""), true, "holds this volume's data"},
		{"content unknown, older than the claim", csi("h-now"), snap(older, ""), false, "VolumeSnapshot snap may hold an earlier claim's data"},
		{"content unknown, same second as the claim", csi("h-now"), snap(claimCreated, ""), false, "may hold an earlier claim's data"},
		{"not a CSI volume, older than the claim", pv("pv1", del, corev1.VolumeBound, "app/data"), snap(older, "h-before"), false, "may hold an earlier claim's data"},
		{"not a CSI volume, newer than the claim", pv("pv1", del, corev1.VolumeBound, "app/data"), snap(snapshotCreated, "h-before"), true, "holds this volume's data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claim := pvc("app", "data", "pv1", bound)
			l := memLookup{volumes: map[string]*corev1.PersistentVolume{"pv1": tc.volume},
				claims:    map[string][]*corev1.PersistentVolumeClaim{"app": {claim}},
				snapshots: map[string]map[string][]Snapshot{"app": {"data": {tc.snap}}}}
			for _, decide := range []func() (Verdict, error){
				func() (Verdict, error) { return DecideClaim(context.Background(), claim, l) },
				func() (Verdict, error) { return DecideVolume(context.Background(), tc.volume, l) },
			} {
				v, err := decide()
				if err != nil {
					t.Fatal(err)
				}
				text := v.Reason
				if !v.Allowed {
					text = v.Risks[0].Reason
				}
				if v.Allowed != tc.allowed || !strings.Contains(text, tc.want) {
					t.Fatalf("allowed=%v %q, want %v and %q", v.Allowed, text, tc.allowed, tc.want)
				}
			}
		})
	}

	// A PV whose claimRef names a claim that is not the one bound (another
	// UID): the claim's age says nothing about the volume.
	v := csi("")
	v.Spec.ClaimRef.UID = "old-uid"
	claim := pvc("app", "data", "pv1", bound)
	claim.UID = "new-uid"
	l := memLookup{claims: map[string][]*corev1.PersistentVolumeClaim{"app": {claim}},
		snapshots: map[string]map[string][]Snapshot{"app": {"data": {snap(snapshotCreated, "")}}}}
	if verdict, _ := DecideVolume(context.Background(), v, l); verdict.Allowed {
		t.Fatalf("a snapshot counted against the age of another claim: %+v", verdict)
	}
}
