package reports

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gatehouse-dev/gatehouse/internal/module"
)

// FieldOwner is the server-side apply field manager of the reports.
const FieldOwner = "gatehouse"

// Options configure a Writer; zero values take the defaults in setDefaults.
type Options struct {
	// Client writes and lists the reports (live: they are read once per
	// audit run, on the leader, and no replica caches them).
	Client client.Client
	// Served says whether the API server serves a kind (the host's kind
	// tracker): nothing is written of a kind it does not.
	Served func(schema.GroupVersionKind) bool
	// Instance names the install; it starts every report's name.
	Instance string
	// MaxResults bounds the results of one report. Default 100.
	MaxResults int
	// API is the report API written. Default APIAuto.
	API API
}

func (o *Options) setDefaults() {
	if o.API == "" {
		o.API = APIAuto
	}
	if o.MaxResults <= 0 {
		o.MaxResults = DefaultMaxResults
	}
}

// DefaultMaxResults bounds a report: 100 results of at most 1 KiB of
// message each keep it far below etcd's 1.5 MiB whatever a tenant creates.
const DefaultMaxResults = 100

// Writer writes the findings of the modules' audits as reports.
type Writer struct {
	opts Options
	now  func() time.Time
}

// NewWriter returns a Writer.
func NewWriter(opts Options) *Writer {
	opts.setDefaults()
	return &Writer{opts: opts, now: time.Now}
}

// Write makes a module's reports say findings: it applies the report of
// each namespace with findings whose content changed and deletes the
// module's reports of namespaces without any, in the API chosen (apis).
// The module's reports in the other API, if served, are deleted: after
// OpenReports is installed (auto) or the API is switched, none is left
// saying what was true before. Kinds the API server does not serve are
// skipped.
func (w *Writer) Write(ctx context.Context, moduleName string, findings []module.Finding) error {
	groups := byNamespace(findings)
	ts := metav1.Timestamp{Seconds: w.now().Unix()}
	target, other := w.apis()
	var errs []error
	for _, kind := range []schema.GroupVersionKind{target.namespaced, target.cluster} {
		if !w.opts.Served(kind) {
			continue
		}
		existing, err := w.list(ctx, kind, moduleName)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for namespace, fs := range groups {
			if (namespace == "") != (kind == target.cluster) {
				continue
			}
			old := existing[namespace]
			desired := build(w.opts.Instance, moduleName, namespace, fs, w.opts.MaxResults, firstSeen(old), ts)
			desired.APIVersion, desired.Kind = kind.GroupVersion().String(), kind.Kind
			if err := w.apply(ctx, old, desired); err != nil {
				errs = append(errs, err)
			}
		}
		for namespace, old := range existing {
			if _, ok := groups[namespace]; ok {
				continue
			}
			// Mended: a namespace without findings has no report.
			errs = append(errs, w.delete(ctx, kind, old))
		}
	}
	for _, kind := range []schema.GroupVersionKind{other.namespaced, other.cluster} {
		if !w.opts.Served(kind) {
			continue
		}
		stale, err := w.list(ctx, kind, moduleName)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, old := range stale {
			errs = append(errs, w.delete(ctx, kind, old))
		}
	}
	return errors.Join(errs...)
}

// apis are the report API written and the other one.
func (w *Writer) apis() (target, other apiKinds) {
	switch w.opts.API {
	case APIOpenReports:
		return openReportsKinds, wgPolicyKinds
	case APIWGPolicy:
		return wgPolicyKinds, openReportsKinds
	default:
		if w.opts.Served(ReportKind) {
			return openReportsKinds, wgPolicyKinds
		}
		return wgPolicyKinds, openReportsKinds
	}
}

func (w *Writer) delete(ctx context.Context, kind schema.GroupVersionKind, old *unstructured.Unstructured) error {
	if err := w.opts.Client.Delete(ctx, old, client.Preconditions{UID: ptr.To(old.GetUID())}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s %s/%s: %w", kind.Kind, old.GetNamespace(), old.GetName(), err)
	}
	return nil
}

// list returns the module's reports of kind, by namespace. Reports of
// other installs and of other writers carry other labels or names.
func (w *Writer) list(ctx context.Context, kind schema.GroupVersionKind, moduleName string) (map[string]*unstructured.Unstructured, error) {
	out := map[string]*unstructured.Unstructured{}
	name := ReportName(w.opts.Instance, moduleName)
	// The name's field selector makes the API server authorize the list by
	// name, so that RBAC can grant list on this install's report names
	// alone (resourceNames); the label keeps another writer's namesake out.
	selectors := []client.ListOption{client.MatchingLabels(Labels(w.opts.Instance, moduleName)),
		client.MatchingFields{"metadata.name": name}, client.Limit(500)}
	opts := selectors
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(kind.GroupVersion().WithKind(kind.Kind + "List"))
		if err := w.opts.Client.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("list %s: %w", kind.Kind, err)
		}
		for i := range list.Items {
			if item := &list.Items[i]; item.GetName() == name {
				out[item.GetNamespace()] = item
			}
		}
		if list.GetContinue() == "" {
			return out, nil
		}
		opts = append(slices.Clone(selectors), client.Continue(list.GetContinue()))
	}
}

// apply writes desired unless old already says it.
func (w *Writer) apply(ctx context.Context, old *unstructured.Unstructured, desired report) error {
	obj, err := desired.object()
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	// ObjectMeta's zero creationTimestamp converts to null, which apply
	// would try to own.
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	if old != nil && equality.Semantic.DeepEqual(old.Object["results"], u.Object["results"]) &&
		equality.Semantic.DeepEqual(old.Object["summary"], u.Object["summary"]) &&
		labelsHeld(old.GetLabels(), desired.Metadata.Labels) {
		return nil
	}
	err = w.opts.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership)
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, "NamespaceTerminating"), apierrors.IsNotFound(err):
		// The namespace is going, and its report with it.
		logf.FromContext(ctx).V(1).Info("report not written: its namespace is being deleted", "namespace", u.GetNamespace())
		return nil
	default:
		return fmt.Errorf("apply %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
}

func labelsHeld(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// firstSeen is when each result of a report as it stands was first
// reported.
func firstSeen(old *unstructured.Unstructured) map[string]metav1.Timestamp {
	if old == nil {
		return nil
	}
	var r report
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(old.Object, &r); err != nil {
		return nil // written by hand or another version: every result is new
	}
	out := make(map[string]metav1.Timestamp, len(r.Results))
	for _, res := range r.Results {
		out[resultKey(res)] = res.Timestamp
	}
	return out
}
