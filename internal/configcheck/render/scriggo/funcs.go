package scriggo

// functions are haptic's template functions, by the name templates call.
var functions = map[string]any{}
