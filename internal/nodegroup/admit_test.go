package nodegroup

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

type failingState struct{ err error }

func (s failingState) snapshot(string) (ClusterState, error) { return ClusterState{}, s.err }

func admissionRequest(t *testing.T, op admissionv1.Operation, requestVersion string, ng, old *v1.NodeGroup) admission.Request {
	t.Helper()
	raw := func(obj *v1.NodeGroup) runtime.RawExtension {
		if obj == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid", Operation: op, Name: ng.Name,
		Kind:        metav1.GroupVersionKind{Group: "deckhouse.io", Version: "v1", Kind: "NodeGroup"},
		RequestKind: &metav1.GroupVersionKind{Group: "deckhouse.io", Version: requestVersion, Kind: "NodeGroup"},
		Object:      raw(ng), OldObject: raw(old),
	}}
}

func TestAdmitReportsEveryDenialWithItsField(t *testing.T) {
	v := &validator{state: fixedState{}}
	ng := group("w", v1.NodeTypeStatic, criType(v1.CRITypeNotManaged), containerdBlock, taints("dedicated:NoSchedule", "dedicated:NoSchedule"),
		kubelet(v1.KubeletSpec{MaxPods: ptr.To[int32](300)}))
	resp := v.Admit(context.Background(), admissionRequest(t, admissionv1.Create, "v1alpha1", ng, nil))
	if resp.Allowed || resp.Result.Code != http.StatusForbidden {
		t.Fatalf("response %+v", resp.Result)
	}
	if want := msgContainerdWithoutCRI + "\n" + msgDuplicateTaints; resp.Result.Message != want {
		t.Fatalf("message %q, want %q", resp.Result.Message, want)
	}
	var fields []string
	for _, c := range resp.Result.Details.Causes {
		fields = append(fields, c.Field)
	}
	if got := strings.Join(fields, " "); got != "spec.cri.containerd spec.nodeTemplate.taints[1]" {
		t.Fatalf("causes name %q", got)
	}
	if len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], ".spec.kubelet.maxPods (300) is too high") {
		t.Fatalf("warnings %q", resp.Warnings)
	}
}

func TestAdmitUsesTheClientVersionForCheck7(t *testing.T) {
	v := &validator{state: fixedState{}}
	ng := group("w", v1.NodeTypeStatic, criType(v1.CRITypeNotManaged), containerdBlock)
	if resp := v.Admit(context.Background(), admissionRequest(t, admissionv1.Create, "v1alpha2", ng, nil)); !resp.Allowed {
		t.Fatalf("a v1alpha2 request was judged by the v1alpha1 rule: %v", resp.Result)
	}
}

func TestAdmitRefusesToGuessWithoutClusterState(t *testing.T) {
	v := &validator{state: failingState{fmt.Errorf("Secret kube-system/d8-cluster-configuration: %w", errNotLoaded)}}
	resp := v.Admit(context.Background(), admissionRequest(t, admissionv1.Create, "v1", group("w", v1.NodeTypeStatic), nil))
	if resp.Allowed || resp.Result.Code != http.StatusServiceUnavailable ||
		!strings.Contains(resp.Result.Message, `NodeGroup "w" cannot be checked: Secret kube-system/d8-cluster-configuration: not loaded yet`) {
		t.Fatalf("response %+v", resp.Result)
	}
}

func TestAdmitComparesUpdatesWithTheOldObject(t *testing.T) {
	v := &validator{state: fixedState{}}
	resp := v.Admit(context.Background(), admissionRequest(t, admissionv1.Update, "v1",
		group("w", v1.NodeTypeStatic), group("w", v1.NodeTypeCloudStatic)))
	if resp.Allowed || resp.Result.Message != msgNodeTypeImmutable {
		t.Fatalf("response %+v", resp.Result)
	}
}

func TestAdmitRejectsOtherKinds(t *testing.T) {
	v := &validator{state: fixedState{}}
	req := admissionRequest(t, admissionv1.Create, "v1alpha2", group("w", v1.NodeTypeStatic), nil)
	req.Kind.Version = "v1alpha2"
	resp := v.Admit(context.Background(), req)
	if resp.Allowed || resp.Result.Code != http.StatusBadRequest || !strings.Contains(resp.Result.Message, "matchPolicy Equivalent") {
		t.Fatalf("response %+v", resp.Result)
	}
}
