package placement

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// schedulingKey is where the resolved placement goes in the release's
// values, for the application's chart to render into its Pod templates.
const schedulingKey = "_scheduling"

// releaseClass is the class a release asks for, and where the name came from.
type releaseClass struct {
	Name   string
	Source string
}

// resolveClass picks the release's class: spec.values.affinityClass, else
// the tenant's defaultAffinityClass, else none.
func resolveClass(values map[string]any, t *tenant) (releaseClass, error) {
	if raw, ok := values["affinityClass"]; ok && raw != nil {
		name, ok := raw.(string)
		if !ok {
			return releaseClass{}, fmt.Errorf("spec.values.affinityClass must be a string, not %T", raw)
		}
		if name != "" {
			return releaseClass{Name: name, Source: "spec.values.affinityClass"}, nil
		}
	}
	if t != nil && t.Default != "" {
		return releaseClass{Name: t.Default, Source: "the tenant's defaultAffinityClass"}, nil
	}
	return releaseClass{}, nil
}

// schedulingValues is what the release's chart receives under _scheduling.
func schedulingValues(c *class) (map[string]any, error) {
	out := map[string]any{"affinityClass": c.Name}
	if len(c.NodeSelector) > 0 {
		sel := map[string]any{}
		for k, v := range c.NodeSelector {
			sel[k] = v
		}
		out["nodeSelector"] = sel
	}
	if c.Required != nil {
		raw, err := json.Marshal(map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": c.Required})
		if err != nil {
			return nil, err
		}
		var affinity map[string]any
		if err := json.Unmarshal(raw, &affinity); err != nil {
			return nil, err
		}
		out["nodeAffinity"] = affinity
	}
	return out, nil
}

// admitRelease resolves, checks and records a release's class: it sets the
// class label and spec.values._scheduling, or removes both when the release
// has no class. Only those two fields are patched, and a second pass
// changes nothing (safe under reinvocationPolicy IfNeeded). A denial from
// the caches is made again from the API server before it is returned.
func (m *Module) admitRelease(ctx context.Context, req admission.Request) admission.Response {
	// The webhook sees every HelmRelease: whether this one is an
	// application's is decided here, from both objects.
	isApp, err := hasLabel(req.Object.Raw, applicationKindLabel)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode HelmRelease: %w", err))
	}
	if !isApp {
		wasApp := false
		if req.Operation == admissionv1.Update {
			if wasApp, err = hasLabel(req.OldObject.Raw, applicationKindLabel); err != nil {
				return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the old HelmRelease: %w", err))
			}
		}
		if !wasApp {
			return admission.Allowed("not an application's HelmRelease")
		}
		if !m.isPlatform(req.UserInfo) {
			// Without the label the release would leave the module's
			// caches, and its class label and _scheduling would be the
			// writer's to choose.
			return module.NotPermitted(fmt.Sprintf("HelmRelease %s/%s: user %q may not remove the label %s: it marks the release as an application's, whose class and Pods placement checks, and only the platform may remove it; choose another class in spec.values.affinityClass, or delete the application",
				req.Namespace, req.Name, req.UserInfo.Username, applicationKindLabel))
		}
		return admission.Allowed("the platform removed the application label")
	}
	return m.admitApplicationRelease(ctx, req)
}

// admitApplicationRelease resolves an application's release from the
// caches; the server confirms a denial from the API server.
func (m *Module) admitApplicationRelease(ctx context.Context, req admission.Request) admission.Response {
	src := m.view
	if m.live != nil {
		if t, err := m.tenants.get(ctx, req.Namespace); err == nil && t == nil {
			// No tenant settings in the cache: Cozystack writes a tenant's
			// Secret and its first releases moments apart, and a miss here
			// would record "no class" in the release for good. One GET,
			// on a webhook off the hot path.
			src.tenants = m.live.tenants
		}
	}
	return m.mutateRelease(ctx, src, req)
}

// confirmRelease makes a release's denial again from the API server (the
// server runs it: module.Confirmation). Every denial of admitRelease but
// NotPermitted, which is not confirmed, is mutateRelease's.
func (m *Module) confirmRelease(ctx context.Context, req admission.Request, denial admission.Response) module.Confirmed {
	if m.live == nil {
		return module.Upheld(denial)
	}
	return module.LiveDecision(m.mutateRelease(ctx, *m.live, req))
}

