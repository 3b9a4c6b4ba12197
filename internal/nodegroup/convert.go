package nodegroup

import (
	"context"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

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

// scheme knows the three served versions; hubSpoke converts between them
// through v1 with the context of the request, which carries the Hybrid
// lookup. Both are built once: they hold no state.
var scheme, hubSpoke = func() (*runtime.Scheme, conversion.Converter) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, v1alpha2.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	c, err := conversion.NewHubSpokeConverter(&v1.NodeGroup{},
		conversion.NewSpokeConverter(&v1alpha1.NodeGroup{}, fromHub[*v1alpha1.NodeGroup], toHub[*v1alpha1.NodeGroup]),
		conversion.NewSpokeConverter(&v1alpha2.NodeGroup{}, fromHub[*v1alpha2.NodeGroup], toHub[*v1alpha2.NodeGroup]),
	)(s)
	if err != nil {
		panic(err)
	}
	return s, c
}()

func toHub[T interface {
	ConvertToHub(context.Context, *v1.NodeGroup) error
}](ctx context.Context, src T, dst *v1.NodeGroup) error {
	return src.ConvertToHub(ctx, dst)
}

// fromHub adapts a spoke's ConvertFromHub, which needs no context, to the
// hub-and-spoke converter.
func fromHub[T interface{ ConvertFromHub(*v1.NodeGroup) error }](_ context.Context, src *v1.NodeGroup, dst T) error {
	return dst.ConvertFromHub(src)
}

// converter converts NodeGroups between the served versions through the
// v1 hub. It reads the cluster only through lookup, which answers from an
// informer, so a conversion never waits on the API server.
type converter struct {
	lookup v1.CloudPermanentLookup
}

// Convert converts every object of the review. When any object fails, the
// whole review fails, naming each failing object by its index.
func (c *converter) Convert(ctx context.Context, req *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error) {
	desired := req.DesiredAPIVersion
	switch desired {
	case hubVersion, alpha1Version, alpha2Version:
	default:
		return nil, fmt.Errorf("desiredAPIVersion %q is not a served NodeGroup version (%s, %s, %s)", desired, hubVersion, alpha2Version, alpha1Version)
	}
	ctx = v1.WithCloudPermanentLookup(ctx, c.lookup)
	out := make([]runtime.RawExtension, len(req.Objects))
	var failures []string
	for i, o := range req.Objects {
		var err error
		if out[i].Raw, err = convertObject(ctx, o.Raw, desired); err != nil {
			failures = append(failures, fmt.Sprintf("object %d %v", i, err))
		}
	}
	if len(failures) > 0 {
		return nil, fmt.Errorf("converting NodeGroups to %s failed for %d of %d objects: %s",
			desired, len(failures), len(req.Objects), strings.Join(failures, "; "))
	}
	return out, nil
}

// convertObject converts one object with the hub-and-spoke converter, the
// one conversion entry point; the JSON around it is read in one pass and
// written once (wire.go).
func convertObject(ctx context.Context, raw []byte, desired string) ([]byte, error) {
	w, err := readWire(raw, desired)
	switch {
	case err != nil:
		return nil, err
	case w == nil:
		return raw, nil // already in the desired version
	}
	src := w.obj
	before := src.(metav1.Object).GetAnnotations()
	dst, err := newNodeGroup(desired)
	if err != nil {
		return nil, err
	}
	if err := hubSpoke.ConvertObject(ctx, src, dst); err != nil {
		return nil, fmt.Errorf("(NodeGroup %q, %s): %w", nameOf(raw), w.apiVersion, err)
	}
	_, spec, status := parts(dst)
	return encodeWire(desired, &w.metadata, before, dst.(metav1.Object).GetAnnotations(), spec, status)
}

func newNodeGroup(apiVersion string) (runtime.Object, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	gvk := gv.WithKind(kind)
	obj, err := scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("apiVersion %q is not a served NodeGroup version", apiVersion)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// parts returns the metadata, spec and status of a NodeGroup of any served
// version, for the wire format to fill and read.
func parts(obj runtime.Object) (*metav1.ObjectMeta, any, any) {
	switch o := obj.(type) {
	case *v1.NodeGroup:
		return &o.ObjectMeta, &o.Spec, &o.Status
	case *v1alpha2.NodeGroup:
		return &o.ObjectMeta, &o.Spec, &o.Status
	case *v1alpha1.NodeGroup:
		return &o.ObjectMeta, &o.Spec, &o.Status
	}
	panic(fmt.Sprintf("%T is not a NodeGroup", obj))
}
