package module

import (
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// HostCacheOptions completes a module's cache options as the host builds
// every module cache and followed kind's cache (internal/app's host, which
// `gatehouse test` sets its modules up with too, so that the tool meant to
// predict the cluster caches as it does): the host's scheme, mapper and
// HTTP client; managedFields stripped unless the
// module transforms objects itself (no decision reads them, and they are
// about half of what a cache holds); and a read of a type without an
// informer an error rather than a cluster-wide informer started by
// accident.
func HostCacheOptions(opts cache.Options, scheme *runtime.Scheme, mapper meta.RESTMapper, httpClient *http.Client) cache.Options {
	opts.Scheme, opts.Mapper, opts.HTTPClient = scheme, mapper, httpClient
	if opts.DefaultTransform == nil {
		opts.DefaultTransform = cache.TransformStripManagedFields()
	}
	opts.ReaderFailOnMissingInformer = true
	return opts
}
