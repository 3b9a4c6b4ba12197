package render

import "fmt"

// Limits of one rendering. They make the common template bombs (a huge
// until, repeat or printf width, a value containing itself, a template
// including itself) fail at once with a message naming the limit, instead
// of exhausting the memory or the stack of the process rendering. They are
// not the hard bound: a template can still spend memory and CPU within them,
// which the process running renders has to cap.
const (
	// MaxFileBytes caps what one template execution writes: a rendered file,
	// or the text a render or renderGlob call returns.
	MaxFileBytes = 16 << 20
	// MaxRenderingBytes caps the bytes all templates of one rendering write,
	// every file and every rendered snippet together (a snippet's text counts
	// where it is rendered and again where it is printed).
	MaxRenderingBytes = 64 << 20
	// MaxValueBytes caps one value a function builds or prints (repeat,
	// printf, indent, join, toJson, b64enc, ...), so a function applied in a
	// loop to its own result cannot grow it without end.
	MaxValueBytes = MaxFileBytes
	// MaxListLength caps the lists until, untilStep, seq, concat, append,
	// splitList and the like build.
	MaxListLength = 1 << 20
	// MaxIterations caps the range iterations plus template inclusions of
	// one rendering. A range charges its items (times the templates its
	// body includes) when it starts, so one over more than is left fails
	// before its first iteration.
	MaxIterations = 10_000_000
	// MaxWidth caps printf widths and precisions and indent/nindent widths.
	MaxWidth = 1024
	// MaxTemplateDepth caps rendered snippets (render, renderGlob) and
	// recursive templates ({{ template }} of a template including itself,
	// directly or not) nested in one another, so that recursion fails with a
	// clear error instead of exhausting the stack. Other inclusions nest at
	// most as deep as there are templates (inclusions.go).
	MaxTemplateDepth = 100
	// MaxValueDepth caps how deep a value printed, copied or merged may
	// nest; a value containing itself always exceeds it.
	MaxValueDepth = 1000
)

// LimitError is a rendering refused because it would exceed one of the
// limits above.
type LimitError struct {
	// Limit names the constant, e.g. "MaxListLength".
	Limit string
	// Message says what exceeded it, for the person writing the template.
	Message string
}

func (e *LimitError) Error() string { return e.Message + " (limit " + e.Limit + ")" }

func limitErrorf(limit, format string, args ...any) error {
	return &LimitError{Limit: limit, Message: fmt.Sprintf(format, args...)}
}
