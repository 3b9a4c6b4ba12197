package module

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Scope is the part of a followed kind the host caches: the API server
// applies it to the list and watch, so that objects outside it are never
// held. The zero Scope is every object of the kind.
type Scope struct {
	// Namespaces limits the kind to these namespaces; empty is every
	// namespace (and the only scope of a cluster-scoped kind).
	Namespaces []string
	// Labels selects objects by label; nil is every object.
	Labels labels.Selector
	// Fields selects objects by field; nil is every object.
	Fields fields.Selector
}

// Key is the scope in a canonical form: two scopes with the same key
// select the same objects, and their followers share one cache.
func (s Scope) Key() string {
	ns := slices.Clone(s.Namespaces)
	slices.Sort(ns)
	ns = slices.Compact(ns)
	var b strings.Builder
	b.WriteString("namespaces=")
	b.WriteString(strings.Join(ns, ","))
	if s.Labels != nil && !s.Labels.Empty() {
		b.WriteString(";labels=")
		b.WriteString(s.Labels.String())
	}
	if s.Fields != nil && !s.Fields.Empty() {
		b.WriteString(";fields=")
		b.WriteString(s.Fields.String())
	}
	return b.String()
}

// CacheOptions are the options of a cache holding the kind in this scope;
// the host completes them (scheme, mapper, the managedFields transform).
func (s Scope) CacheOptions() cache.Options {
	var opts cache.Options
	if len(s.Namespaces) > 0 {
		opts.DefaultNamespaces = make(map[string]cache.Config, len(s.Namespaces))
		for _, ns := range s.Namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	if s.Labels != nil && !s.Labels.Empty() {
		opts.DefaultLabelSelector = s.Labels
	}
	if s.Fields != nil && !s.Fields.Empty() {
		opts.DefaultFieldSelector = s.Fields
	}
	return opts
}
