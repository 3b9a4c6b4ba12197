package nodegroup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
func (c *converter) Convert(_ context.Context, req *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error) {
	desired := req.DesiredAPIVersion
	switch desired {
	case hubVersion, alpha1Version, alpha2Version:
	default:
		return nil, fmt.Errorf("desiredAPIVersion %q is not a served NodeGroup version (%s, %s, %s)", desired, hubVersion, alpha2Version, alpha1Version)
	}
	out := make([]runtime.RawExtension, len(req.Objects))
	var failures []string
	for i := range req.Objects {
		raw, err := c.convertObject(req.Objects[i].Raw, desired)
		if err != nil {
			failures = append(failures, fmt.Sprintf("object %d %v", i, err))
			continue
		}
		out[i].Raw = raw
	}
	if len(failures) > 0 {
		return nil, fmt.Errorf("converting NodeGroups to %s failed for %d of %d objects: %s",
			desired, len(failures), len(req.Objects), strings.Join(failures, "; "))
	}
	return out, nil
}

// header is what identifies an object before it is decoded whole.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func (c *converter) convertObject(raw []byte, desired string) ([]byte, error) {
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
	hub, err := c.toHub(raw, h.APIVersion)
	if err == nil {
		raw, err = fromHub(hub, desired)
	}
	if err != nil {
		return nil, fmt.Errorf("(NodeGroup %q, %s): %w", h.Metadata.Name, h.APIVersion, err)
	}
	return raw, nil
}

func (c *converter) toHub(raw []byte, apiVersion string) (*v1.NodeGroup, error) {
	hub := &v1.NodeGroup{}
	switch apiVersion {
	case hubVersion:
		return hub, decodeStrict(raw, hub)
	case alpha2Version:
		src := &v1alpha2.NodeGroup{}
		if err := decodeStrict(raw, src); err != nil {
			return nil, err
		}
		return hub, src.ConvertToHub(hub, c.lookup)
	case alpha1Version:
		src := &v1alpha1.NodeGroup{}
		if err := decodeStrict(raw, src); err != nil {
			return nil, err
		}
		return hub, src.ConvertToHub(hub, c.lookup)
	}
	return nil, fmt.Errorf("apiVersion %q is not a served NodeGroup version", apiVersion)
}

func fromHub(hub *v1.NodeGroup, desired string) ([]byte, error) {
	var out runtime.Object
	switch desired {
	case hubVersion:
		out = hub
	case alpha2Version:
		dst := &v1alpha2.NodeGroup{}
		if err := dst.ConvertFrom(hub); err != nil {
			return nil, err
		}
		out = dst
	case alpha1Version:
		dst := &v1alpha1.NodeGroup{}
		if err := dst.ConvertFrom(hub); err != nil {
			return nil, err
		}
		out = dst
	}
	out.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(desired, kind))
	return json.Marshal(out)
}

// decodeStrict refuses fields the Go types do not know: the API server
// prunes objects to the schema generated from these types, so an unknown
// field means the two disagree, and dropping it would lose data silently.
func decodeStrict(raw []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}
