package h2

import (
	"context"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/h2/wire"
)

// stream is one request and its response. Its fields are guarded by
// c.mu unless noted.
type stream struct {
	c      *conn
	id     uint32
	cond   sync.Cond // on c.mu: window, room, body data, closing
	ctx    context.Context
	cancel context.CancelFunc

	sendWindow   int64    // the client's window for our DATA on this stream
	sendHigh     int64    // the largest it has been (flood.go)
	sendSmall    int64    // sent in small frames, not given back (flood.go)
	pending      []byte   // bytes buffered ahead of the window (pending.go)
	inflow       inflow   // the window we give the client for its DATA
	remoteClosed bool     // END_STREAM received
	localClosed  bool     // END_STREAM sent
	sentHeaders  bool     // a response HEADERS (1xx too) is in the batch
	closed       bool     // removed from c.streams (reset, or both ends closed)
	closeErr     error    // why writes fail once closed
	writing      bool     // its handler is in writeBody (sendbody.go)
	queued       bool     // in c.waitq (queue.go)
	queuedAt     uint64   // when it was put in line (c.queueSeq)
	prio         priority // RFC 9218 (priority.go)

	body          *requestBody // nil when the request has none, else &bodyState
	bodyState     requestBody
	bodyBytes     int64       // DATA payload received
	declBodyBytes int64       // Content-Length, or -1
	trailer       http.Header // request trailers received
	reqTrailer    http.Header // the request's Trailer, declared ones
	gotTrailers   bool

	// the handler to run, set when the stream is queued
	w       responseWriter // the handler's handle on its response (handle.go)
	req     *http.Request
	handler http.Handler

	// deadlines in Unix nanoseconds (0: none), set by the handler through
	// http.ResponseController and read under c.mu or by the handler
	writeDeadline atomic.Int64
	readDeadline  atomic.Int64
	waitUntil     [waitKinds]int64 // the deadlines of its handler's waits now (deadlines.go)

	reqStore requestStorage // the request's URL and header values (requeststore.go)
}

// newStreamLocked registers st as stream id: st is new(stream), with
// nothing set but its request's storage (st.reqStore).
func (c *conn) newStreamLocked(st *stream, id uint32, endStream bool, prio priority, ctx context.Context, cancel context.CancelFunc) {
	st.c, st.id, st.ctx, st.cancel = c, id, ctx, cancel
	st.sendWindow, st.sendHigh = c.peerInitialWindow, c.peerInitialWindow
	st.remoteClosed = endStream
	st.declBodyBytes = -1
	st.prio = prio
	st.cond.L = &c.mu
	st.inflow.init(c.cfg.StreamWindow)
	now := time.Now()
	if c.cfg.WriteTimeout > 0 {
		st.writeDeadline.Store(now.Add(c.cfg.WriteTimeout).UnixNano())
		c.watchDeadlines()
	}
	if c.cfg.ReadTimeout > 0 {
		st.readDeadline.Store(now.Add(c.cfg.ReadTimeout).UnixNano())
	}
	c.streams[id] = st
}

// closeStreamLocked removes st: its writes and body reads fail with err
// from now on, its context is cancelled, and waiters wake.
func (c *conn) closeStreamLocked(st *stream, err error) {
	if st.closed {
		return
	}
	st.closed = true
	reset := err != errStreamClosed // by either side, or with the connection
	if se, ok := err.(http2.StreamError); ok {
		if se.Cause != nil {
			err = se.Cause
		} else {
			err = errStreamClosed
		}
	}
	st.closeErr = err
	delete(c.streams, st.id)
	if sent := st.sendHigh - st.sendWindow; sent > 0 {
		// what the client may still give back (flood.go)
		c.closedUnrefunded = min(c.closedUnrefunded+sent, 1<<31-1)
	}
	c.releasePendingLocked(st)
	c.leaveQueueLocked(st)
	if st.body != nil {
		if reset && st.body.err != io.EOF {
			// what the handler has not read of a body still arriving
			// goes back to the connection's window now, not when (or
			// if) the handler returns: a handler that neither reads nor
			// returns would hold a stream's window of the connection's,
			// and with it every upload on the connection. A body
			// received whole is kept, as x/net keeps it: the handler
			// reads every byte, then io.EOF, and never a short body
			// that looks whole (its window goes back as it reads, or
			// when it closes the body)
			st.body.discardLocked()
		}
		st.body.closeWithErrorLocked(err)
	}
	st.cancel()
	st.cond.Broadcast()
	if c.roomWaiters > 0 {
		c.roomCond.Broadcast() // its handler may be waiting for room
	}
	if len(c.streams) == 0 {
		if c.goingAway && c.goAwayCode == http2.ErrCodeNo {
			c.closeIfDrainedLocked()
		} else if c.idleTimer != nil {
			c.idleSince = time.Now() // onIdleTimeout
		}
	}
}

// resetStreamLocked sends RST_STREAM with code and closes st, before
// anything more of its handler's can enter the batch. Frames the client
// sends on st from now on are ignored (recentResets). The batch is
// written by a goroutine of its own (kickLocked): the reading goroutine
// resets streams too, and never writes to the socket.
func (c *conn) resetStreamLocked(st *stream, code http2.ErrCode, cause error) {
	if !c.closed {
		window := st.inflow.avail // what the client may still send on it
		if st.remoteClosed {
			window = 0
		}
		c.appendResetLocked(st.id, code, window)
	}
	c.closeStreamLocked(st, http2.StreamError{StreamID: st.id, Code: code, Cause: cause})
}

// resetStreamID resets the stream with id, open or not (a stream error
// found while reading its HEADERS has no stream yet).
func (c *conn) resetStreamID(id uint32, code http2.ErrCode, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.streams[id]; st != nil {
		c.resetStreamLocked(st, code, cause)
		return
	}
	if !c.closed {
		// the client may use RFC 9113's initial window until it has our
		// SETTINGS
		c.appendResetLocked(id, code, max(c.cfg.StreamWindow, 65535))
	}
}

// appendResetLocked puts RST_STREAM for id into the batch, notes id as
// reset, with the window the client still had on it, and has the batch
// written; after a GOAWAY with an error nothing more is sent (x/net's
// rule), whatever the frames read meanwhile.
func (c *conn) appendResetLocked(id uint32, code http2.ErrCode, window int32) {
	if c.goingAway && c.goAwayCode != http2.ErrCodeNo {
		return
	}
	c.batch.appendRSTStream(id, wire.ErrCode(code))
	c.recentResets.add(id, window)
	c.kickLocked()
}

// writeErrLocked is why the handler of st cannot write now, or nil. A
// write deadline that has passed resets the stream (INTERNAL_ERROR), as
// x/net's timer does.
func (st *stream) writeErrLocked() error {
	if st.closed {
		return st.closeErr
	}
	if st.c.closed || (st.c.goingAway && st.c.goAwayCode != http2.ErrCodeNo) {
		// after a GOAWAY with an error, nothing more is sent (x/net's rule)
		return errClientGone
	}
	if d := st.writeDeadline.Load(); d != 0 && time.Now().UnixNano() >= d {
		st.c.resetStreamLocked(st, http2.ErrCodeInternal, os.ErrDeadlineExceeded)
		return st.closeErr
	}
	return nil
}

// waitLocked waits until something may let st's handler go on: window,
// its turn at the connection (queue.go), the stream or connection
// closing, or its write deadline.
func (st *stream) waitLocked() { st.waitUntilLocked(writeWait, st.writeDeadline.Load()) }
