package placement

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cozyv1alpha1 "github.com/gatehouse-dev/gatehouse/api/cozystack.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// maxNamedReleases bounds the releases a denial names; the message says
// how to list them all.
const maxNamedReleases = 10

// admitClass refuses to delete or change an AffinityClass that
// HelmReleases still use: their Pods were placed by it, and a silent change
// would leave them out of their class. A class with a finalizer is deleted
// in two writes, the DELETE and the removal of its last finalizer; the guard
// holds on both, since releases may have come between them only by keeping
// the class they had (admitRelease refuses a terminating class to others).
func (m *Module) admitClass(ctx context.Context, req admission.Request) admission.Response {
	return m.judgeClass(ctx, m.releases, req)
}

// confirmClass makes a class guard's denial again from the API server (the
// server runs it): a release moved to another class a moment ago must not
// block the change.
func (m *Module) confirmClass(ctx context.Context, req admission.Request, denial admission.Response) module.Confirmed {
	if m.live == nil {
		return module.Upheld(denial)
	}
	return module.LiveDecision(m.judgeClass(ctx, m.live.releases, req))
}

// judgeClass is the class guard over the releases src reads.
func (m *Module) judgeClass(ctx context.Context, src releases, req admission.Request) admission.Response {
	name := req.Name
	verb := "deleted"
	if req.Operation == admissionv1.Update {
		verb = "changed"
		var before, after cozyv1alpha1.AffinityClass
		if err := json.Unmarshal(req.OldObject.Raw, &before); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the old AffinityClass: %w", err))
		}
		if err := json.Unmarshal(req.Object.Raw, &after); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode AffinityClass: %w", err))
		}
		// Removing the last finalizer of a class being deleted deletes
		// it: that write is a deletion, guarded as one.
		completesDeletion := after.DeletionTimestamp != nil && len(after.Finalizers) == 0 && len(before.Finalizers) > 0
		if completesDeletion {
			verb = "deleted (by removing its last finalizer)"
		} else if equality.Semantic.DeepEqual(before.Spec, after.Spec) {
			return admission.Allowed("spec unchanged")
		}
	}
	users, err := src.usingClass(ctx, name)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, err)
	}
	if len(users) == 0 {
		return admission.Allowed("no HelmRelease uses this class")
	}
	return module.Deny(reasonClassInUse, classInUseMessage(name, verb, users))
}

func classInUseMessage(name, verb string, users []releaseKey) string {
	users = slices.Clone(users)
	slices.SortFunc(users, func(a, b releaseKey) int { return strings.Compare(a.String(), b.String()) })
	var b strings.Builder
	fmt.Fprintf(&b, "AffinityClass %q cannot be %s: %d HelmRelease(s) use it:\n", name, verb, len(users))
	for i, u := range users {
		if i == maxNamedReleases {
			fmt.Fprintf(&b, "  ... and %d more\n", len(users)-maxNamedReleases)
			break
		}
		fmt.Fprintf(&b, "  - %s\n", u)
	}
	fmt.Fprintf(&b, "list them with: kubectl get helmreleases.helm.toolkit.fluxcd.io -A -l %s=%s\n", classLabel, name)
	b.WriteString("move them to another class (spec.values.affinityClass) first, or create a new class instead of changing this one")
	return b.String()
}
