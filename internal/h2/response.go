package h2

import (
	"bufio"
	"errors"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
)

// handlerChunkWriteSize is the response buffer: a handler that ends
// having written no more than this gets a Content-Length (x/net's 4 KiB).
const handlerChunkWriteSize = 4 << 10

var errTooMuchWritten = errors.New("http2: handler wrote more than declared Content-Length")

// responseState is what stands behind a stream's http.ResponseWriter
// (handle.go), with x/net's semantics byte for byte: the 4 KiB buffer,
// the header snapshot at WriteHeader, Content-Length and Content-Type
// sniffing for a response that fits the buffer, Date, HEAD, 1xx,
// declared and "Trailer:"-prefixed trailers, Connection: close. It is
// pooled; handlers never see it.
type responseState struct {
	st  *stream
	req *http.Request
	bw  *bufio.Writer // into chunkWriter{rw}

	handlerHeader  http.Header
	snapHeader     headerSnapshot // taken at WriteHeader (snapshot.go)
	trailers       []string
	status         int
	wroteHeader    bool
	sentHeader     bool
	handlerIsDone  bool
	sentContentLen int64
	wroteBytes     int64
	flushing       bool // in Flush: what is written goes out now
}

var responseStatePool = sync.Pool{New: func() any {
	rw := new(responseState)
	rw.bw = bufio.NewWriterSize(chunkWriter{rw}, handlerChunkWriteSize)
	return rw
}}

func newResponseState(st *stream, req *http.Request) *responseState {
	rw := responseStatePool.Get().(*responseState)
	bw, snap := rw.bw, rw.snapHeader // kept with their storage
	*rw = responseState{st: st, req: req, bw: bw, snapHeader: snap}
	bw.Reset(chunkWriter{rw})
	return rw
}

type chunkWriter struct{ rw *responseState }

func (cw chunkWriter) Write(p []byte) (int, error) { return cw.rw.writeChunk(p) }

// Header returns the response header map.
func (rw *responseState) Header() http.Header {
	if rw.handlerHeader == nil {
		rw.handlerHeader = make(http.Header)
	}
	return rw.handlerHeader
}

// WriteHeader sends an informational response at once (1xx), or sets
// the status and takes a snapshot of the header.
func (rw *responseState) WriteHeader(code int) {
	if rw.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code <= 199 {
		h := rw.handlerHeader
		_, cl := h["Content-Length"]
		_, te := h["Transfer-Encoding"]
		if cl || te {
			h = h.Clone()
			h.Del("Content-Length")
			h.Del("Transfer-Encoding")
		}
		rw.st.c.writeHeaders(rw.st, &responseHead{status: code, h: h, endStream: rw.handlerIsDone && len(rw.trailers) == 0}, true)
		return
	}
	rw.wroteHeader = true
	rw.status = code
	rw.snapHeader.take(rw.handlerHeader)
}

// Write buffers p (4 KiB), sending what does not fit.
func (rw *responseState) Write(p []byte) (int, error) {
	if err := rw.beforeWrite(len(p)); err != nil {
		return 0, err
	}
	return rw.bw.Write(p)
}

// WriteString is Write of a string.
func (rw *responseState) WriteString(s string) (int, error) {
	if err := rw.beforeWrite(len(s)); err != nil {
		return 0, err
	}
	return rw.bw.WriteString(s)
}

func (rw *responseState) beforeWrite(n int) error {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK)
	}
	if !bodyAllowedForStatus(rw.status) {
		return http.ErrBodyNotAllowed
	}
	rw.wroteBytes += int64(n)
	if rw.sentContentLen != 0 && rw.wroteBytes > rw.sentContentLen {
		return errTooMuchWritten
	}
	return nil
}

// Flush sends the header and what is buffered now.
func (rw *responseState) Flush() { rw.FlushError() }

