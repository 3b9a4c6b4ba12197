package nodegroup

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
	kjson "sigs.k8s.io/json"

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

// header is what identifies an object.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func convertObject(ctx context.Context, raw []byte, desired string) ([]byte, error) {
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("is not a JSON object: %w", err)
	}
	if h.Kind != kind {
		return nil, fmt.Errorf("(%s %q) is not a NodeGroup", h.Kind, h.Metadata.Name)
	}
	if h.APIVersion == desired {
		return raw, nil
	}
	converted, err := convertTyped(ctx, raw, h.APIVersion, desired)
	if err != nil {
		return nil, fmt.Errorf("(NodeGroup %q, %s): %w", h.Metadata.Name, h.APIVersion, err)
	}
	return converted, nil
}

// convertTyped decodes raw into its version's Go type, converts it with
// the hub-and-spoke converter and encodes the result.
func convertTyped(ctx context.Context, raw []byte, from, to string) ([]byte, error) {
	src, err := newNodeGroup(from)
	if err != nil {
		return nil, err
	}
	if err := decodeObject(raw, src); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	dst, err := newNodeGroup(to)
	if err != nil {
		return nil, err
	}
	if err := hubSpoke.ConvertObject(ctx, src, dst); err != nil {
		return nil, err
	}
	return json.Marshal(dst)
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

// decodeObject decodes as the API server does (case-sensitive), refusing
// fields spec and status do not know: the API server prunes objects to the
// schema generated from these types, so an unknown field means the two
// disagree, and dropping it would lose data silently. Metadata is exempt:
// the API server keeps its own and takes back only labels and annotations.
func decodeObject(raw []byte, into runtime.Object) error {
	strict, err := kjson.UnmarshalStrict(raw, into)
	if err != nil {
		return err
	}
	var refused []string
	for _, e := range strict {
		if !strings.HasPrefix(e.Error(), `unknown field "metadata.`) {
			refused = append(refused, e.Error())
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("%s", strings.Join(refused, ", "))
	}
	return nil
}
