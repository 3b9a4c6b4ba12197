package policytest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// apiServer serves a suite's cluster state (over HTTP, in process:
// transport.go) as kube-apiserver
// serves it to Gatehouse's clients: lists and gets (typed, unstructured and
// metadata-only, with label and field selectors) and watches, which send
// the initial objects when asked (watch-list) and then nothing, the state
// being fixed. It is a fake because a suite must run where no cluster is;
// what it does not serve (a write, a resource it does not hold) is refused
// with an error the caller sees, never answered with a guess.
type apiServer struct {
	mapper      meta.RESTMapper
	objects     map[schema.GroupVersionResource][]*unstructured.Unstructured
	permissions []Permission
	// stop ends the watches when the suite is done.
	stop chan struct{}
}

// fixedResourceVersion is every object's and list's resourceVersion: the
// state never changes.
const fixedResourceVersion = "1"

func newAPIServer(mapper meta.RESTMapper, objs []*unstructured.Unstructured, perms []Permission) (*apiServer, error) {
	a := &apiServer{mapper: mapper, objects: map[schema.GroupVersionResource][]*unstructured.Unstructured{}, permissions: perms, stop: make(chan struct{})}
	for _, o := range objs {
		o = o.DeepCopy()
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("object %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if o.GetNamespace() == "" {
				o.SetNamespace(metav1.NamespaceDefault)
			}
		} else {
			o.SetNamespace("")
		}
		normalize(o)
		list := a.objects[mapping.Resource]
		// A later object of the same name replaces an earlier one.
		list = slices.DeleteFunc(list, func(p *unstructured.Unstructured) bool {
			return p.GetNamespace() == o.GetNamespace() && p.GetName() == o.GetName()
		})
		a.objects[mapping.Resource] = append(list, o)
	}
	return a, nil
}

// normalize does what kube-apiserver does to every stored object that a
// decision could notice: a resourceVersion and uid, and a Secret's
// stringData merged into data.
func normalize(o *unstructured.Unstructured) {
	if o.GetResourceVersion() == "" {
		o.SetResourceVersion(fixedResourceVersion)
	}
	if o.GetUID() == "" {
		o.SetUID(types.UID("suite-" + strings.ToLower(o.GetKind()) + "-" + o.GetNamespace() + "-" + o.GetName()))
	}
	mergeStringData(o)
}

// mergeStringData merges a Secret's stringData into its data, as
// kube-apiserver does on decoding, before any webhook sees the Secret.
func mergeStringData(o *unstructured.Unstructured) {
	if o.GetAPIVersion() == "v1" && o.GetKind() == "Secret" {
		if sd, ok, _ := unstructured.NestedStringMap(o.Object, "stringData"); ok {
			data, _, _ := unstructured.NestedMap(o.Object, "data")
			if data == nil {
				data = map[string]any{}
			}
			for k, v := range sd {
				data[k] = base64.StdEncoding.EncodeToString([]byte(v))
			}
			_ = unstructured.SetNestedMap(o.Object, data, "data")
			unstructured.RemoveNestedField(o.Object, "stringData")
		}
	}
}

// Close ends the watches.
func (a *apiServer) Close() { close(a.stop) }

type resourcePath struct {
	gvr                      schema.GroupVersionResource
	namespace, name, subPath string
}

// parsePath reads /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] and
// /apis/GROUP/VERSION/...
func parsePath(p string) (resourcePath, bool) {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	var rp resourcePath
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		rp.gvr.Version, segs = segs[1], segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		rp.gvr.Group, rp.gvr.Version, segs = segs[1], segs[2], segs[3:]
	default:
		return rp, false
	}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		rp.namespace, segs = segs[1], segs[2:]
	}
	rp.gvr.Resource = segs[0]
	if len(segs) > 1 {
		rp.name = segs[1]
	}
	if len(segs) > 2 {
		rp.subPath = strings.Join(segs[2:], "/")
	}
	return rp, true
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rp, ok := parsePath(r.URL.Path)
	if !ok {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the offline API server of gatehouse test serves no "+r.URL.Path)
		return
	}
	switch r.Method {
	case http.MethodGet:
		a.serveRead(w, r, rp)
	case http.MethodPost:
		a.serveCreate(w, r, rp)
	default:
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
			fmt.Sprintf("gatehouse test runs offline: %s of %s is refused", r.Method, rp.gvr.Resource))
	}
}