// FlushError is Flush, with the error.
func (rw *responseState) FlushError() error {
	if rw.bw.Buffered() > 0 {
		rw.flushing = true
		err := rw.bw.Flush()
		rw.flushing = false
		return err
	}
	// bufio would not call writeChunk with nothing buffered: call it to
	// send the header (or END_STREAM when the handler is done)
	_, err := rw.writeChunk(nil)
	if err == nil {
		c := rw.st.c
		c.mu.Lock()
		if rw.st.closed && !rw.st.localClosed {
			err = rw.st.closeErr
		} else if c.flushPending {
			// a whole declared body left in the batch for its END_STREAM
			// (deferFlushLocked): the handler wants it sent now
			c.flushLocked()
		}
		c.mu.Unlock()
	}
	return err
}

// SetReadDeadline sets the deadline of reads of the request body; one
// in the past fails them at once. A body whose deadline had passed has
// failed, whatever the new one (x/net's timer has fired by then).
func (rw *responseState) SetReadDeadline(t time.Time) error {
	st := rw.st
	c := st.c
	c.mu.Lock()
	if st.body != nil {
		st.body.failPastDeadlineLocked(st.readDeadline.Load())
	}
	st.readDeadline.Store(unixNano(t))
	st.cond.Broadcast()
	c.mu.Unlock()
	return nil
}

// SetWriteDeadline sets the deadline of the response: a stream still
// open at the deadline is reset (INTERNAL_ERROR) and its handler's
// context cancelled, whether the handler writes or waits for something
// else, as x/net's timer does; a deadline in the past resets it at once.
// The call costs an atomic store, and a listing on deadlineWatch when
// the connection is not listed (deadlines.go).
func (rw *responseState) SetWriteDeadline(t time.Time) error {
	st := rw.st
	st.writeDeadline.Store(unixNano(t))
	switch {
	case t.IsZero():
	case t.After(time.Now()):
		st.c.watchDeadlines()
	default:
		c := st.c
		c.mu.Lock()
		if !st.closed {
			c.resetStreamLocked(st, http2.ErrCodeInternal, nil)
		}
		c.mu.Unlock()
	}
	return nil
}

// BodyWriteSize is how large a handler's body writes should be: large
// enough that a write's batch goes to the socket on a goroutine of its own
// while the handler reads its next bytes (asyncFlushMin), a quarter of the
// client's smaller window at most (as a write waits for the window a
// window at a time), and never less than one 16 KiB frame.
// h2file's body writer asks for it (internal/send, through Caddy's
// wrappers' Unwrap).
func (rw *responseState) BodyWriteSize() int {
	c := rw.st.c
	c.mu.Lock()
	window := min(rw.st.sendWindow, c.sendWindow, c.peerInitialWindow)
	c.mu.Unlock()
	return int(max(min(window/4, maxBodyWrite), 16384-9))
}

// maxBodyWrite is the largest body write BodyWriteSize asks for: half a
// batch.
const maxBodyWrite = maxBatch / 2

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// handlerDone ends the response once the handler has returned; the
// state goes back to the pool (its handle was cut before).
func (rw *responseState) handlerDone() {
	rw.handlerIsDone = true
	rw.Flush()
	rw.st = nil
	rw.req = nil
	rw.handlerHeader = nil
	rw.snapHeader.reset()
	responseStatePool.Put(rw)
}

