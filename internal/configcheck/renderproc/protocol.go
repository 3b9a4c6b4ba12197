package renderproc

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
	"github.com/gatehouse-dev/gatehouse/internal/textcut"
)

// frameHeaderSize is the length prefix of a frame: 4 bytes, big-endian.
const frameHeaderSize = 4

// maxRequestFrame bounds what a worker reads. The parent is trusted; the
// bound only keeps a corrupt length from being taken literally (the
// worker's memory budget is the real limit).
const maxRequestFrame = math.MaxUint32

// writeFrame writes payload as one frame.
func writeFrame(w io.Writer, payload []byte) error {
	if uint64(len(payload)) > math.MaxUint32 {
		return fmt.Errorf("a message of %d bytes is too large to send", len(payload))
	}
	var header [frameHeaderSize]byte
	binary.BigEndian.PutUint32(header[:], uint32(len(payload)))
	if _, err := w.Write(header[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// frameTooLargeError is a frame whose announced length exceeds what the
// reader accepts.
type frameTooLargeError struct {
	size, limit uint64
}

func (e *frameTooLargeError) Error() string {
	return fmt.Sprintf("a message of %d bytes, more than the %d accepted", e.size, e.limit)
}

// readFrame reads one frame of at most limit bytes. A stream that ends
// between frames gives io.EOF; one that ends inside a frame gives
// io.ErrUnexpectedEOF.
func readFrame(r io.Reader, limit uint64) ([]byte, error) {
	var header [frameHeaderSize]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return nil, err
	}
	size := uint64(binary.BigEndian.Uint32(header[:]))
	if size > limit {
		return nil, &frameTooLargeError{size: size, limit: limit}
	}
	payload := make([]byte, size)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return payload, nil
}

// marshal encodes v as JSON without escaping <, > and &, which only cost
// bytes here: nothing embeds the JSON in HTML.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	encoder := json.NewEncoder(&buf)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// unmarshal decodes JSON keeping numbers as json.Number, which the render
// stores normalize exactly as they normalize the server's objects (an
// int64 beyond 2^53 would lose digits through float64).
func unmarshal(data []byte, v any) error {
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	if err := decoder.Decode(v); err != nil {
		return err
	}
	if decoder.More() {
		return errors.New("trailing data after the message")
	}
	return nil
}

// request asks a worker for one rendering.
type request struct {
	// MemoryLimit is the worker's memory budget, from which it sets its
	// GC's soft limit.
	MemoryLimit int64 `json:"memoryLimit"`
	// MaxOutput bounds the answer's texts: the rendered files with their
	// names, or the error's texts.
	MaxOutput int64 `json:"maxOutput"`

	// DropTemplates and DropStores are what the worker may forget, applied
	// before the rest.
	DropTemplates []string `json:"dropTemplates,omitempty"`
	DropStores    []uint64 `json:"dropStores,omitempty"`

	// TemplatesHash names the template set to render; Templates carries it
	// when the worker does not hold it yet.
	TemplatesHash string         `json:"templatesHash"`
	Templates     *wireTemplates `json:"templates,omitempty"`

	// Snapshots are MemoryStore snapshots (wireSnapshot) for the worker to
	// keep, replacing the older version of the same store. They stay raw
	// here so that the parent encodes each once and knows its size.
	Snapshots []json.RawMessage `json:"snapshots,omitempty"`

	// CompileOnly asks for the template set to be compiled and not
	// rendered: the answer has neither Output nor Error when it compiles,
	// and carries what the compile learned (Learned).
	CompileOnly bool `json:"compileOnly,omitempty"`

	// Resources are render.Data.Resources.
	Resources map[string]*wireStore `json:"resources"`
	// ExtraContext is render.Data.ExtraContext.
	ExtraContext map[string]any `json:"extraContext,omitempty"`
	// CurrentConfig and HTTPResources are render.Data's.
	CurrentConfig string            `json:"currentConfig,omitempty"`
	HTTPResources map[string]string `json:"httpResources,omitempty"`
	// OnDemand names the stores whose misses the answer reports
	// (render.Data.OnDemand, when the caller collects render.Data.Missed).
	OnDemand []string `json:"onDemand,omitempty"`
}

// wireTemplates is render.Templates with the engine. Texts are bytes, so
// that a text that is not valid UTF-8 arrives as compiled in the parent.
type wireTemplates struct {
	Engine          string     `json:"engine"`
	Snippets        []wireFile `json:"snippets,omitempty"`
	HAProxyConfig   []byte     `json:"haproxyConfig"`
	Maps            []wireFile `json:"maps,omitempty"`
	Files           []wireFile `json:"files,omitempty"`
	SSLCertificates []wireFile `json:"sslCertificates,omitempty"`
	// PostProcessing is render.Templates.PostProcessing.
	PostProcessing map[string][]render.PostProcessor `json:"postProcessing,omitempty"`
	// Learned is what the compile of these templates in a worker learned
	// (render.CompileLearned), so that the next worker compiles them
	// cheaply; not part of the templates' hash.
	Learned []byte `json:"learned,omitempty"`
}

// wireFile is a named text: a template or a rendered file.
type wireFile struct {
	Name []byte `json:"name"`
	Text []byte `json:"text"`
}

func toWireFiles(m map[string]string) []wireFile {
	files := make([]wireFile, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		files = append(files, wireFile{Name: []byte(name), Text: []byte(m[name])})
	}
	return files
}

func fromWireFiles(files []wireFile) map[string]string {
	m := make(map[string]string, len(files))
	for _, f := range files {
		m[string(f.Name)] = string(f.Text)
	}
	return m
}

func toWireTemplates(engine string, t render.Templates) *wireTemplates {
	return &wireTemplates{
		Engine:          engine,
		Snippets:        toWireFiles(t.Snippets),
		HAProxyConfig:   []byte(t.HAProxyConfig),
		Maps:            toWireFiles(t.Maps),
		Files:           toWireFiles(t.Files),
		SSLCertificates: toWireFiles(t.SSLCertificates),
		PostProcessing:  t.PostProcessing,
	}
}

func (w *wireTemplates) templates() render.Templates {
	return render.Templates{
		Snippets:        fromWireFiles(w.Snippets),
		HAProxyConfig:   string(w.HAProxyConfig),
		Maps:            fromWireFiles(w.Maps),
		Files:           fromWireFiles(w.Files),
		SSLCertificates: fromWireFiles(w.SSLCertificates),
		PostProcessing:  w.PostProcessing,
	}
}

// templatesHash identifies an engine and template set: every text is
// length-prefixed, so no two different sets encode alike.
func templatesHash(engine string, t render.Templates) string {
	h := sha256.New()
	field := func(s string) {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	named := func(m map[string]string) {
		field(fmt.Sprint(len(m)))
		for _, name := range slices.Sorted(maps.Keys(m)) {
			field(name)
			field(m[name])
		}
	}
	field(engine)
	named(t.Snippets)
	field(t.HAProxyConfig)
	named(t.Maps)
	named(t.Files)
	named(t.SSLCertificates)
	field(fmt.Sprint(len(t.PostProcessing)))
	for _, output := range slices.Sorted(maps.Keys(t.PostProcessing)) {
		field(output)
		field(fmt.Sprint(len(t.PostProcessing[output])))
		for _, p := range t.PostProcessing[output] {
			field(p.Type)
			field(p.Pattern)
			field(p.Replace)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// wireSnapshot is a store's content: a render.StoreSnapshot, or the whole
// of a store that is not cached (ID and Version zero).
type wireSnapshot struct {
	ID      uint64           `json:"id,omitempty"`
	Version uint64           `json:"version,omitempty"`
	IndexBy []string         `json:"indexBy"`
	Objects []map[string]any `json:"objects"`
}

// wireStore is one store of the data: exactly one field is set (none for
// a nil store).
type wireStore struct {
	// Ref names a snapshot the worker holds (or receives in this request).
	Ref *storeRef `json:"ref,omitempty"`
	// Whole is a store sent in full, not kept.
	Whole *wireSnapshot `json:"whole,omitempty"`
	// Overlay is an overlay over another store.
	Overlay *wireOverlay `json:"overlay,omitempty"`
}

// storeRef names a MemoryStore at one version.
type storeRef struct {
	ID      uint64 `json:"id"`
	Version uint64 `json:"version"`
}

// wireOverlay is a render.OverlayChange.
type wireOverlay struct {
	Base      *wireStore     `json:"base"`
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	Object    map[string]any `json:"object,omitempty"`
}

// answer is a worker's reply to a request: Output or Error (for a
// CompileOnly request, Compiled or Error).
type answer struct {
	Output *wireOutput `json:"output,omitempty"`
	Error  *wireError  `json:"error,omitempty"`
	// Compiled says a CompileOnly request's templates compiled, and
	// Learned what compiling them learned.
	Compiled bool   `json:"compiled,omitempty"`
	Learned  []byte `json:"learned,omitempty"`
	// Missed are the whole keys the templates asked of the request's
	// OnDemand stores and they did not hold, with an Output or an Error
	// alike (a template fails when an object it needs is missing).
	Missed map[string][][]string `json:"missed,omitempty"`
	// CPU is the worker's CPU time so far (user and system, nanoseconds),
	// so the parent retires it before its RLIMIT_CPU could end a rendering.
	CPU int64 `json:"cpu"`
}

// wireOutput is render.Output; texts are bytes, since a template can write
// any byte (printf "%c", b64dec).
type wireOutput struct {
	HAProxyConfig []byte     `json:"haproxyConfig"`
	Maps          []wireFile `json:"maps,omitempty"`
	Files         []wireFile `json:"files,omitempty"`
	Certs         []wireFile `json:"certs,omitempty"`
}

func toWireOutput(out render.Output) *wireOutput {
	return &wireOutput{
		HAProxyConfig: []byte(out.HAProxyConfig),
		Maps:          toWireFiles(out.Maps),
		Files:         toWireFiles(out.Files),
		Certs:         toWireFiles(out.Certs),
	}
}

func (w *wireOutput) output() render.Output {
	return render.Output{
		HAProxyConfig: string(w.HAProxyConfig),
		Maps:          fromWireFiles(w.Maps),
		Files:         fromWireFiles(w.Files),
		Certs:         fromWireFiles(w.Certs),
	}
}

// size is what MaxOutput bounds.
func (w *wireOutput) size() int64 {
	n := int64(len(w.HAProxyConfig))
	for _, files := range [][]wireFile{w.Maps, w.Files, w.Certs} {
		for _, f := range files {
			n += int64(len(f.Name) + len(f.Text))
		}
	}
	return n
}

// Kinds of wireError: the type of the error Render returned.
const (
	errorKindRender  = "render"
	errorKindCompile = "compile"
	errorKindOther   = "other"
)

// wireError is a rendering's error, enough to rebuild what callers look
// at: its type and template, its text, and the fail message in it.
type wireError struct {
	Kind     string `json:"kind"`
	Template []byte `json:"template,omitempty"`
	// Text is the wrapped error's text for render and compile errors (the
	// rebuilt error adds its "render <template>: " prefix), else the text.
	Text []byte `json:"text"`
	// Fail is the message of the *render.FailError in the error, if any.
	Fail    []byte `json:"fail,omitempty"`
	HasFail bool   `json:"hasFail,omitempty"`
}

// truncatedSuffix ends a text cut to fit the answer.
const truncatedSuffix = "... (truncated)"

// toWireError describes err within limit bytes of texts. Only an absurd
// message (megabytes) is cut.
func toWireError(err error, limit int64) *wireError {
	we := &wireError{Kind: errorKindOther, Text: []byte(err.Error())}
	var renderErr *render.RenderError
	var compileErr *render.CompileError
	// The top of the chain only: an error wrapping a RenderError would not
	// read the same once rebuilt as a RenderError.
	if errors.As(err, &renderErr) && error(renderErr) == err { //nolint:errorlint // the top of the chain only, as said
		we.Kind, we.Template, we.Text = errorKindRender, []byte(renderErr.Template), []byte(errorText(renderErr.Err))
	} else if errors.As(err, &compileErr) && error(compileErr) == err { //nolint:errorlint // as above
		we.Kind, we.Template, we.Text = errorKindCompile, []byte(compileErr.Template), []byte(errorText(compileErr.Err))
	}
	var failErr *render.FailError
	if errors.As(err, &failErr) {
		we.Fail, we.HasFail = []byte(failErr.Message), true
	}
	// Fit the texts in limit (at least a few kilobytes, see Options): the
	// template name a quarter at most, the rest shared.
	if int64(len(we.Template)+len(we.Text)+len(we.Fail)) > limit {
		we.Template = truncate(we.Template, limit/4)
		rest := (limit - int64(len(we.Template))) / 2
		we.Text, we.Fail = truncate(we.Text, rest), truncate(we.Fail, rest)
	}
	return we
}

func errorText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// truncate cuts b to n bytes with the suffix, on a character boundary:
// the texts are error messages a user reads.
func truncate(b []byte, n int64) []byte {
	if int64(len(b)) <= n {
		return b
	}
	return []byte(textcut.Bound(string(b), int(n), truncatedSuffix))
}

// error rebuilds the worker's error.
func (we *wireError) error() error {
	var inner error = &workerError{text: string(we.Text)}
	if we.HasFail {
		inner = &workerError{text: string(we.Text), fail: &render.FailError{Message: string(we.Fail)}}
	}
	switch we.Kind {
	case errorKindRender:
		return &render.RenderError{Template: string(we.Template), Err: inner}
	case errorKindCompile:
		return &render.CompileError{Template: string(we.Template), Err: inner}
	default:
		return inner
	}
}

// workerError is an error as the worker wrote it; it unwraps to the fail
// message it carried, so errors.As finds a *render.FailError as it would
// in-process.
type workerError struct {
	text string
	fail *render.FailError
}

func (e *workerError) Error() string { return e.text }

func (e *workerError) Unwrap() error {
	if e.fail == nil {
		return nil
	}
	return e.fail
}
