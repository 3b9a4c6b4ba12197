package nodegroup

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// stateSource gives the cluster state for one group.
type stateSource interface {
	snapshot(group string) (ClusterState, error)
}

// validator admits NodeGroup CREATEs and UPDATEs. The webhook rule names
// only v1 with matchPolicy Equivalent, so the API server converts every
// request to v1 first and the checks are written once, against the hub.
type validator struct {
	state stateSource
}

// GetLogger returns the request's logger, which the server put in ctx.
func (v *validator) GetLogger(ctx context.Context) logr.Logger {
	return logf.FromContext(ctx).WithName("validator")
}

// Admit runs the checks and reports every denial of the request at once.
func (v *validator) Admit(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Group != v1.GroupVersion.Group || req.Kind.Version != v1.GroupVersion.Version || req.Kind.Kind != kind {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf(
			"expected a %s NodeGroup (the rule names v1 with matchPolicy Equivalent), got %s/%s %s", hubVersion, req.Kind.Group, req.Kind.Version, req.Kind.Kind))
	}
	ng := &v1.NodeGroup{}
	if err := json.Unmarshal(req.Object.Raw, ng); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode NodeGroup: %w", err))
	}
	var old *v1.NodeGroup
	if req.Operation == admissionv1.Update {
		old = &v1.NodeGroup{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the old NodeGroup: %w", err))
		}
	}
	state, err := v.state.snapshot(ng.Name)
	if err != nil {
		v.GetLogger(ctx).Info("cluster state unavailable; refusing to guess", "nodegroup", ng.Name, "reason", err.Error())
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("NodeGroup %q cannot be checked: %w", ng.Name, err))
	}

	errs, warnings := Validate(Request{Operation: req.Operation, ClientVersion: clientVersion(req), Old: old, New: ng}, state)
	if len(errs) == 0 {
		resp := admission.Allowed("")
		resp.Warnings = warnings
		return resp
	}
	resp := module.Deny(denialReason(errs), denialMessage(errs))
	resp.Warnings = warnings
	details := &metav1.StatusDetails{Name: ng.Name, Group: v1.GroupVersion.Group, Kind: kind}
	for _, e := range errs {
		details.Causes = append(details.Causes, metav1.StatusCause{Type: metav1.CauseType(e.Type), Message: e.Detail, Field: e.Field})
	}
	resp.Result.Details = details
	return resp
}

// Denial reasons (gatehouse_webhook_denials_total, the audit annotation
// <webhook>/reason), named by the rule that refused, which the field of
// the first refusal tells: every rule refuses one field of its own.
var reasonOfField = map[string]string{
	"metadata.name":                               "name-too-long",
	"metadata.annotations":                        "conversion-data-invalid",
	"spec.nodeType":                               "node-type-immutable",
	"spec.cloudInstances.maxPerZone":              "max-per-zone-below-min",
	"spec.cloudInstances.zones":                   "unknown-zone",
	"spec.cri.type":                               "cri-type-refused",
	"spec.cri.containerd":                         "containerd-without-cri-type",
	"spec.cri.docker":                             "docker-without-cri-type",
	"spec.nodeTemplate.taints":                    "taints-refused",
	"spec.disruptions.approvalMode":               "approval-mode-refused",
	"spec.staticInstances.labelSelector":          "static-selector-immutable",
	"spec.kubelet.resourceReservation.mode":       "topology-manager-without-reservation",
	"spec.kubelet.resourceReservation.static.cpu": "topology-manager-without-reservation",
	"spec.kubelet.memorySwap.swapBehavior":        "memory-swap-unsupported",
}

// denialReasons is the webhook's declared set.
func denialReasons() []string {
	var out []string
	for _, r := range reasonOfField {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// denialReason names errs by their first refusal's field, indices and keys
// left out.
func denialReason(errs field.ErrorList) string {
	if len(errs) == 0 {
		return ""
	}
	path := errs[0].Field
	if i := strings.IndexByte(path, '['); i >= 0 {
		path = path[:i]
	}
	return reasonOfField[path]
}

// clientVersion is the API version the client wrote: requestKind keeps it
// when the API server converted the object for this webhook.
func clientVersion(req admission.Request) string {
	k := req.Kind
	if req.RequestKind != nil {
		k = *req.RequestKind
	}
	return metav1.GroupVersion{Group: k.Group, Version: k.Version}.String()
}
