package nodegroup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"k8s.io/apimachinery/pkg/runtime"
)

// The JSON around the hub-and-spoke converter is written here because the
// API server sends one object per review, and decoding metadata (a third of
// a stored object is managed fields) and encoding it again doubled the cost
// of a conversion and added 10 to 30 % to the whole request
// (docs/benchmarks.md). One jsontext decoder reads an object once, in
// order: apiVersion and kind decide whether there is anything to do;
// metadata is walked, not decoded, keeping its name, its annotations and
// where they sit; spec and status are decoded strictly into the source
// version's types from the same stream. The converted object is written
// with the metadata's own bytes, only its annotations member rewritten when
// the conversion changed them.

// strict makes spec and status refuse unknown fields: the API server prunes
// objects to the schema generated from these types, so an unknown field
// means the two disagree, and dropping it would lose data silently.
var strict = jsonv2.RejectUnknownMembers(true)

// decoders are reused, as go-json-experiment reuses its own: a decoder
// grows a string cache and stacks of member names, which one conversion
// would otherwise allocate afresh (8 KB and 70 allocations a conversion).
var decoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

var noInput = new(bytes.Buffer)

// wireObject is what one pass over an object read from it.
type wireObject struct {
	apiVersion string
	obj        runtime.Object // a NodeGroup of apiVersion
	metadata   wireMetadata
}

// readWire reads raw in one pass. It returns nil and no error when raw is
// already a NodeGroup of the desired version, which is then not read
// further. Errors are the conversion's, naming the object.
func readWire(raw []byte, desired string) (*wireObject, error) {
	dec := decoders.Get().(*jsontext.Decoder)
	dec.Reset(bytes.NewBuffer(raw))
	defer func() {
		dec.Reset(noInput) // not to pin raw
		decoders.Put(dec)
	}()
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, notAnObject(err)
	}
	w := &wireObject{}
	var apiVersion, objectKind string
	var haveVersion, haveKind bool
	// Members before apiVersion and kind wait for them: what the object is
	// decides what to do with them, and whether to look at them at all.
	type member struct {
		name  string
		value jsontext.Value
	}
	var early []member
	failed := func(err error) error {
		return fmt.Errorf("(NodeGroup %q, %s): %w", nameOf(raw), apiVersion, err)
	}
	malformed := func(err error) error {
		if w.obj == nil {
			return notAnObject(err)
		}
		return failed(fmt.Errorf("decode: %w", explainDecodeError(raw, w.obj, err)))
	}
	// decide learns what the object is once apiVersion and kind are known.
	decide := func() (passThrough bool, err error) {
		if objectKind != kind {
			return false, fmt.Errorf("(%s %q) is not a NodeGroup", objectKind, nameOf(raw))
		}
		if apiVersion == desired {
			return true, nil
		}
		if w.obj, err = newNodeGroup(apiVersion); err != nil {
			return false, failed(err)
		}
		for _, m := range early {
			if err := decodeMember(w.obj, m.name, m.value, nil); err != nil {
				return false, malformed(err)
			}
		}
		return false, nil
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, malformed(err)
		}
		switch name := tok.String(); name {
		case "apiVersion", "kind":
			var s string // null is the empty string, as encoding/json has it
			if err := jsonv2.UnmarshalDecode(dec, &s); err != nil {
				return nil, notAnObject(err)
			}
			if name == "kind" {
				objectKind, haveKind = s, true
			} else {
				apiVersion, haveVersion = s, true
			}
			if haveKind && haveVersion && w.obj == nil {
				if passThrough, err := decide(); passThrough || err != nil {
					return nil, err
				}
			}
		case "metadata":
			if w.metadata, err = readMetadata(dec, raw); err != nil {
				return nil, malformed(err)
			}
		default:
			if w.obj != nil {
				if err := decodeMember(w.obj, name, nil, dec); err != nil {
					return nil, malformed(err)
				}
				continue
			}
			value, err := dec.ReadValue()
			if err != nil {
				return nil, malformed(err)
			}
			early = append(early, member{name, bytes.Clone(value)})
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, malformed(err)
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, malformed(fmt.Errorf("data after the object: %v", err))
	}
	if w.obj == nil {
		// apiVersion or kind is missing: decide with what there is.
		if passThrough, err := decide(); passThrough || err != nil {
			return nil, err
		}
	}
	if w.metadata.err != nil {
		return nil, failed(fmt.Errorf("decode metadata: %w", w.metadata.err))
	}
	// The converter reads the name (the Hybrid lookup) and the annotations
	// (the lossless round trip); the rest of metadata stays bytes.
	meta, _, _ := parts(w.obj)
	meta.Name, meta.Annotations = w.metadata.name, w.metadata.annotations
	w.apiVersion = apiVersion
	return w, nil
}

func notAnObject(err error) error {
	if err == nil {
		err = errors.New("the value is not an object")
	}
	return fmt.Errorf("is not a JSON object: %w", err)
}

