package guard

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/spec"
)

// PhaseBounds is the denial reason (and metrics phase) of an object past
// its watched resource's bounds: decided from the request alone.
const PhaseBounds = "object-bounds"

// Size is what bounds measure of an object as written: its JSON
// size without metadata.managedFields (which the API server writes, and no
// template sees), and its longest list with that list's path.
type Size struct {
	bytes   int64
	longest int
	path    string
}

// Exceeds says whether s passes b.
func Exceeds(b spec.Bounds, s Size) bool {
	return s.bytes > b.MaxBytes || s.longest > b.MaxList
}

// ValidateBounds checks the object a create or update would store (size)
// against w's bounds. old is what the store holds of it, nil if nothing:
// an object stored before the bounds were stated may stay as large as it
// is, or shrink, so that its owner can always get under the bound step by
// step; it may not grow. kind and config name the object's kind and the
// config, for the refusal, which says what the user can do.
func ValidateBounds(w *spec.Watched, size Size, old *Size, kind, config string) field.ErrorList {
	b := w.Bounds
	if !Exceeds(b, size) {
		return nil
	}
	if old != nil && Exceeds(b, *old) && size.bytes <= old.bytes && size.longest <= old.longest {
		return nil
	}
	spec := field.NewPath("spec", "watchedResources").Key(w.Name)
	var errs field.ErrorList
	if size.bytes > b.MaxBytes {
		errs = append(errs, field.TooLong(field.NewPath("<object>"), formatSize(size.bytes), int(b.MaxBytes)))
		errs[len(errs)-1].Detail = fmt.Sprintf(
			"this %s is %s; HAProxyTemplateConfig %s accepts %s objects of watched resource %s up to %s: "+
				"every admission renders all of the config's objects, so one object this large would slow every tenant's changes. "+
				"Split it into smaller objects, or ask the config's author to raise %s",
			kind, formatSize(size.bytes), config, kind, w.Name, formatSize(b.MaxBytes), spec.Child("maxObjectBytes"))
	}
	if size.longest > b.MaxList {
		errs = append(errs, field.TooMany(field.NewPath(size.path), size.longest, b.MaxList))
		errs[len(errs)-1].Detail = fmt.Sprintf(
			"%s of this %s has %d items; HAProxyTemplateConfig %s accepts lists of at most %d items in watched resource %s: "+
				"split the object into several, or ask the config's author to raise %s",
			size.path, kind, size.longest, config, b.MaxList, w.Name, spec.Child("maxListLength"))
	}
	return errs
}

// MeasureRaw measures an object's JSON as the API server sent it, in one
// pass over its bytes without decoding it: an object past the bounds is
// refused for less than decoding it would cost (decoding, copying and
// encoding a 0.95 MB Ingress took a second of CPU on a loaded two-core
// machine; this takes milliseconds). The JSON is assumed well formed (the
// API server encoded it); on anything else the figures are what was read,
// and the decoding that follows reports the error.
func MeasureRaw(data []byte) Size {
	type frame struct {
		array bool
		// n counts an array's values; key is an object's current key.
		n   int
		key string
		// expectKey: the next string of an object is a key.
		expectKey bool
		// managed: this value is in metadata.managedFields (whose lists
		// no bound counts); managedRoot: it is the whole of it, from
		// start.
		managed, managedRoot bool
		start                int
	}
	size := Size{bytes: int64(len(data))}
	var stack []frame
	value := func() {
		if len(stack) > 0 && stack[len(stack)-1].array {
			stack[len(stack)-1].n++
		}
	}
	// isManaged says whether a value opening now is metadata.managedFields.
	isManaged := func() bool {
		return len(stack) == 2 && !stack[0].array && stack[0].key == "metadata" && !stack[1].array && stack[1].key == "managedFields"
	}
	path := func() string {
		var b strings.Builder
		for i, f := range stack {
			switch {
			case f.array:
				b.WriteString("[" + strconv.Itoa(f.n-1) + "]")
			case i > 0:
				b.WriteString("." + f.key)
			default:
				b.WriteString(f.key)
			}
		}
		return b.String()
	}
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].expectKey {
				stack[n-1].key, stack[n-1].expectKey = string(data[i+1:min(j, len(data))]), false
			} else {
				value()
			}
			i = j
		case '{', '[':
			root := isManaged()
			managed := root || len(stack) > 0 && stack[len(stack)-1].managed
			value()
			stack = append(stack, frame{array: c == '[', expectKey: c == '{', managed: managed, managedRoot: root, start: i})
		case '}', ']':
			if len(stack) == 0 {
				return size
			}
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if f.managedRoot {
				size.bytes -= int64(i + 1 - f.start)
			}
			if f.array && !f.managed && f.n > size.longest {
				size.longest, size.path = f.n, path()
			}
		case ',':
			if n := len(stack); n > 0 && !stack[n-1].array {
				stack[n-1].expectKey = true
			}
		case ' ', '\t', '\n', '\r', ':':
		default:
			// A number, true, false or null: one value, read to its end.
			value()
			for i+1 < len(data) && !strings.ContainsRune(",]} \t\n\r", rune(data[i+1])) {
				i++
			}
		}
	}
	return size
}

// BoundsDenial is the refusal of errs, one line per bound passed.
func BoundsDenial(errs field.ErrorList) string {
	msg := "the object exceeds the bounds its config sets on each object:"
	for _, e := range errs {
		msg += "\n" + e.Detail
	}
	return msg
}

// formatSize writes n bytes as a person reads them.
func formatSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// WithoutListItems is data (an object's JSON) with every list emptied, for
// telling whether a watched resource selects an object past its bounds
// without decoding all of it: a selection reads labels (a map of strings)
// and field paths through maps, where a list equals no value, empty or not
// (fieldSelector.matches). What is outside lists is kept byte for byte.
func WithoutListItems(data []byte) []byte {
	out := make([]byte, 0, min(len(data), 64<<10))
	depth := 0 // of lists (and objects inside them) being skipped
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '"' {
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if depth == 0 {
				out = append(out, data[i:min(j+1, len(data))]...)
			}
			i = j
			continue
		}
		switch {
		case c == '[' && depth == 0:
			out = append(out, '[')
			depth = 1
			continue
		case (c == '[' || c == '{') && depth > 0:
			depth++
		case (c == ']' || c == '}') && depth > 0:
			depth--
			if depth == 0 {
				out = append(out, ']')
			}
			continue
		}
		if depth == 0 {
			out = append(out, c)
		}
	}
	return out
}
