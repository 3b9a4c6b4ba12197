package render

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// What a template prints is decided by printedText and checked by
// escapePrinted; every printing action ends in one of them (see rewrite.go).

// UnsafeValueError is a printed value refused because it would start a new
// line, or carry a control character, in a rendered file. Watched objects
// are written by people other than the config's author (a tenant creating
// Ingresses, say), and in haproxy.cfg a line is a directive: a value with a
// line break in it would add directives of the tenant's choice.
type UnsafeValueError struct {
	// Excerpt is the value around the refused character, at most
	// unsafeExcerptBytes bytes of it.
	Excerpt string
	// ExcerptCut says the value is longer than Excerpt.
	ExcerptCut bool
	// Offset is the byte offset of the refused character in the value.
	Offset int
	// Rune is the refused character, or utf8.RuneError for a byte that is
	// not UTF-8 (Byte then holds it).
	Rune rune
	Byte byte
}

const unsafeExcerptBytes = 64

func (e *UnsafeValueError) Error() string {
	excerpt := strconv.Quote(e.Excerpt)
	if e.ExcerptCut {
		excerpt += " (cut)"
	}
	return fmt.Sprintf("printed value %s has %s at byte %d: a printed value may not contain a line break or control character, "+
		"which would add lines to the rendered file, so the object field it comes from must not contain one "+
		"(a template author prints trusted multi-line text with {{ ... | trusted }})",
		excerpt, describeUnsafe(e.Rune, e.Byte), e.Offset)
}

func describeUnsafe(r rune, b byte) string {
	switch r {
	case '\n':
		return "a line break (U+000A)"
	case '\r':
		return "a carriage return (U+000D)"
	case 0x85, 0x2028, 0x2029:
		return fmt.Sprintf("a Unicode line break (U+%04X)", r)
	case utf8.RuneError:
		return fmt.Sprintf("the byte 0x%02X, which is not UTF-8", b)
	default:
		return fmt.Sprintf("the control character U+%04X", r)
	}
}

// firstUnsafe returns the offset of the first character of text that must
// not be printed, and that character, or -1. Refused: every C0 control but
// TAB (a tab only separates words, as a space does), DEL, every C1 control
// (U+0085 NEXT LINE among them), U+2028 and U+2029 (line breaks to Unicode
// readers of the file), and bytes that are not UTF-8, which next to another
// value's bytes could complete one of those.
func firstUnsafe(text string) (int, rune) {
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\t') || c == 0x7f {
				return i, rune(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if (r == utf8.RuneError && size == 1) || (r >= 0x80 && r <= 0x9f) || r == 0x2028 || r == 0x2029 {
			return i, r
		}
		i += size
	}
	return -1, 0
}

func newUnsafeValueError(text string, offset int, r rune) *UnsafeValueError {
	start := max(0, offset-unsafeExcerptBytes/2)
	for start > 0 && !utf8.RuneStart(text[start]) {
		start--
	}
	end := min(len(text), start+unsafeExcerptBytes)
	for end < len(text) && end > offset+1 && !utf8.RuneStart(text[end]) {
		end--
	}
	return &UnsafeValueError{
		Excerpt:    text[start:end],
		ExcerptCut: start > 0 || end < len(text),
		Offset:     offset,
		Rune:       r,
		Byte:       text[offset],
	}
}

// escapePrinted is the last step of every printing action that is not
// marked trusted: the text printedText makes of value, refused when
// firstUnsafe finds a character in it.
func escapePrinted(value any) (string, error) {
	text, err := printedText(value)
	if err != nil {
		return "", err
	}
	if offset, r := firstUnsafe(text); offset >= 0 {
		return "", newUnsafeValueError(text, offset, r)
	}
	return text, nil
}

// printedText is what text/template would print for value, except that a
// missing field or a nil prints nothing (text/template would print
// "<no value>" or "<nil>"), and that a value too large or too deep to print
// (see valueSize) is an error instead of a process out of memory or stack.
// It is also the trusted marker's function: trusted text is printed the
// same way, without escapePrinted's check.
func printedText(value any) (string, error) {
	switch v := value.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case bool, int, float64:
		return fmt.Sprint(v), nil
	}
	rv := reflect.ValueOf(value)
	switch rv.Kind() {
	case reflect.Map, reflect.Pointer, reflect.Slice, reflect.Interface:
		if rv.IsNil() {
			return "", nil
		}
	}
	if _, err := valueSize("print", value); err != nil {
		return "", err
	}
	return fmt.Sprint(value), nil
}

// emptyWhenMissing is printedText without its bounds, for the benchmark's
// engine without escaping only.
func emptyWhenMissing(value any) any {
	if value == nil {
		return ""
	}
	switch v := reflect.ValueOf(value); v.Kind() {
	case reflect.Map, reflect.Pointer, reflect.Slice, reflect.Interface:
		if v.IsNil() {
			return ""
		}
	}
	return value
}

var (
	stringerType = reflect.TypeFor[fmt.Stringer]()
	errorType    = reflect.TypeFor[error]()
)

// valueSize estimates how many bytes fmt needs to print values (the
// longest form of a number, 32 bytes, for every number) and refuses values
// that would need more than MaxValueBytes, nest deeper than MaxValueDepth,
// contain themselves, or hold something that is not data (a store, a
// function). what names the function asking, for the error.
//
// Functions that walk a whole value (printing, toJson, deepCopy, merge, ...)
// call it first. A value shared within a structure counts each time it is
// reached, because that is how those functions reach it: a list holding
// the same list twice, forty times over, takes a few kilobytes of memory and
// 2^40 elements to print. It is measured once, though, so that refusing it
// takes microseconds. set and merge refuse to build a dict containing
// itself; the walk refuses one all the same.
func valueSize(what string, values ...any) (int64, error) {
	m := measurer{what: what}
	for _, value := range values {
		if err := m.walk(reflect.ValueOf(value), 0); err != nil {
			return 0, err
		}
	}
	return m.size, nil
}

