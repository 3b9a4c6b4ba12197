package pvsafe

import (
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	json "github.com/go-json-experiment/json/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The oldObject the API server sends carries managedFields and everything
// else of the object; decoding all of it into the full type is most of a
// decision's cost. These shapes hold only what the decisions read.

type liteMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	UID               types.UID         `json:"uid"`
	Labels            map[string]string `json:"labels"`
	CreationTimestamp metav1.Time       `json:"creationTimestamp"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
}

func (m liteMeta) objectMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, Labels: m.Labels,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
}

type liteClaim struct {
	Metadata liteMeta `json:"metadata"`
	Spec     struct {
		VolumeName string `json:"volumeName"`
	} `json:"spec"`
	Status struct {
		Phase corev1.PersistentVolumeClaimPhase `json:"phase"`
	} `json:"status"`
}

type liteVolume struct {
	Metadata liteMeta `json:"metadata"`
	Spec     struct {
		PersistentVolumeReclaimPolicy corev1.PersistentVolumeReclaimPolicy `json:"persistentVolumeReclaimPolicy"`
		ClaimRef                      *corev1.ObjectReference              `json:"claimRef"`
		CSI                           *struct {
			VolumeHandle string `json:"volumeHandle"`
		} `json:"csi"`
	} `json:"spec"`
	Status struct {
		Phase corev1.PersistentVolumePhase `json:"phase"`
	} `json:"status"`
}

type liteNamespace struct {
	Metadata liteMeta `json:"metadata"`
}

type liteStatefulSet struct {
	Metadata liteMeta `json:"metadata"`
	Spec     struct {
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"volumeClaimTemplates"`
		PersistentVolumeClaimRetentionPolicy *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy `json:"persistentVolumeClaimRetentionPolicy"`
	} `json:"spec"`
}

// labelSetter names who last wrote the bypass label, from the oldObject's
// managedFields: the field manager (kubectl-label, a controller, an apply)
// and when. The API server's audit log has the user; this is what the object
// itself tells. It is read only when a bypass is admitted. Returns "" when
// the object carries no managedFields.
func labelSetter(raw []byte) string {
	var l struct {
		Metadata struct {
			ManagedFields []struct {
				Manager   string       `json:"manager"`
				Operation string       `json:"operation"`
				Time      *metav1.Time `json:"time"`
				FieldsV1  struct {
					Metadata struct {
						Labels map[string]jsontext.Value `json:"f:labels"`
					} `json:"f:metadata"`
				} `json:"fieldsV1"`
			} `json:"managedFields"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &l) != nil {
		return ""
	}
	best, when := "", time.Time{}
	for _, e := range l.Metadata.ManagedFields {
		if _, ok := e.FieldsV1.Metadata.Labels["f:"+BypassLabel]; !ok {
			continue
		}
		var t time.Time
		if e.Time != nil {
			t = e.Time.Time
		}
		if best == "" || t.After(when) {
			best, when = fmt.Sprintf("field manager %q (%s", e.Manager, e.Operation), t
			if !t.IsZero() {
				best += " at " + t.UTC().Format(time.RFC3339)
			}
			best += ")"
		}
	}
	return best
}
