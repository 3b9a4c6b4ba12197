package spec

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// fieldSelector is a watched resource's fieldSelector: terms that must all
// hold. Kubernetes' own field selectors cover a few fields per kind
// (spec.ingressClassName is not one of them), so it is evaluated here, over
// any field, for the store and for admitted objects alike.
type FieldSelector []fieldTerm

type fieldTerm struct {
	path    *render.Indexer
	value   string
	Negated bool
	Text    string
}

// ParseFieldSelector reads "path=value,path!=value"; "==" is accepted for
// "=". Paths are written as indexBy expressions.
func ParseFieldSelector(s string) (FieldSelector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out FieldSelector
	for _, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		path, value, negated := "", "", false
		switch {
		case strings.Contains(term, "!="):
			path, value, _ = strings.Cut(term, "!=")
			negated = true
		case strings.Contains(term, "=="):
			path, value, _ = strings.Cut(term, "==")
		case strings.Contains(term, "="):
			path, value, _ = strings.Cut(term, "=")
		default:
			return nil, fmt.Errorf("term %q: want path=value or path!=value", term)
		}
		path = strings.TrimSpace(path)
		if path == "" {
			return nil, fmt.Errorf("term %q: the path is empty", term)
		}
		indexer, err := render.NewIndexer([]string{path})
		if err != nil {
			return nil, fmt.Errorf("term %q: %w", term, err)
		}
		out = append(out, fieldTerm{path: indexer, value: strings.TrimSpace(value), Negated: negated, Text: term})
	}
	return out, nil
}

// matches says whether obj satisfies every term; a missing field is "".
func (s FieldSelector) Matches(obj map[string]any) bool {
	for _, t := range s {
		keys, err := t.path.IndexKeys(obj)
		if err != nil {
			// A map or a list equals no value.
			if !t.Negated {
				return false
			}
			continue
		}
		if (keys[0] == t.value) == t.Negated {
			return false
		}
	}
	return true
}

// selects says whether the store of w would hold obj, given the labels of
// obj's namespace (nil when unknown or cluster-scoped).
func (w *Watched) selects(obj map[string]any, namespaceLabels labels.Set, clusterScoped bool) bool {
	if !w.Labels.Empty() && !w.Labels.Matches(objectLabels(obj)) {
		return false
	}
	if w.Namespaces != nil && !clusterScoped && !w.Namespaces.Matches(namespaceLabels) {
		return false
	}
	return w.fields.Matches(obj)
}

// selectsIn is selects for an object of namespace, looking the namespace's
// labels up only when the watched resource selects namespaces.
func (w *Watched) SelectsIn(obj map[string]any, namespace string, clusterScoped bool, namespaceLabels func(string) labels.Set) bool {
	var nsLabels labels.Set
	if w.Namespaces != nil && !clusterScoped {
		nsLabels = namespaceLabels(namespace)
	}
	return w.selects(obj, nsLabels, clusterScoped)
}

func objectLabels(obj map[string]any) labels.Set {
	meta, _ := obj["metadata"].(map[string]any)
	out := labels.Set{}
	if l, ok := meta["labels"].(map[string]any); ok {
		for k, v := range l {
			if s, ok := v.(string); ok {
				out[k] = s
			}
		}
	}
	return out
}

// Narrows says whether a label selector leaves out objects without some
// label: only a positive requirement (=, ==, in, exists) does. NotIn, != and
// DoesNotExist alone are met by an object with no labels at all, so they
// narrow nothing: every object a label selector is meant to keep out, and
// every one created later, matches them. labels.Nothing() (which selects
// nothing) narrows; nil is no selector.
func Narrows(sel labels.Selector) bool {
	if sel == nil {
		return false
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return true
	}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In, selection.Exists:
			return true
		}
	}
	return false
}

// NamedBy says whether sel names namespace by its name label (the
// kubernetes.io/metadata.name label the API server sets): an author who
// wrote the name knows it, and may read it back in a refusal or the status.
func NamedBy(sel labels.Selector, namespace string) bool {
	if sel == nil {
		return false
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if r.Key() != corev1.LabelMetadataName {
			continue
		}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if r.Values().Has(namespace) {
				return true
			}
		}
	}
	return false
}
