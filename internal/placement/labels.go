package placement

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json/v1"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// The labels Cozystack's lineage webhook puts on the objects of an
// application, and that the lineage-labels switch has Gatehouse put on
// Pods (docs/placement.md, "Lineage labels").
const (
	applicationGroupLabel = "apps.cozystack.io/application.group"
	applicationNameLabel  = "apps.cozystack.io/application.name"
	// managedByLabel is also the key of the objectSelector by which
	// Cozystack's lineage webhook skips objects already labelled.
	managedByLabel      = "internal.cozystack.io/managed-by-cozystack"
	tenantResourceLabel = "internal.cozystack.io/tenantresource"
)

// ambiguousWarning is Cozystack's warning for an object of two
// applications, of which the first is used.
const ambiguousWarning = "object ancestry ambiguous, using first ancestor found"

// lineageLabels are the labels of the application a Pod belongs to: the
// three application labels Cozystack's API puts on the application's
// HelmRelease, copied, and the two markers Cozystack's lineage webhook adds.
// A Pod is never a tenant resource (Cozystack computes that for Secrets,
// Services and Ingresses only, and writes "false" on the rest).
func lineageLabels(release *metav1.PartialObjectMetadata) (map[string]string, bool) {
	kind, group, name := release.Labels[applicationKindLabel], release.Labels[applicationGroupLabel], release.Labels[applicationNameLabel]
	if kind == "" || group == "" || name == "" {
		return nil, false
	}
	return map[string]string{
		applicationGroupLabel: group,
		applicationKindLabel:  kind,
		applicationNameLabel:  name,
		managedByLabel:        "true",
		tenantResourceLabel:   "false",
	}, true
}

// labelPod puts the lineage labels of the Pod's application on it, from the
// same cached walk as the placement check: no read of the API server.
// Only the Pod's metadata is decoded. A Pod whose lineage cannot be walked,
// or reaches no application, is admitted unchanged: labelling never refuses
// a Pod. Labels already on the Pod are overwritten only when an application
// is found (as Cozystack does), so objects the platform labelled ahead
// (KubeVirt's virt-launcher Pods) keep their labels.
func (m *Module) labelPod(ctx context.Context, req admission.Request) admission.Response {
	var pod struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode Pod: %w", err))
	}
	log := logf.FromContext(ctx).WithValues("pod", req.Namespace+"/"+podNameOf(&pod.Metadata))
	l := walkLineage(ctx, req.Namespace, &pod.Metadata, m.owners)
	if l.Err != nil {
		podsLabelled.WithLabelValues("undecided").Inc()
		log.Error(l.Err, "lineage labels not applied: the lineage could not be walked")
		return admission.Allowed("lineage not walked")
	}
	var labels map[string]string
	var apps []string
	seen := map[string]bool{}
	for _, key := range l.Releases {
		release, found, err := m.releases.get(ctx, key)
		if err != nil {
			podsLabelled.WithLabelValues("undecided").Inc()
			log.Error(err, "lineage labels not applied: a release could not be read")
			return admission.Allowed("release not read")
		}
		if !found {
			continue
		}
		these, ok := lineageLabels(release)
		if !ok {
			continue
		}
		app := these[applicationGroupLabel] + "/" + these[applicationKindLabel] + "/" + these[applicationNameLabel]
		if seen[app] {
			continue
		}
		seen[app] = true
		apps = append(apps, app)
		if labels == nil {
			labels = these
		}
	}
	if labels == nil {
		podsLabelled.WithLabelValues("no-application").Inc()
		return admission.Allowed("no application in the lineage")
	}
	resp := admission.Response{
		AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true, PatchType: ptr.To(admissionv1.PatchTypeJSONPatch)},
		Patches:           labelPatch(pod.Metadata.Labels, labels),
	}
	if len(apps) > 1 {
		resp.Warnings = []string{ambiguousWarning}
		log.Info("Pod of several applications; labelled with the first", "applications", apps)
	}
	podsLabelled.WithLabelValues("labelled").Inc()
	return resp
}

// labelPatch sets labels on an object whose labels are current: one add of
// the whole map when it has none, else one add per label (add replaces a
// member that exists). Sorted, so that a second pass gives the same patch.
func labelPatch(current, labels map[string]string) []jsonpatch.JsonPatchOperation {
	if current == nil {
		value := make(map[string]any, len(labels))
		for k, v := range labels {
			value[k] = v
		}
		return []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/labels", Value: value}}
	}
	var out []jsonpatch.JsonPatchOperation
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if got, ok := current[k]; ok && got == labels[k] {
			continue
		}
		out = append(out, jsonpatch.JsonPatchOperation{Operation: "add", Path: "/metadata/labels/" + escapePointer(k), Value: labels[k]})
	}
	return out
}

// escapePointer escapes a JSON pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func podNameOf(meta *metav1.ObjectMeta) string {
	if meta.Name != "" {
		return meta.Name
	}
	return meta.GenerateName
}
