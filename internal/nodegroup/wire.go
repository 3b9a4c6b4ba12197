package nodegroup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"k8s.io/apimachinery/pkg/runtime"
)

// decodeStrict decodes spec or status refusing unknown fields: the API
// server prunes objects to the schema generated from these types, so an
// unknown field means the two disagree, and dropping it would lose data
// silently. go-json-experiment decodes about twice as fast as
// encoding/json; encoding stays with encoding/json, whose output the API
// server has always accepted.
func decodeStrict(raw []byte, into any) error {
	return jsonv2.Unmarshal(raw, into, jsonv2.RejectUnknownMembers(true))
}

// decodeWire fills obj, a NodeGroup of raw's version, from raw and returns
// raw's metadata. The top level is split by members, so metadata is never
// decoded whole: only its name and annotations are.
func decodeWire(raw []byte, obj runtime.Object) ([]byte, error) {
	meta, spec, status := parts(obj)
	var metadata []byte
	err := members(raw, func(key, value []byte) error {
		switch string(key) {
		case "apiVersion", "kind":
		case "metadata":
			metadata = value
		case "spec":
			return decodeStrict(value, spec)
		case "status":
			return decodeStrict(value, status)
		default:
			return fmt.Errorf("unknown field %q", key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decode: %w", explainDecodeError(raw, obj, err))
	}
	if len(metadata) > 0 {
		err := members(metadata, func(key, value []byte) error {
			switch string(key) {
			case "name":
				return decodeString(value, &meta.Name)
			case "annotations":
				return jsonv2.Unmarshal(value, &meta.Annotations)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("decode metadata: %w", err)
		}
	}
	return metadata, nil
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
func explainDecodeError(raw []byte, into runtime.Object, fast error) error {
	into = into.DeepCopyObject()
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
