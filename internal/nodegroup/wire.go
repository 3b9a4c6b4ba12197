package nodegroup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"strconv"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha1"
	"github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1alpha2"
)

// wire is a NodeGroup as the API server sends it, with metadata kept as
// raw JSON. A conversion changes only annotations; decoding managed fields
// and encoding them again would cost more than the conversion itself, and
// passing metadata through byte for byte cannot alter it. decodeWire fills
// it member by member; the tags serve encoding/json when it decodes an
// object again to explain a failure.
type wire[Spec, Status any] struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	Spec       Spec            `json:"spec"`
	Status     Status          `json:"status"`
}

// decodeStrict decodes spec and status refusing unknown fields: the API
// server prunes objects to the schema generated from these types, so an
// unknown field means the two disagree, and dropping it would lose data
// silently. go-json-experiment decodes about twice as fast as
// encoding/json, which matters for reviews of whole collections; encoding
// stays with encoding/json.
func decodeStrict(raw []byte, into any) error {
	return jsonv2.Unmarshal(raw, into, jsonv2.RejectUnknownMembers(true))
}

// decodeWire decodes raw and returns it with the metadata a conversion
// needs as an ObjectMeta. The top level is split by members, so metadata
// is never decoded whole: only its name and annotations are.
func decodeWire[Spec, Status any](raw []byte) (*wire[Spec, Status], metav1.ObjectMeta, error) {
	w := &wire[Spec, Status]{}
	err := members(raw, func(key, value []byte) error {
		switch string(key) {
		case "apiVersion", "kind":
		case "metadata":
			w.Metadata = value
		case "spec":
			return decodeStrict(value, &w.Spec)
		case "status":
			return decodeStrict(value, &w.Status)
		default:
			return fmt.Errorf("unknown field %q", key)
		}
		return nil
	})
	if err != nil {
		return nil, metav1.ObjectMeta{}, fmt.Errorf("decode: %w", explainDecodeError(raw, w, err))
	}
	var meta metav1.ObjectMeta
	if len(w.Metadata) > 0 {
		err := members(w.Metadata, func(key, value []byte) error {
			switch string(key) {
			case "name":
				return decodeString(value, &meta.Name)
			case "annotations":
				return jsonv2.Unmarshal(value, &meta.Annotations)
			}
			return nil
		})
		if err != nil {
			return nil, metav1.ObjectMeta{}, fmt.Errorf("decode metadata: %w", err)
		}
	}
	return w, meta, nil
}

// decodeString decodes a JSON string, without a decoder when it has no escapes.
func decodeString(value []byte, into *string) error {
	if len(value) >= 2 && value[0] == '"' {
		if s, next, plain := scanString(value, 0); plain && next == len(value) {
			*into = string(s)
			return nil
		}
	}
	return json.Unmarshal(value, into)
}

// explainDecodeError decodes raw again with encoding/json, whose messages
// name the field plainly, to report why the fast decoder failed.
func explainDecodeError(raw []byte, into any, fast error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return err
	}
	return fast
}

