package pvsafe

import (
	"context"
	"errors"
	"fmt"
	"sort"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheLookup reads the module's caches the way the admission path does:
// c reads the snapshot kinds through the host (empty while their CRDs are
// not served). A benchmark's cache without snapshot informers reads as
// holding no snapshots.
func CacheLookup(c client.Reader) Lookup {
	return readerLookup{reader: c}
}

// LiveLookup reads the API server the way a denial is confirmed.
func LiveLookup(c client.Reader) Lookup {
	return readerLookup{reader: c, live: true}
}

// bulkThreshold is the number of volumes above which a live reader lists all
// PersistentVolumes once rather than asking for each.
const bulkThreshold = 16

// readerLookup implements Lookup over a client.Reader: the module's caches
// on the hot path, the API reader to confirm a denial.
type readerLookup struct {
	reader client.Reader
	// live marks a reader that makes a request per call.
	live bool
}

var noCopy = client.UnsafeDisableDeepCopy

func (l readerLookup) Volume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	pv := &corev1.PersistentVolume{}
	if err := l.reader.Get(ctx, client.ObjectKey{Name: name}, pv); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read PersistentVolume %s: %w", name, err)
	}
	return pv, nil
}

func (l readerLookup) Volumes(ctx context.Context, names []string) (map[string]*corev1.PersistentVolume, error) {
	out := make(map[string]*corev1.PersistentVolume, len(names))
	if l.live && len(names) > bulkThreshold {
		list := &corev1.PersistentVolumeList{}
		if err := l.reader.List(ctx, list); err != nil {
			return nil, fmt.Errorf("list PersistentVolumes: %w", err)
		}
		wanted := make(map[string]bool, len(names))
		for _, n := range names {
			wanted[n] = true
		}
		for i := range list.Items {
			if wanted[list.Items[i].Name] {
				out[list.Items[i].Name] = &list.Items[i]
			}
		}
		return out, nil
	}
	for _, name := range names {
		pv, err := l.Volume(ctx, name)
		if err != nil {
			return nil, err
		}
		if pv != nil {
			out[name] = pv
		}
	}
	return out, nil
}

func (l readerLookup) Claims(ctx context.Context, namespace string) ([]*corev1.PersistentVolumeClaim, error) {
	list := &corev1.PersistentVolumeClaimList{}
	if err := l.reader.List(ctx, list, client.InNamespace(namespace), noCopy); err != nil {
		return nil, fmt.Errorf("list PersistentVolumeClaims in %s: %w", namespace, err)
	}
	out := make([]*corev1.PersistentVolumeClaim, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (l readerLookup) Claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := l.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read PersistentVolumeClaim %s/%s: %w", namespace, name, err)
	}
	return pvc, nil
}

func (l readerLookup) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := l.reader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read Namespace %s: %w", name, err)
	}
	return ns, nil
}

// absentAPI tells "the snapshot CRDs are not installed" from a real
// failure: the API server's answer to a live read, or a reader without
// the snapshot kinds (a benchmark's cache). The host's readers answer
// NotFound and empty lists themselves.
func absentAPI(err error) bool {
	var notCached *cache.ErrResourceNotCached
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || errors.As(err, &notCached) || runtime.IsNotRegisteredError(err)
}

func (l readerLookup) Snapshots(ctx context.Context, namespace string) (map[string][]Snapshot, error) {
	out := map[string][]Snapshot{}
	list := &snapshotv1.VolumeSnapshotList{}
	if err := l.reader.List(ctx, list, client.InNamespace(namespace), noCopy); err != nil {
		if absentAPI(err) {
			return out, nil
		}
		return nil, fmt.Errorf("list VolumeSnapshots in %s: %w", namespace, err)
	}
	classes := map[string]*snapshotv1.VolumeSnapshotClass{}
	for i := range list.Items {
		vs := &list.Items[i]
		if vs.Spec.Source.PersistentVolumeClaimName == nil {
			continue
		}
		s := Snapshot{Name: vs.Name, Created: vs.CreationTimestamp}
		if vs.Status != nil && vs.Status.ReadyToUse != nil {
			s.Ready = *vs.Status.ReadyToUse
		}
		if err := l.resolveRetention(ctx, vs, &s, classes); err != nil {
			return nil, err
		}
		claim := *vs.Spec.Source.PersistentVolumeClaimName
		out[claim] = append(out[claim], s)
	}
	return out, nil
}

// resolveRetention prefers the bound content's deletionPolicy, which is what
// the snapshot controller acts on, and falls back to the class's. It also
// takes from the content the volume the snapshot was taken of.
func (l readerLookup) resolveRetention(ctx context.Context, vs *snapshotv1.VolumeSnapshot, s *Snapshot, classes map[string]*snapshotv1.VolumeSnapshotClass) error {
	if vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil {
		name := *vs.Status.BoundVolumeSnapshotContentName
		content := &snapshotv1.VolumeSnapshotContent{}
		err := l.reader.Get(ctx, client.ObjectKey{Name: name}, content)
		switch {
		case err == nil && boundTo(content, vs):
			if content.Spec.Source.VolumeHandle != nil {
				s.SourceVolumeHandle = *content.Spec.Source.VolumeHandle
			}
			s.Retained = content.Spec.DeletionPolicy == snapshotv1.VolumeSnapshotContentRetain
			s.Policy = fmt.Sprintf("VolumeSnapshotContent %s has deletionPolicy %s", name, content.Spec.DeletionPolicy)
			return nil
		case err != nil && !absentAPI(err):
			return fmt.Errorf("read VolumeSnapshotContent %s: %w", name, err)
		}
	}
	if vs.Spec.VolumeSnapshotClassName == nil {
		s.Policy = "it names no VolumeSnapshotClass"
		return nil
	}
	name := *vs.Spec.VolumeSnapshotClassName
	class, seen := classes[name]
	if !seen {
		class = &snapshotv1.VolumeSnapshotClass{}
		if err := l.reader.Get(ctx, client.ObjectKey{Name: name}, class); err != nil {
			if !absentAPI(err) {
				return fmt.Errorf("read VolumeSnapshotClass %s: %w", name, err)
			}
			class = nil
		}
		classes[name] = class
	}
	if class == nil {
		s.Policy = fmt.Sprintf("VolumeSnapshotClass %s does not exist", name)
		return nil
	}
	s.Retained = class.DeletionPolicy == snapshotv1.VolumeSnapshotContentRetain
	s.Policy = fmt.Sprintf("VolumeSnapshotClass %s has deletionPolicy %s", name, class.DeletionPolicy)
	return nil
}

// boundTo tells whether content is bound back to vs. A snapshot's status
// may name any content (whoever may write the snapshot's status chooses it);
// the content's volumeSnapshotRef is written by the snapshot controller or an
// administrator. A content that is not bound back is treated as unknown.
func boundTo(content *snapshotv1.VolumeSnapshotContent, vs *snapshotv1.VolumeSnapshot) bool {
	ref := content.Spec.VolumeSnapshotRef
	return ref.Namespace == vs.Namespace && ref.Name == vs.Name && (ref.UID == "" || ref.UID == vs.UID)
}

func (l readerLookup) RetainedSnapshotClass(ctx context.Context) string {
	list := &snapshotv1.VolumeSnapshotClassList{}
	if err := l.reader.List(ctx, list, noCopy); err != nil {
		return ""
	}
	var names []string
	for _, c := range list.Items {
		if c.DeletionPolicy == snapshotv1.VolumeSnapshotContentRetain {
			names = append(names, c.Name)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}
