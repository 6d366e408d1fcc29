package h2

import (
	"context"
	"io"
	"net/http"
	"runtime"

	"go.uber.org/zap"
	"golang.org/x/net/http2"
)

// processHeaders handles a HEADERS block: a new request, or the trailers
// of one in progress.
func (c *conn) processHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 != 1 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if hook := c.srv.onHeadersRead; hook != nil {
		hook(c)
	}
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		defer c.mu.Unlock()
		if st.remoteClosed {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
		}
		return c.processTrailersLocked(st, f)
	}
	if id <= c.maxClientStreamID {
		reset := c.recentResets.has(id)
		c.mu.Unlock()
		if reset {
			// trailers sent before the client read our RST_STREAM:
			// ignored (RFC 9113 §5.1); the Framer has decoded the block,
			// so HPACK's state is kept. Counted all the same: a stream
			// has one trailer section in flight, and a client that sends
			// header blocks again and again on a reset stream would make
			// the server decode them for nothing, without limit.
			c.flood.add("HEADERS on a reset stream")
			return nil
		}
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if c.goingAway {
		// a graceful GOAWAY sent since processFrame looked (Shutdown, the
		// idle timeout, a handler's Connection: close) names an earlier
		// stream as the last one served: this one is not (RFC 9113 §6.8),
		// so that the client may send it again on another connection
		// whatever its method, as x/net's serve loop, which handles the
		// GOAWAY between two frames, drops it
		c.mu.Unlock()
		return nil
	}
	c.maxClientStreamID = id
	if uint32(len(c.streams))+1 > c.cfg.MaxConcurrentStreams {
		c.mu.Unlock()
		if c.unackedSettings == 0 {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
	}
	// taken before the request is checked, as x/net takes it
	prio := c.requestPriorityLocked(id, f.Fields)
	c.mu.Unlock()
	if hook := c.srv.onHeadersUnlocked; hook != nil {
		hook(c)
	}
	if f.HasPriority() && f.Priority.StreamDep == id {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}

	// the stream's context is made first: the request is built with it,
	// in the stream's memory (a malformed request's is dropped unused)
	ctx, cancel := context.WithCancel(c.baseCtx)
	limitHeaderValues(f, maxHeaderValueCount)
	st := new(stream)
	req, needsContinue, reason := newRequest(ctx, f, connInfo{remoteAddr: c.remoteAddr, tls: c.tlsState, canon: &c.canon}, &st.reqStore)
	if reason != "" {
		cancel()
		c.logDebug("malformed request", errString(reason))
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	handler := c.srv.handler
	if !c.cfg.DisableGeneralOptionsHandler && req.RequestURI == "*" && req.Method == http.MethodOptions {
		handler = http.HandlerFunc(generalOptionsHandler)
	}
	if f.Truncated {
		handler = http.HandlerFunc(headerListTooLongHandler)
	} else if err := checkRequestHeaders(req.Header); err != nil {
		handler = badRequestHandler(err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cancel()
		return nil
	}
	if c.closeTimer != nil && c.goingAway && c.goAwayCode == http2.ErrCodeNo && c.closeTimer.Stop() {
		// a graceful GOAWAY came while the lock was released above, found
		// no stream open and armed the close; it names this stream as the
		// last one served, so the close waits for it (armed again once
		// the stream is done)
		c.closeTimer = nil
	}
	c.newStreamLocked(st, id, f.StreamEnded(), prio, ctx, cancel)
	// a body even when HEADERS ended the stream (its first Read still
	// sends the 100 Continue asked for), as x/net
	st.bodyState = requestBody{st: st, needsContinue: needsContinue}
	st.body = &st.bodyState
	req.Body = st.body
	if f.StreamEnded() {
		st.body.err = io.EOF
	} else {
		st.declBodyBytes = req.ContentLength
	}
	st.reqTrailer = req.Trailer
	if st.reqTrailer != nil {
		st.trailer = make(http.Header)
	}
	st.req = req
	st.w.state.Store(newResponseState(st, req))
	st.handler = handler
	stats.streams.Add(1)
	return c.scheduleHandlerLocked(st)
}

// processTrailersLocked handles the trailers of st's request.
func (c *conn) processTrailersLocked(st *stream, f *http2.MetaHeadersFrame) error {
	if st.gotTrailers {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	st.gotTrailers = true
	if !f.StreamEnded() {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	}
	limitHeaderValues(f, maxHeaderValueCount)
	if reason := checkTrailers(f, &c.canon, st.trailer); reason != "" {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	}
	if st.body != nil {
		// past the read deadline, the body has failed (processData)
		st.body.failPastDeadlineLocked(st.readDeadline.Load())
	}
	c.endRemoteLocked(st)
	return nil
}

// maxQueuedHandlers is how many requests may wait for a handler slot,
// in multiples of MaxConcurrentStreams (x/net's rule against rapid
// reset: handlers count until they return, not until their stream ends).
const maxQueuedHandlers = 4

// scheduleHandlerLocked runs st's handler, or queues it when
// MaxConcurrentStreams handlers are running.
func (c *conn) scheduleHandlerLocked(st *stream) error {
	if c.curHandlers < int(c.cfg.MaxConcurrentStreams) {
		c.curHandlers++
		workers.start(st)
		return nil
	}
	if len(c.unstarted) > maxQueuedHandlers*int(c.cfg.MaxConcurrentStreams) {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	c.unstarted = append(c.unstarted, st)
	return nil
}

// handlerDoneLocked starts the next queued handler whose stream is still
// open; the streams reset meanwhile are dropped, and a body of theirs
// that arrived whole (kept at the reset) gives its window back now.
func (c *conn) handlerDoneLocked() {
	c.curHandlers--
	for len(c.unstarted) > 0 {
		st := c.unstarted[0]
		c.unstarted[0] = nil
		c.unstarted = c.unstarted[1:]
		if st.closed {
			st.cancel()
			if st.body != nil {
				st.body.closeLocked() // a body received whole, kept at the reset (closeStreamLocked)
			}
			continue
		}
		c.curHandlers++
		workers.start(st)
		break
	}
	c.flushLocked()
}

// runHandler runs st's handler (on a handler goroutine, workers.go) and
// ends the response; a panic resets the stream (INTERNAL_ERROR) and is logged,
// unless it is http.ErrAbortHandler (x/net's rules).
func (c *conn) runHandler(st *stream) {
	rw, req := &st.w, st.req
	didPanic := true
	defer func() {
		st.cancel()
		if st.body != nil {
			st.body.Close()
		}
		if req.MultipartForm != nil {
			req.MultipartForm.RemoveAll()
		}
		if didPanic {
			e := recover()
			rw.cut() // not pooled: the panic may have left it mid-write
			c.mu.Lock()
			if !st.closed {
				c.resetStreamLocked(st, http2.ErrCodeInternal, nil)
			}
			c.mu.Unlock()
			if e != nil && e != http.ErrAbortHandler {
				const size = 64 << 10
				buf := make([]byte, size)
				buf = buf[:runtime.Stack(buf, false)]
				c.cfg.Logger.Error("http2: panic serving "+c.remoteAddr, zap.Any("panic", e), zap.ByteString("stack", buf))
			}
		} else {
			rw.cut().handlerDone()
		}
		c.mu.Lock()
		c.handlerDoneLocked()
		c.mu.Unlock()
	}()
	st.handler.ServeHTTP(rw, req)
	didPanic = false
}

// generalOptionsHandler answers "OPTIONS *" as net/http's server does
// before any handler sees it (its globalOptionsHandler).
func generalOptionsHandler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Length", "0")
	if r.ContentLength != 0 {
		io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 4<<10))
	}
}

type errString string

func (e errString) Error() string { return string(e) }