type measurer struct {
	what string
	size int64
	// sizes are the sizes of the dicts and lists measured so far, or -1
	// for one being measured: a shared one is measured once and counted
	// each time it is reached, and one reached while being measured
	// contains itself.
	sizes map[containerID]int64
}

func (m *measurer) add(n int64) error {
	m.size += n
	if m.size > MaxValueBytes {
		return limitErrorf("MaxValueBytes", "%s: the value would take more than %d bytes", m.what, MaxValueBytes)
	}
	return nil
}

func (m *measurer) walk(v reflect.Value, depth int) error {
	if depth > MaxValueDepth {
		return limitErrorf("MaxValueDepth", "%s: the value nests more than %d levels deep", m.what, MaxValueDepth)
	}
	switch v.Kind() {
	case reflect.Invalid:
		return m.add(5) // <nil>
	case reflect.Interface:
		if v.IsNil() {
			return m.add(5)
		}
		return m.walk(v.Elem(), depth)
	case reflect.String:
		return m.add(int64(v.Len()))
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return m.add(32)
	case reflect.Map:
		if v.Len() == 0 {
			return m.add(5) // map[]
		}
		return m.walkContainer(containerID{ptr: v.UnsafePointer()}, func() error {
			if err := m.add(5); err != nil { // map[]
				return err
			}
			for iter := v.MapRange(); iter.Next(); {
				if err := m.add(2); err != nil { // : and a space
					return err
				}
				if err := m.walk(iter.Key(), depth+1); err != nil {
					return err
				}
				if err := m.walk(iter.Value(), depth+1); err != nil {
					return err
				}
			}
			return nil
		})
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return m.add(2 + 4*int64(v.Len()))
		}
		items := func() error {
			if err := m.add(2 + int64(v.Len())); err != nil { // [], spaces
				return err
			}
			for i := range v.Len() {
				if err := m.walk(v.Index(i), depth+1); err != nil {
					return err
				}
			}
			return nil
		}
		if v.Kind() == reflect.Array || v.Len() == 0 {
			return items()
		}
		return m.walkContainer(containerID{ptr: v.UnsafePointer(), len: v.Len()}, items)
	}
	// A pointer or struct prints through its String or Error method if it
	// has one (semver's versions); anything else is not template data.
	if v.Type().Implements(stringerType) || v.Type().Implements(errorType) {
		return m.add(64)
	}
	return fmt.Errorf("%s: cannot use a value of type %s: only strings, numbers, booleans, and dicts and lists of them", m.what, v.Type())
}

func (m *measurer) walkContainer(id containerID, walkItems func() error) error {
	if size, seen := m.sizes[id]; seen {
		if size < 0 {
			return limitErrorf("MaxValueDepth", "%s: the value contains itself", m.what)
		}
		return m.add(size)
	}
	if m.sizes == nil {
		m.sizes = make(map[containerID]int64)
	}
	m.sizes[id] = -1
	before := m.size
	if err := walkItems(); err != nil {
		return err
	}
	m.sizes[id] = m.size - before
	return nil
}

// containerID identifies a dict, or a list's backing array and length, for
// the walks below.
type containerID struct {
	ptr unsafe.Pointer
	len int
}

// dictsIn returns every dict reachable from values through dicts and lists.
func dictsIn(what string, values ...any) (map[unsafe.Pointer]bool, error) {
	dicts := make(map[unsafe.Pointer]bool)
	seen := make(map[containerID]bool)
	for _, value := range values {
		if err := visitContainers(what, reflect.ValueOf(value), 0, seen, func(v reflect.Value) bool {
			dicts[v.UnsafePointer()] = true
			return false
		}); err != nil {
			return nil, err
		}
	}
	return dicts, nil
}

// reachesDict reports whether value reaches one of dicts through dicts and
// lists, i.e. whether storing value into one of them would make a dict
// contain itself.
func reachesDict(what string, value any, dicts map[unsafe.Pointer]bool) (bool, error) {
	found := false
	err := visitContainers(what, reflect.ValueOf(value), 0, make(map[containerID]bool), func(v reflect.Value) bool {
		found = dicts[v.UnsafePointer()]
		return found
	})
	if errors.Is(err, errStopVisit) {
		err = nil
	}
	return found, err
}

// visitContainers calls visitDict on every dict reachable from v, each
// once, until it returns true.
func visitContainers(what string, v reflect.Value, depth int, seen map[containerID]bool, visitDict func(reflect.Value) bool) error {
	if depth > MaxValueDepth {
		return limitErrorf("MaxValueDepth", "%s: the value nests more than %d levels deep", what, MaxValueDepth)
	}
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		id := containerID{ptr: v.UnsafePointer()}
		if seen[id] {
			return nil
		}
		seen[id] = true
		if visitDict(v) {
			return errStopVisit
		}
		for iter := v.MapRange(); iter.Next(); {
			if err := visitContainers(what, iter.Value(), depth+1, seen, visitDict); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if v.Len() == 0 || isScalarKind(v.Type().Elem().Kind()) {
			return nil
		}
		id := containerID{ptr: v.UnsafePointer(), len: v.Len()}
		if seen[id] {
			return nil
		}
		seen[id] = true
		for i := range v.Len() {
			if err := visitContainers(what, v.Index(i), depth+1, seen, visitDict); err != nil {
				return err
			}
		}
	}
	return nil
}

// errStopVisit ends visitContainers early; it never leaves this file.
var errStopVisit = errors.New("stop")

func isScalarKind(kind reflect.Kind) bool {
	switch kind {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	}
	return false
}
