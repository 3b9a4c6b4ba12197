package placement

import (
	"context"
	"errors"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ownerGraph is an in-memory owner graph keyed by kind/namespace/name.
type ownerGraph struct {
	objects  map[string]*metav1.ObjectMeta
	failKind string
}

func (g ownerGraph) Owner(_ context.Context, namespace string, ref metav1.OwnerReference) (metav1.Object, bool, error) {
	if ref.Kind == g.failKind {
		return nil, false, errors.New("kind not cached")
	}
	o, ok := g.objects[ref.Kind+"/"+namespace+"/"+ref.Name]
	if !ok {
		return nil, false, nil
	}
	return o, true, nil
}

func owned(name, uid string, labels map[string]string, owners ...metav1.OwnerReference) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: name, UID: types.UID(uid), Labels: labels, OwnerReferences: owners}
}

func ref(kind, name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(uid)}
}

func flux(name string) map[string]string { return map[string]string{fluxNameLabel: name} }

func TestWalkLineage(t *testing.T) {
	deploy := owned("web", "d1", flux("web-app"))
	rs := owned("web-5d4f", "r1", nil, ref("Deployment", "web", "d1"))
	cronJob := owned("backup", "c1", map[string]string{fluxNameLabel: "db", fluxNamespaceLabel: "app"})
	job := owned("backup-1", "j1", nil, ref("CronJob", "backup", "c1"))
	// Labelled by its writer with another namespace's release.
	foreign := owned("foreign", "f1", map[string]string{fluxNameLabel: "db", fluxNamespaceLabel: "tenant-b"})
	cluster := owned("pg", "p1", flux("postgres"))
	loopA := owned("a", "a1", nil, ref("Loop", "b", "b1"))
	loopB := owned("b", "b1", nil, ref("Loop", "a", "a1"))
	graph := ownerGraph{objects: map[string]*metav1.ObjectMeta{
		"Deployment/app/web": deploy, "ReplicaSet/app/web-5d4f": rs, "CronJob/app/backup": cronJob, "Job/app/backup-1": job,
		"Cluster/app/pg": cluster, "Loop/app/a": loopA, "Loop/app/b": loopB, "Deployment/app/foreign": foreign,
	}, failKind: "Broken"}

	for _, tc := range []struct {
		name       string
		pod        *metav1.ObjectMeta
		releases   []releaseKey
		unresolved int
	}{
		{"ReplicaSet to Deployment", owned("web-5d4f-x", "", nil, ref("ReplicaSet", "web-5d4f", "r1")), []releaseKey{{"app", "web-app"}}, 0},
		{"Job to CronJob, the namespace label naming its own", owned("backup-1-x", "", nil, ref("Job", "backup-1", "j1")), []releaseKey{{"app", "db"}}, 0},
		{"another namespace's release is not followed", owned("f-x", "", nil, ref("Deployment", "foreign", "f1")), nil, 0},
		{"nor on the Pod itself", owned("solo", "", map[string]string{fluxNameLabel: "db", fluxNamespaceLabel: "tenant-b"}), nil, 0},
		{"an operator's CR", owned("pg-1", "", nil, ref("Cluster", "pg", "p1")), []releaseKey{{"app", "postgres"}}, 0},
		{"a Pod Helm made itself", owned("solo", "", flux("solo-app")), []releaseKey{{"app", "solo-app"}}, 0},
		{"no release anywhere", owned("plain", "", nil), nil, 0},
		{"owner missing from the cache", owned("orphan", "", nil, ref("ReplicaSet", "gone", "g1")), nil, 1},
		{"owner kind not readable", owned("x", "", nil, ref("Broken", "b", "b1")), nil, 1},
		{"owner replaced by a namesake", owned("y", "", nil, ref("Deployment", "web", "other-uid")), nil, 1},
		{"a cycle ends", owned("z", "", nil, ref("Loop", "a", "a1")), nil, 0},
		{"two owners, two releases, decided on each", owned("two", "", nil, ref("ReplicaSet", "web-5d4f", "r1"), ref("Job", "backup-1", "j1")),
			[]releaseKey{{"app", "db"}, {"app", "web-app"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := walkLineage(context.Background(), "app", tc.pod, graph)
			if !reflect.DeepEqual(got.Releases, tc.releases) {
				t.Errorf("releases %v, want %v", got.Releases, tc.releases)
			}
			if len(got.Unresolved) != tc.unresolved {
				t.Errorf("unresolved %v, want %d", got.Unresolved, tc.unresolved)
			}
		})
	}
}

func TestWalkLineageIsDepthBounded(t *testing.T) {
	objects := map[string]*metav1.ObjectMeta{}
	for i := 0; i < 20; i++ {
		objects["Chain/app/"+string(rune('a'+i))] = owned(string(rune('a'+i)), string(rune('a'+i)), nil, ref("Chain", string(rune('a'+i+1)), string(rune('a'+i+1))))
	}
	got := walkLineage(context.Background(), "app", owned("pod", "", nil, ref("Chain", "a", "a")), ownerGraph{objects: objects})
	if len(got.Releases) != 0 || len(got.Unresolved) != 1 {
		t.Fatalf("a 20-deep chain: %+v, want one unresolved link at the bound", got)
	}
}