// writeChunk sends what the buffer passes on: the HEADERS first (x/net's
// writeChunk, step for step), then DATA, then trailers.
func (rw *responseState) writeChunk(p []byte) (int, error) {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.handlerIsDone {
		rw.promoteUndeclaredTrailers()
	}
	st := rw.st
	c := st.c
	isHead := rw.req.Method == http.MethodHead
	if !rw.sentHeader {
		rw.sentHeader = true
		var ctype, clen string
		if clen = rw.snapHeader.get("Content-Length"); clen != "" {
			rw.snapHeader.del("Content-Length")
			if cl, err := strconv.ParseUint(clen, 10, 63); err == nil {
				rw.sentContentLen = int64(cl)
			} else {
				clen = ""
			}
		}
		hasContentLength := rw.snapHeader.has("Content-Length")
		if !hasContentLength && clen == "" && rw.handlerIsDone && bodyAllowedForStatus(rw.status) && (len(p) > 0 || !isHead) {
			clen = strconv.Itoa(len(p))
		}
		hasContentType := rw.snapHeader.has("Content-Type")
		if rw.snapHeader.get("Content-Encoding") == "" && !hasContentType && bodyAllowedForStatus(rw.status) && len(p) > 0 {
			ctype = http.DetectContentType(p)
		}
		var date string
		if !rw.snapHeader.has("Date") {
			date = httpDate()
		}
		for _, v := range rw.snapHeader.all("Trailer") {
			foreachHeaderElement(v, rw.declareTrailer)
		}
		if rw.snapHeader.has("Connection") {
			v := rw.snapHeader.get("Connection")
			rw.snapHeader.del("Connection")
			if v == "close" {
				c.startGracefulShutdown()
			}
		}
		endStream := (rw.handlerIsDone && len(rw.trailers) == 0 && len(p) == 0) || isHead
		head := responseHead{status: rw.status, snap: &rw.snapHeader, endStream: endStream, contentType: ctype, contentLength: clen, date: date}
		if err := c.writeHeaders(st, &head, !rw.handlerIsDone && len(p) == 0); err != nil {
			return 0, err
		}
		if endStream {
			return 0, nil
		}
	}
	if isHead {
		return len(p), nil
	}
	if len(p) == 0 && !rw.handlerIsDone {
		return 0, nil
	}
	// the whole declared body is written: its END_STREAM comes when the
	// handler returns, in the same socket write if that is soon
	complete := rw.sentContentLen > 0 && rw.wroteBytes == rw.sentContentLen && len(rw.trailers) == 0 && !rw.flushing
	end := rw.handlerIsDone
	var trailers *responseHead
	if end && rw.hasNonemptyTrailers() {
		trailers = &responseHead{h: rw.handlerHeader, trailers: rw.trailers, endStream: true}
	}
	if len(p) > 0 || end {
		if err := c.writeBody(st, p, end, trailers, complete); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (rw *responseState) hasNonemptyTrailers() bool {
	for _, k := range rw.trailers {
		if _, ok := rw.handlerHeader[k]; ok {
			return true
		}
	}
	return false
}

// declareTrailer notes a trailer key from the Trailer header.
func (rw *responseState) declareTrailer(k string) {
	k = http.CanonicalHeaderKey(k)
	if !httpguts.ValidTrailerHeader(k) {
		return
	}
	if !slices.Contains(rw.trailers, k) {
		rw.trailers = append(rw.trailers, k)
	}
}

// promoteUndeclaredTrailers turns "Trailer:"-prefixed header keys into
// trailers, once the handler is done (x/net's rule).
func (rw *responseState) promoteUndeclaredTrailers() {
	for k, vv := range rw.handlerHeader {
		if !strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		key := strings.TrimPrefix(k, http.TrailerPrefix)
		rw.declareTrailer(key)
		rw.handlerHeader[http.CanonicalHeaderKey(key)] = vv
	}
	if len(rw.trailers) > 1 {
		slices.Sort(rw.trailers)
	}
}

func foreachHeaderElement(v string, fn func(string)) {
	v = textproto.TrimString(v)
	if v == "" {
		return
	}
	if !strings.Contains(v, ",") {
		fn(v)
		return
	}
	for f := range strings.SplitSeq(v, ",") {
		if f = textproto.TrimString(f); f != "" {
			fn(f)
		}
	}
}

func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199, status == 204, status == 304:
		return false
	}
	return true
}

// httpDate is the Date header value now, formatted once per second.
func httpDate() string {
	now := time.Now().Unix()
	if d := cachedDate.Load(); d != nil && d.unix == now {
		return d.s
	}
	d := &dateValue{unix: now, s: time.Unix(now, 0).UTC().Format(http.TimeFormat)}
	cachedDate.Store(d)
	return d.s
}

type dateValue struct {
	unix int64
	s    string
}

var cachedDate atomic.Pointer[dateValue]
