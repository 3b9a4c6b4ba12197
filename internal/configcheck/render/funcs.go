package render

import (
	"errors"
	"reflect"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// unsafeSprigFunctions are left out of the function map: env and expandenv
// would let a config author copy the controller's environment (credentials
// included) into a published config, and getHostByName makes a rendering
// depend on DNS and wait on the network inside an admission request.
var unsafeSprigFunctions = []string{"env", "expandenv", "getHostByName"}

// emptyWhenMissingFunc is appended to every printing action by
// appendEmptyWhenMissing; its name cannot clash with sprig's.
const emptyWhenMissingFunc = "_gatehouseEmptyWhenMissing"

// errOutsideRendering is what render and renderGlob return if called on the
// compiled (never executed) template set instead of a rendering's clone;
// Render always rebinds them, so seeing it is a bug.
var errOutsideRendering = errors.New("render and renderGlob are only available while rendering")

// baseFuncs are the functions templates are parsed with. render and
// renderGlob need the data of one rendering, so Render rebinds them on a
// clone of the template set; the placeholders here only declare them.
var baseFuncs = newBaseFuncs()

func newBaseFuncs() template.FuncMap {
	funcs := sprig.TxtFuncMap()
	for _, name := range unsafeSprigFunctions {
		delete(funcs, name)
	}
	// sprig has a fail too; ours returns a typed error so that the webhook
	// can take the message without parsing the template error's text.
	funcs["fail"] = fail
	funcs["render"] = func(string) (string, error) { return "", errOutsideRendering }
	funcs["renderGlob"] = func(string) (string, error) { return "", errOutsideRendering }
	funcs[emptyWhenMissingFunc] = emptyWhenMissing
	return funcs
}

// fail stops the rendering with exactly message.
func fail(message string) (string, error) {
	return "", &FailError{Message: message}
}

// emptyWhenMissing turns the value of a missing field (or a nil) into empty
// output; text/template would print "<no value>" or "<nil>".
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
