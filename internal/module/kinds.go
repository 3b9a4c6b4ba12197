package module

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ReaderWithKinds returns one reader for a module's decisions over its
// cache and its optional kinds: each kind of kinds is read through its Kind
// (NotFound, empty while it cannot be read), every other kind through r.
// The decision code then takes one client.Reader, this one on the hot
// path and Host.APIReader to confirm a denial.
func ReaderWithKinds(r client.Reader, scheme *runtime.Scheme, kinds ...Kind) client.Reader {
	byGVK := make(map[schema.GroupVersionKind]Kind, len(kinds))
	for _, k := range kinds {
		byGVK[k.GVK()] = k
	}
	return kindsReader{fallback: r, scheme: scheme, kinds: byGVK}
}

type kindsReader struct {
	fallback client.Reader
	scheme   *runtime.Scheme
	kinds    map[schema.GroupVersionKind]Kind
}

func (k kindsReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return k.readerOf(obj, false).Get(ctx, key, obj, opts...)
}

func (k kindsReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return k.readerOf(list, true).List(ctx, list, opts...)
}

// readerOf picks the Kind of obj's kind, or the fallback (which reports
// an object whose kind the scheme does not know).
func (k kindsReader) readerOf(obj runtime.Object, isList bool) client.Reader {
	gvk, err := apiutil.GVKForObject(obj, k.scheme)
	if err != nil {
		return k.fallback
	}
	if isList {
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	if kind, ok := k.kinds[gvk]; ok {
		return kind
	}
	return k.fallback
}
