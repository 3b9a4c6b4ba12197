package policytest

import (
	"io"
	"net/http"
	"sync"
)

// inProcess carries the clients' requests to the in-memory API server
// without a socket: nothing listens while a suite runs, so no other
// process on the machine can read the suite's objects, and a sandboxed CI
// job needs no loopback network. Response bodies stream through a pipe, so
// that watches stay open as they do over HTTP.
type inProcess struct{ handler http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	body, pipe := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pipe: pipe, ready: make(chan struct{})}
	go func() {
		defer func() {
			w.WriteHeader(http.StatusOK)
			_ = pipe.Close()
		}()
		t.handler.ServeHTTP(w, req)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		_ = body.Close()
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status: http.StatusText(w.code), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: body, ContentLength: -1, Request: req,
	}, nil
}

// pipeWriter is the handler's side of one exchange.
type pipeWriter struct {
	header http.Header
	pipe   *io.PipeWriter
	once   sync.Once
	code   int
	// ready is closed once the status and headers are written.
	ready chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code = code
		close(w.ready)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pipe.Write(p)
}

// Flush is a no-op: every Write reaches the reader at once.
func (*pipeWriter) Flush() {}
