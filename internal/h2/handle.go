package h2

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// errHandlerDone is what a ResponseWriter's methods return once its
// handler has returned.
var errHandlerDone = errors.New("h2: ResponseWriter used after its handler returned")

// responseWriter is the http.ResponseWriter a handler is given: a handle
// on its stream's response state, which is pooled. The handle lives in
// the stream (never reused) and is cut when the handler returns, before
// the state goes back to the pool: a goroutine that kept it, a bug of
// the handler's, gets errors (Write, Flush) or does nothing (WriteHeader,
// a throwaway Header), and never reaches another stream's response, as
// x/net's handle (which panics instead: a late call from a goroutine of
// the handler's would end the whole process).
type responseWriter struct {
	state atomic.Pointer[responseState]
}

// Header returns the response header map.
func (w *responseWriter) Header() http.Header {
	if s := w.state.Load(); s != nil {
		return s.Header()
	}
	return make(http.Header)
}

// WriteHeader sends an informational response at once (1xx), or sets
// the status and takes a snapshot of the header.
func (w *responseWriter) WriteHeader(code int) {
	if s := w.state.Load(); s != nil {
		s.WriteHeader(code)
	}
}

// Write buffers p (4 KiB), sending what does not fit.
func (w *responseWriter) Write(p []byte) (int, error) {
	if s := w.state.Load(); s != nil {
		return s.Write(p)
	}
	return 0, errHandlerDone
}

// WriteString is Write of a string.
func (w *responseWriter) WriteString(str string) (int, error) {
	if s := w.state.Load(); s != nil {
		return s.WriteString(str)
	}
	return 0, errHandlerDone
}

// Flush sends the header and what is buffered now.
func (w *responseWriter) Flush() { w.FlushError() }

// FlushError is Flush, with the error.
func (w *responseWriter) FlushError() error {
	if s := w.state.Load(); s != nil {
		return s.FlushError()
	}
	return errHandlerDone
}

// SetReadDeadline sets the deadline of reads of the request body; one
// in the past fails them at once.
func (w *responseWriter) SetReadDeadline(t time.Time) error {
	if s := w.state.Load(); s != nil {
		return s.SetReadDeadline(t)
	}
	return errHandlerDone
}

// SetWriteDeadline sets the deadline of the response's writes: a write
// still waiting for the client's window or the connection at the
// deadline resets the stream (INTERNAL_ERROR), as does a deadline in the
// past. Unlike x/net's, no timer runs while the handler does not write,
// so the call costs an atomic store.
func (w *responseWriter) SetWriteDeadline(t time.Time) error {
	if s := w.state.Load(); s != nil {
		return s.SetWriteDeadline(t)
	}
	return errHandlerDone
}

// BodyWriteSize is how large a handler's body writes should be (see
// responseState.BodyWriteSize); h2file's body writer asks for it.
func (w *responseWriter) BodyWriteSize() int {
	if s := w.state.Load(); s != nil {
		return s.BodyWriteSize()
	}
	return 16384 - 9
}

// EnableFullDuplex does nothing: HTTP/2 is always full duplex.
func (w *responseWriter) EnableFullDuplex() error { return nil }

// cut detaches the handle from its state, once the handler has returned,
// and returns the state.
func (w *responseWriter) cut() *responseState { return w.state.Swap(nil) }

var (
	_ http.ResponseWriter = (*responseWriter)(nil)
	_ http.Flusher        = (*responseWriter)(nil)
	_ io.StringWriter     = (*responseWriter)(nil)
)
