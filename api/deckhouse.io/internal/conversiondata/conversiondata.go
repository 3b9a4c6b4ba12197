// Package conversiondata reads and writes the NodeGroup conversion-data
// annotation. The annotation is a JSON object with one section per API
// version, holding what an object of that version had that the version it
// was converted to cannot hold. Each conversion takes the section it can
// restore and leaves the others alone, so data survives a chain such as
// v1alpha1 -> v1 -> v1alpha2 -> v1 -> v1alpha1.
package conversiondata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Sections maps an API version to the data its objects could not pass on.
type Sections map[string]json.RawMessage

// Read decodes the annotation of obj; a missing annotation gives no sections.
func Read(obj metav1.Object, annotation string) (Sections, error) {
	raw, ok := obj.GetAnnotations()[annotation]
	if !ok {
		return nil, nil
	}
	var s Sections
	// The annotation is decoded on every conversion of an object carrying
	// it; go-json-experiment decodes about twice as fast as encoding/json.
	if err := jsonv2.Unmarshal([]byte(raw), &s); err != nil {
		return nil, fmt.Errorf("annotation %s is not a JSON object of sections: %w", annotation, err)
	}
	return s, nil
}

// Take decodes and removes the section of version into out. It reports
// whether the section was there.
func (s Sections) Take(version string, out any) (bool, error) {
	raw, ok := s[version]
	if !ok {
		return false, nil
	}
	delete(s, version)
	// Strict: a field this build does not know would otherwise be dropped
	// silently, the loss the annotation exists to prevent.
	if err := jsonv2.Unmarshal(raw, out, jsonv2.RejectUnknownMembers(true)); err != nil {
		return false, fmt.Errorf("section %q of the conversion data: %w", version, err)
	}
	return true, nil
}

// Put stores data as the section of version, or removes the section when
// data encodes to an empty object.
func Put(s Sections, version string, data any) (Sections, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return s, fmt.Errorf("encode conversion data for %s: %w", version, err)
	}
	if bytes.Equal(raw, []byte("{}")) || bytes.Equal(raw, []byte("null")) {
		delete(s, version)
		return s, nil
	}
	if s == nil {
		s = Sections{}
	}
	s[version] = raw
	return s, nil
}

// encode writes the sections as a JSON object, keys sorted. The sections
// are JSON this package produced or validated, so they are copied as they
// are rather than re-compacted by json.Marshal.
func (s Sections) encode() string {
	versions := make([]string, 0, len(s))
	size := 2
	for v, raw := range s {
		versions = append(versions, v)
		size += len(v) + len(raw) + 4
	}
	slices.Sort(versions)
	var b strings.Builder
	b.Grow(size)
	b.WriteByte('{')
	for i, v := range versions {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(v))
		b.WriteByte(':')
		b.Write(s[v])
	}
	b.WriteByte('}')
	return b.String()
}

// Write sets the annotation of obj to the sections, or removes it when
// there are none. The annotation map is replaced, never modified in place,
// because it may be shared with the object the conversion started from.
func Write(obj metav1.Object, annotation string, s Sections) error {
	old := obj.GetAnnotations()
	_, had := old[annotation]
	if len(s) == 0 && !had {
		return nil
	}
	annotations := make(map[string]string, len(old)+1)
	for k, v := range old {
		annotations[k] = v
	}
	if len(s) == 0 {
		delete(annotations, annotation)
	} else {
		annotations[annotation] = s.encode()
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	obj.SetAnnotations(annotations)
	return nil
}