func (a *apiServer) serveRead(w http.ResponseWriter, r *http.Request, rp resourcePath) {
	gvk, err := a.mapper.KindFor(rp.gvr)
	if err != nil {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("the server could not find the requested resource %s", rp.gvr))
		return
	}
	metadataOnly := strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata")
	q := r.URL.Query()
	if rp.name != "" {
		if rp.subPath != "" {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "subresource "+rp.subPath+" is not served offline")
			return
		}
		for _, o := range a.objects[rp.gvr] {
			if o.GetNamespace() == rp.namespace && o.GetName() == rp.name {
				writeJSON(w, http.StatusOK, present(o, metadataOnly))
				return
			}
		}
		writeNotFound(w, rp, gvk)
		return
	}
	selected, err := a.selected(rp, q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	if watch, _ := strconv.ParseBool(q.Get("watch")); watch {
		initial, _ := strconv.ParseBool(q.Get("sendInitialEvents"))
		timeout, _ := strconv.Atoi(q.Get("timeoutSeconds"))
		a.serveWatch(w, r, gvk, selected, metadataOnly, initial, time.Duration(timeout)*time.Second)
		return
	}
	items := make([]any, len(selected))
	for i, o := range selected {
		items[i] = present(o, metadataOnly)
	}
	list := map[string]any{
		"apiVersion": rp.gvr.GroupVersion().String(), "kind": gvk.Kind + "List",
		"metadata": map[string]any{"resourceVersion": fixedResourceVersion}, "items": items,
	}
	if metadataOnly {
		list["apiVersion"], list["kind"] = "meta.k8s.io/v1", "PartialObjectMetadataList"
	}
	writeJSON(w, http.StatusOK, list)
}