// encodeWire writes a converted object: the original metadata with the
// annotations the conversion left (before are those it started from), and
// the converted spec and status. An empty status is left out.
func encodeWire(apiVersion string, metadata []byte, before, after map[string]string, spec, status any) ([]byte, error) {
	if !maps.Equal(before, after) {
		var annotations []byte
		if len(after) > 0 {
			var err error
			if annotations, err = json.Marshal(after); err != nil {
				return nil, err
			}
		}
		if len(metadata) == 0 {
			metadata = []byte("{}")
		}
		var err error
		if metadata, err = setMember(metadata, "annotations", annotations); err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	statusJSON, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(metadata) + len(specJSON) + len(statusJSON) + 96)
	b.WriteString(`{"apiVersion":`)
	b.WriteString(strconv.Quote(apiVersion))
	b.WriteString(`,"kind":"NodeGroup"`)
	if len(metadata) > 0 {
		b.WriteString(`,"metadata":`)
		b.Write(metadata)
	}
	b.WriteString(`,"spec":`)
	b.Write(specJSON)
	if string(statusJSON) != "{}" {
		b.WriteString(`,"status":`)
		b.Write(statusJSON)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var errMalformedObject = errors.New("not a well-formed JSON object")

// members calls fn with the key and raw value of each member of the JSON
// object obj, in order. Values are skipped by structure, not validated:
// whatever is decoded is validated by its decoder, and what is passed
// through came from the API server.
func members(obj []byte, fn func(key, value []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errMalformedObject
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return checkTrailing(obj, i+1)
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return errMalformedObject
		}
		k, next, plain := scanString(obj, i)
		if next < 0 {
			return errMalformedObject
		}
		if !plain {
			var name string
			if err := json.Unmarshal(obj[i:next], &name); err != nil {
				return errMalformedObject
			}
			k = []byte(name)
		}
		i = skipSpace(obj, next)
		if i >= len(obj) || obj[i] != ':' {
			return errMalformedObject
		}
		valueStart := skipSpace(obj, i+1)
		valueEnd := skipValue(obj, valueStart)
		if valueEnd < 0 {
			return errMalformedObject
		}
		if err := fn(k, obj[valueStart:valueEnd]); err != nil {
			return err
		}
		i = skipSpace(obj, valueEnd)
		switch {
		case i < len(obj) && obj[i] == ',':
			i = skipSpace(obj, i+1)
		case i < len(obj) && obj[i] == '}':
			return checkTrailing(obj, i+1)
		default:
			return errMalformedObject
		}
	}
}

func checkTrailing(obj []byte, i int) error {
	if skipSpace(obj, i) != len(obj) {
		return errMalformedObject
	}
	return nil
}

// setMember returns the JSON object obj with member key set to value, or
// removed when value is nil. Every other byte of obj is kept.
func setMember(obj []byte, key string, value []byte) ([]byte, error) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, errMalformedObject
	}
	open := i
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		if value == nil {
			return obj, nil
		}
		return concat(obj[:open+1], memberJSON(key, value), obj[i:]), nil
	}
	previousEnd := -1
	for {
		memberStart := i
		if i >= len(obj) || obj[i] != '"' {
			return nil, errMalformedObject
		}
		k, next, plain := scanString(obj, i)
		if next < 0 {
			return nil, errMalformedObject
		}
		name := string(k)
		if !plain {
			if err := json.Unmarshal(obj[i:next], &name); err != nil {
				return nil, errMalformedObject
			}
		}
		i = skipSpace(obj, next)
		if i >= len(obj) || obj[i] != ':' {
			return nil, errMalformedObject
		}
		valueStart := skipSpace(obj, i+1)
		valueEnd := skipValue(obj, valueStart)
		if valueEnd < 0 {
			return nil, errMalformedObject
		}
		i = skipSpace(obj, valueEnd)
		if i >= len(obj) || (obj[i] != ',' && obj[i] != '}') {
			return nil, errMalformedObject
		}
		last := obj[i] == '}'
		if name == key {
			switch {
			case value != nil:
				return concat(obj[:valueStart], value, obj[valueEnd:]), nil
			case !last:
				return concat(obj[:memberStart], obj[skipSpace(obj, i+1):]), nil
			case previousEnd >= 0:
				return concat(obj[:previousEnd], obj[valueEnd:]), nil
			default:
				return concat(obj[:memberStart], obj[i:]), nil
			}
		}
		if last {
			if value == nil {
				return obj, nil
			}
			return concat(obj[:valueEnd], []byte(","), memberJSON(key, value), obj[valueEnd:]), nil
		}
		previousEnd = valueEnd
		i = skipSpace(obj, i+1)
	}
}

func memberJSON(key string, value []byte) []byte {
	return append(append([]byte(strconv.Quote(key)), ':'), value...)
}

func concat(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// wireConverter is the hand-written conversion path: metadata passed
// through as raw JSON, spec and status decoded with go-json-experiment, big
// reviews split across the CPUs. It is kept for the comparison with the
// typed path in bench_test.go.
type wireConverter struct {
	lookup v1.CloudPermanentLookup
}

// Convert converts every object of the review. When any object fails, the
// whole review fails, naming each failing object by its index.
func (c *wireConverter) Convert(_ context.Context, req *apiextensionsv1.ConversionRequest) ([]k8sruntime.RawExtension, error) {
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

func (c *wireConverter) convertObject(raw []byte, desired string) ([]byte, error) {
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
func (c *wireConverter) convertDecoded(raw []byte, from, to string) ([]byte, error) {
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
		if err := src.ConvertToHub(v1.WithCloudPermanentLookup(context.Background(), c.lookup), hub); err != nil {
			return nil, err
		}
		metadata, before = w.Metadata, meta.Annotations
	case alpha1Version:
		w, meta, err := decodeWire[v1alpha1.NodeGroupSpec, v1alpha1.NodeGroupStatus](raw)
		if err != nil {
			return nil, err
		}
		src := &v1alpha1.NodeGroup{ObjectMeta: meta, Spec: w.Spec, Status: w.Status}
		if err := src.ConvertToHub(v1.WithCloudPermanentLookup(context.Background(), c.lookup), hub); err != nil {
			return nil, err
		}
		metadata, before = w.Metadata, meta.Annotations
	default:
		return nil, fmt.Errorf("apiVersion %q is not a served NodeGroup version", from)
	}

	switch to {
	case alpha2Version:
		dst := &v1alpha2.NodeGroup{}
		if err := dst.ConvertFromHub(hub); err != nil {
			return nil, err
		}
		return encodeWire(to, metadata, before, dst.Annotations, &dst.Spec, &dst.Status)
	case alpha1Version:
		dst := &v1alpha1.NodeGroup{}
		if err := dst.ConvertFromHub(hub); err != nil {
			return nil, err
		}
		return encodeWire(to, metadata, before, dst.Annotations, &dst.Spec, &dst.Status)
	}
	return encodeWire(to, metadata, before, hub.Annotations, &hub.Spec, &hub.Status)
}
