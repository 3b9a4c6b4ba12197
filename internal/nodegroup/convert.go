package nodegroup

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha2"
)

const kind = "NodeGroup"

var (
	hubVersion    = v1.GroupVersion.String()
	alpha1Version = v1alpha1.GroupVersion.String()
	alpha2Version = v1alpha2.GroupVersion.String()
)

// converter converts NodeGroups between the served versions through the
// v1 hub. It reads the cluster only through lookup, which answers from an
// informer, so a conversion never waits on the API server.
type converter struct {
	lookup v1.CloudPermanentLookup
}

// Convert converts every object of the review. When any object fails, the
// whole review fails, naming each failing object by its index.
func (c *converter) Convert(_ context.Context, req *apiextensionsv1.ConversionRequest) ([]k8sruntime.RawExtension, error) {
	desired := req.DesiredAPIVersion
	switch desired {
	case hubVersion, alpha1Version, alpha2Version:
	default:
		return nil, fmt.Errorf("desiredAPIVersion %q is not a served NodeGroup version (%s, %s, %s)", desired, hubVersion, alpha2Version, alpha1Version)
	}
	out := make([]k8sruntime.RawExtension, len(req.Objects))
	errs := make([]error, len(req.Objects))
	forEachChunk(len(req.Objects), func(from, to int) {
		for i := from; i < to; i++ {
			out[i].Raw, errs[i] = c.convertObject(req.Objects[i].Raw, desired)
		}
	})
	var failures []string
	for i, err := range errs {
		if err != nil {
			failures = append(failures, fmt.Sprintf("object %d %v", i, err))
		}
	}
	if len(failures) > 0 {
		return nil, fmt.Errorf("converting NodeGroups to %s failed for %d of %d objects: %s",
			desired, len(failures), len(req.Objects), strings.Join(failures, "; "))
	}
	return out, nil
}

// minObjectsPerWorker keeps small reviews, the common case for writes, on
// one goroutine; LISTs through an old version send whole collections.
const minObjectsPerWorker = 32

// forEachChunk splits n objects into contiguous chunks, one per available
// CPU, and waits for all of them.
func forEachChunk(n int, do func(from, to int)) {
	workers := min(runtime.GOMAXPROCS(0), n/minObjectsPerWorker)
	if workers <= 1 {
		do(0, n)
		return
	}
	var wg sync.WaitGroup
	size := (n + workers - 1) / workers
	for from := 0; from < n; from += size {
		to := min(from+size, n)
		wg.Go(func() { do(from, to) })
	}
	wg.Wait()
}

func (c *converter) convertObject(raw []byte, desired string) ([]byte, error) {
	apiVersion, k, err := peekTypeMeta(raw)
	if err != nil {
		h, err := decodeHeader(raw)
		if err != nil {
			return nil, fmt.Errorf("is not a JSON object: %w", err)
		}
		apiVersion, k = h.APIVersion, h.Kind
	}
	if k != kind {
		h, _ := decodeHeader(raw)
		return nil, fmt.Errorf("(%s %q) is not a NodeGroup", k, h.Metadata.Name)
	}
	if apiVersion == desired {
		return raw, nil
	}
	converted, err := c.convertDecoded(raw, apiVersion, desired)
	if err != nil {
		h, _ := decodeHeader(raw)
		return nil, fmt.Errorf("(NodeGroup %q, %s): %w", h.Metadata.Name, apiVersion, err)
	}
	return converted, nil
}

// convertDecoded converts raw from one version to another through the hub.
// Metadata stays raw: only the name and annotations are decoded, and only
// the annotations are written back when the conversion changed them.
func (c *converter) convertDecoded(raw []byte, from, to string) ([]byte, error) {
	hub := &v1.NodeGroup{}
	var metadata []byte
	var before map[string]string
	switch from {
	case hubVersion:
		w, meta, err := decodeWire[v1.NodeGroupSpec, v1.NodeGroupStatus](raw)
		if err != nil {
			return nil, err
		}
		hub.ObjectMeta, hub.Spec, hub.Status = meta, w.Spec, w.Status
		metadata, before = w.Metadata, meta.Annotations
	case alpha2Version:
		w, meta, err := decodeWire[v1alpha2.NodeGroupSpec, v1alpha2.NodeGroupStatus](raw)
		if err != nil {
			return nil, err
		}
		src := &v1alpha2.NodeGroup{ObjectMeta: meta, Spec: w.Spec, Status: w.Status}
		if err := src.ConvertToHub(hub, c.lookup); err != nil {
			return nil, err
		}
		metadata, before = w.Metadata, meta.Annotations
	case alpha1Version:
		w, meta, err := decodeWire[v1alpha1.NodeGroupSpec, v1alpha1.NodeGroupStatus](raw)
		if err != nil {
			return nil, err
		}
		src := &v1alpha1.NodeGroup{ObjectMeta: meta, Spec: w.Spec, Status: w.Status}
		if err := src.ConvertToHub(hub, c.lookup); err != nil {
			return nil, err
		}
		metadata, before = w.Metadata, meta.Annotations
	default:
		return nil, fmt.Errorf("apiVersion %q is not a served NodeGroup version", from)
	}

	switch to {
	case alpha2Version:
		dst := &v1alpha2.NodeGroup{}
		if err := dst.ConvertFrom(hub); err != nil {
			return nil, err
		}
		return encodeWire(to, metadata, before, dst.Annotations, &dst.Spec, &dst.Status)
	case alpha1Version:
		dst := &v1alpha1.NodeGroup{}
		if err := dst.ConvertFrom(hub); err != nil {
			return nil, err
		}
		return encodeWire(to, metadata, before, dst.Annotations, &dst.Spec, &dst.Status)
	}
	return encodeWire(to, metadata, before, hub.Annotations, &hub.Spec, &hub.Status)
}
