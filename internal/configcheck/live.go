package configcheck

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// liveStores builds the config's stores from the API server's lists, to
// confirm a denial. It costs a list per watched resource (tens of
// milliseconds for a thousand objects), paid only when a request would be
// refused.
func (m *Module) liveStores(ctx context.Context, st *configState) (map[string]render.IndexedStore, error) {
	out := make(map[string]render.IndexedStore, len(st.feeds)+len(st.empty))
	for name, s := range st.empty {
		out[name] = s
	}
	reader := m.host.APIReader()
	for name, f := range st.feeds {
		gvk := st.gvks[name]
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := reader.List(ctx, list, client.MatchingLabelsSelector{Selector: f.spec.Labels}); err != nil {
			return nil, err
		}
		objs := make([]map[string]any, 0, len(list.Items))
		nsLabels := m.namespaceLabelsOnce()
		for i := range list.Items {
			item := &list.Items[i]
			ns := item.GetNamespace()
			if f.clusterScoped {
				ns = ""
			}
			if st.permits(name, ns) && f.spec.SelectsIn(item.Object, item.GetNamespace(), f.clusterScoped, nsLabels) {
				objs = append(objs, f.spec.Stored(item.Object))
			}
		}
		store, err := render.NewMemoryStore(f.spec.Indexer, objs...)
		if err != nil {
			return nil, err
		}
		out[name] = store
	}
	return out, nil
}