// decodeMember decodes spec or status into obj strictly, from value or,
// when value is nil, from dec; any other member is an unknown field.
func decodeMember(obj runtime.Object, name string, value jsontext.Value, dec *jsontext.Decoder) error {
	_, spec, status := parts(obj)
	var into any
	switch name {
	case "spec":
		into = spec
	case "status":
		into = status
	default:
		return fmt.Errorf("unknown field %q", name)
	}
	if value != nil {
		return jsonv2.Unmarshal(value, into, strict)
	}
	return jsonv2.UnmarshalDecode(dec, into, strict)
}

// nameOf decodes raw's name for an error message. Only a conversion that
// fails reads an object twice.
func nameOf(raw []byte) string {
	var h struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &h)
	return h.Metadata.Name
}

// explainDecodeError decodes raw again with encoding/json, whose messages
// name the field plainly, to report why the strict decoding failed.
func explainDecodeError(raw []byte, into runtime.Object, fast error) error {
	into = into.DeepCopyObject()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return err
	}
	return fast
}

// wireMetadata is an object's metadata as it came: the conversion reads its
// name and annotations, and writes it back unchanged but for its
// annotations member.
type wireMetadata struct {
	raw         []byte
	name        string
	annotations map[string]string
	err         error // why name or annotations do not decode

	// Offsets in raw. The annotations member runs from memberStart (the
	// end of the member before it, or just after the opening brace) to
	// valueEnd, its value from valueStart; valueEnd is 0 without one.
	// lastEnd is the end of the last member, 0 in an empty object.
	memberStart, valueStart, valueEnd, lastEnd int
}

// readMetadata walks the metadata object at dec: managed fields and the
// rest are validated and skipped, never decoded.
func readMetadata(dec *jsontext.Decoder, raw []byte) (wireMetadata, error) {
	var m wireMetadata
	if dec.PeekKind() != '{' {
		m.err = errors.New("not a well-formed JSON object")
		return m, dec.SkipValue()
	}
	if _, err := dec.ReadToken(); err != nil {
		return m, err
	}
	start := dec.InputOffset() - 1
	for dec.PeekKind() != '}' {
		memberStart := dec.InputOffset()
		tok, err := dec.ReadToken()
		if err != nil {
			return m, err
		}
		switch tok.String() {
		case "name":
			// An error leaves a syntax error in place for the next read.
			if err := jsonv2.UnmarshalDecode(dec, &m.name); err != nil {
				m.err = err
			}
		case "annotations":
			value, err := dec.ReadValue()
			if err != nil {
				return m, err
			}
			if err := jsonv2.Unmarshal(value, &m.annotations); err != nil {
				m.err = err
			}
			m.memberStart = int(memberStart - start)
			m.valueEnd = int(dec.InputOffset() - start)
			m.valueStart = m.valueEnd - len(value)
		default:
			if err := dec.SkipValue(); err != nil {
				return m, err
			}
		}
		m.lastEnd = int(dec.InputOffset() - start)
	}
	if _, err := dec.ReadToken(); err != nil {
		return m, err
	}
	m.raw = raw[start:dec.InputOffset()]
	return m, nil
}

// withAnnotations returns the metadata with its annotations member set to
// value, or removed when value is nil. Every other byte is kept.
func (m *wireMetadata) withAnnotations(value []byte) []byte {
	raw := m.raw
	member := func() []byte { return append([]byte(`"annotations":`), value...) }
	switch {
	case m.valueEnd > 0 && value != nil:
		return concat(raw[:m.valueStart], value, raw[m.valueEnd:])
	case m.valueEnd > 0 && m.memberStart > 1:
		return concat(raw[:m.memberStart], raw[m.valueEnd:]) // with the comma before it
	case m.valueEnd > 0:
		// The first member: the comma after it, if any, goes.
		rest := bytes.TrimLeft(raw[m.valueEnd:], " \t\r\n")
		if rest[0] == ',' {
			rest = bytes.TrimLeft(rest[1:], " \t\r\n")
		}
		return concat(raw[:m.memberStart], rest)
	case value == nil:
		return raw
	case m.lastEnd == 0:
		return concat([]byte("{"), member(), []byte("}"))
	default:
		return concat(raw[:m.lastEnd], []byte(","), member(), raw[m.lastEnd:])
	}
}

// encodeWire writes a converted object: the original metadata with the
// annotations the conversion left (before are those it started from), and
// the converted spec and status. An empty status is left out. encoding/json
// writes them, whose output the API server has always accepted.
func encodeWire(apiVersion string, metadata *wireMetadata, before, after map[string]string, spec, status any) ([]byte, error) {
	meta := metadata.raw
	if !maps.Equal(before, after) {
		var annotations []byte
		if len(after) > 0 {
			var err error
			if annotations, err = json.Marshal(after); err != nil {
				return nil, err
			}
		}
		meta = metadata.withAnnotations(annotations)
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
	b.Grow(len(meta) + len(specJSON) + len(statusJSON) + 96)
	b.WriteString(`{"apiVersion":`)
	b.WriteString(strconv.Quote(apiVersion))
	b.WriteString(`,"kind":"NodeGroup"`)
	if len(meta) > 0 {
		b.WriteString(`,"metadata":`)
		b.Write(meta)
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

func concat(parts ...[]byte) []byte {
	return bytes.Join(parts, nil)
}