// alreadyUses says whether the release had class before this write: a
// release may keep a class being deleted (its Pods are judged by it until
// the class is gone, which the class guard refuses while releases use it),
// so that Flux's next apply of an unchanged release is not refused.
func alreadyUses(req admission.Request, class string) bool {
	if req.Operation != admissionv1.Update {
		return false
	}
	var old struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return false
	}
	return old.Metadata.Labels[classLabel] == class
}

// hasLabel says whether the object in raw carries the label key.
func hasLabel(raw []byte, key string) (bool, error) {
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return false, err
	}
	_, ok := obj.Metadata.Labels[key]
	return ok, nil
}

func (m *Module) mutateRelease(ctx context.Context, src view, req admission.Request) admission.Response {
	// Numbers stay as written: the patch must touch only the two fields.
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(req.Object.Raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode HelmRelease: %w", err))
	}
	// One document, as the API server sends: the patch is computed
	// against the whole of Raw, which trailing data would make invalid
	// JSON (a 500 instead of this 400).
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return admission.Errored(http.StatusBadRequest, errors.New("decode HelmRelease: data after the object"))
	}
	metadata, _ := obj["metadata"].(map[string]any)
	spec, _ := obj["spec"].(map[string]any)
	if metadata == nil || spec == nil {
		return admission.Errored(http.StatusBadRequest, errors.New("HelmRelease without metadata or spec"))
	}
	values, _ := spec["values"].(map[string]any)
	name, _ := metadata["name"].(string)
	if name == "" {
		name, _ = metadata["generateName"].(string)
	}
	release := req.Namespace + "/" + name

	t, err := src.tenants.get(ctx, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, err)
	}
	if t != nil && t.Err != nil {
		return module.Deny(reasonTenantValuesInvalid, fmt.Sprintf("HelmRelease %s: %v; fix the tenant's values to proceed", release, t.Err))
	}
	want, err := resolveClass(values, t)
	if err != nil {
		return module.Deny(reasonClassValueInvalid, fmt.Sprintf("HelmRelease %s: %v", release, err))
	}

	labels, _ := metadata["labels"].(map[string]any)
	if want.Name == "" {
		delete(labels, classLabel)
		delete(values, schedulingKey)
		return patch(req.Object.Raw, obj)
	}
	c, found, err := src.classes.get(ctx, want.Name)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, err)
	}
	if !found {
		return module.Deny(reasonClassNotFound, fmt.Sprintf("HelmRelease %s: AffinityClass %q (from %s) not found%s",
			release, want.Name, want.Source, allowedHint(t, req.Namespace)))
	}
	if c.Terminating && !alreadyUses(req, want.Name) {
		return module.Deny(reasonClassTerminating, fmt.Sprintf("HelmRelease %s: AffinityClass %q (from %s) is being deleted: a release may keep it until it is gone, but not newly take it; choose another class in spec.values.affinityClass%s",
			release, want.Name, want.Source, allowedHint(t, req.Namespace)))
	}
	if !t.allows(want.Name) {
		return module.Deny(reasonClassNotAllowed, fmt.Sprintf("HelmRelease %s: AffinityClass %q (from %s) is not allowed in namespace %s; allowed classes: %s",
			release, want.Name, want.Source, req.Namespace, t.allowedText()))
	}
	scheduling, err := schedulingValues(c)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if labels == nil {
		labels = map[string]any{}
		metadata["labels"] = labels
	}
	labels[classLabel] = want.Name
	if values == nil {
		values = map[string]any{}
		spec["values"] = values
	}
	values[schedulingKey] = scheduling
	return patch(req.Object.Raw, obj)
}

func allowedHint(t *tenant, namespace string) string {
	if t == nil || t.Allowed == nil {
		return ""
	}
	return fmt.Sprintf("; allowed in namespace %s: %s", namespace, t.allowedText())
}

// patch answers with the JSON patch from the request's object to obj.
func patch(original []byte, obj map[string]any) admission.Response {
	modified, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(original, modified)
}