// selected are the objects of a list: in the namespace, when one is
// given, and matching both selectors.
func (a *apiServer) selected(rp resourcePath, labelSelector, fieldSelector string) ([]*unstructured.Unstructured, error) {
	ls, err := labels.Parse(labelSelector)
	if err != nil {
		return nil, fmt.Errorf("labelSelector: %w", err)
	}
	fs, err := fields.ParseSelector(fieldSelector)
	if err != nil {
		return nil, fmt.Errorf("fieldSelector: %w", err)
	}
	var out []*unstructured.Unstructured
	for _, o := range a.objects[rp.gvr] {
		if rp.namespace != "" && o.GetNamespace() != rp.namespace {
			continue
		}
		if !ls.Matches(labels.Set(o.GetLabels())) || !fs.Matches(fieldSet(o, fs)) {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// fieldSet holds the values of the fields a selector names, read from the
// object by their dotted paths (metadata.name, spec.nodeName, status.phase).
func fieldSet(o *unstructured.Unstructured, fs fields.Selector) fields.Set {
	set := fields.Set{}
	for _, req := range fs.Requirements() {
		v, found, _ := unstructured.NestedFieldNoCopy(o.Object, strings.Split(req.Field, ".")...)
		if found && v != nil {
			set[req.Field] = fmt.Sprint(v)
		} else {
			set[req.Field] = ""
		}
	}
	return set
}

// serveWatch sends the initial objects when asked (watch-list, ending with
// the bookmark that says so), then holds the watch open without events
// until the client, the timeout or the suite ends it.
func (a *apiServer) serveWatch(w http.ResponseWriter, r *http.Request, gvk schema.GroupVersionKind, objs []*unstructured.Unstructured, metadataOnly, initial bool, timeout time.Duration) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	if initial {
		for _, o := range objs {
			_ = enc.Encode(map[string]any{"type": "ADDED", "object": present(o, metadataOnly)})
		}
		bookmark := map[string]any{
			"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
			"metadata": map[string]any{"resourceVersion": fixedResourceVersion, "annotations": map[string]any{metav1.InitialEventsAnnotationKey: "true"}},
		}
		if metadataOnly {
			bookmark["apiVersion"], bookmark["kind"] = "meta.k8s.io/v1", "PartialObjectMetadata"
		}
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": bookmark})
	}
	if flusher != nil {
		flusher.Flush()
	}
	var expire <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	select {
	case <-r.Context().Done():
	case <-a.stop:
	case <-expire:
	}
}

// present is the object as a read returns it: whole, or its metadata as a
// PartialObjectMetadata.
func present(o *unstructured.Unstructured, metadataOnly bool) map[string]any {
	if !metadataOnly {
		return o.Object
	}
	return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": o.Object["metadata"]}
}

func (a *apiServer) serveCreate(w http.ResponseWriter, r *http.Request, rp resourcePath) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	switch {
	case rp.gvr.Group == authorizationv1.GroupName && rp.gvr.Resource == "subjectaccessreviews":
		var sar authorizationv1.SubjectAccessReview
		if err := decodeBody(body, &sar); err != nil {
			writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
			return
		}
		sar.Status.Allowed, sar.Status.Reason = a.authorize(sar.Spec)
		writeJSON(w, http.StatusCreated, &sar)
	case rp.gvr.Group == authorizationv1.GroupName && rp.gvr.Resource == "selfsubjectaccessreviews":
		// Gatehouse itself: offline it holds the rights its chart grants.
		var review authorizationv1.SelfSubjectAccessReview
		if err := decodeBody(body, &review); err != nil {
			writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
			return
		}
		review.Status.Allowed = true
		writeJSON(w, http.StatusCreated, &review)
	case rp.gvr.Resource == "events":
		// Events a decision records (pvsafe's bypass) are dropped.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	default:
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
			fmt.Sprintf("gatehouse test runs offline: create of %s is refused", rp.gvr.Resource))
	}
}

// authorize answers a SubjectAccessReview from the suite's permissions;
// system:masters may do anything, as RBAC lets it.
func (a *apiServer) authorize(spec authorizationv1.SubjectAccessReviewSpec) (bool, string) {
	if slices.Contains(spec.Groups, "system:masters") {
		return true, "system:masters"
	}
	attrs := spec.ResourceAttributes
	if attrs == nil {
		return false, "no permission of the suite grants non-resource requests"
	}
	resource := attrs.Resource
	if attrs.Subresource != "" {
		resource += "/" + attrs.Subresource
	}
	for i, p := range a.permissions {
		if (p.User != "" && p.User != spec.User) || (p.Group != "" && !slices.Contains(spec.Groups, p.Group)) {
			continue
		}
		if matches(p.Verbs, attrs.Verb) && matches(p.Resources, resource) &&
			(len(p.APIGroups) == 0 || matches(p.APIGroups, attrs.Group)) &&
			(len(p.Namespaces) == 0 || matches(p.Namespaces, attrs.Namespace)) &&
			(len(p.Names) == 0 || matches(p.Names, attrs.Name)) {
			return true, fmt.Sprintf("the suite's permissions[%d]", i)
		}
	}
	return false, "no permission of the suite grants it"
}

// decodeBody reads a request body as kube-apiserver does: JSON, or
// protobuf, which controller-runtime's client sends for built-in kinds.
func decodeBody(body []byte, into runtime.Object) error {
	_, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, into)
	return err
}

func matches(list []string, v string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, v)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	writeJSON(w, code, &metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message,
	})
}

func writeNotFound(w http.ResponseWriter, rp resourcePath, gvk schema.GroupVersionKind) {
	writeJSON(w, http.StatusNotFound, &metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("%s %q not found", rp.gvr.GroupResource(), rp.name),
		Details: &metav1.StatusDetails{Name: rp.name, Group: gvk.Group, Kind: rp.gvr.Resource},
	})
}
