package h2

import (
	"context"
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

	sendWindow   int64  // the client's window for our DATA on this stream
	sendHigh     int64  // the largest it has been (flood.go)
	pending      []byte // bytes buffered ahead of the window (pending.go)
	inflow       inflow // the window we give the client for its DATA
	remoteClosed bool   // END_STREAM received
	localClosed  bool   // END_STREAM sent
	closed       bool   // removed from c.streams (reset, or both ends closed)
	closeErr     error  // why writes fail once closed
	resetSent    bool
	queued       bool     // in c.waitq (queue.go)
	queuedAt     uint64   // when it was put in line (c.queueSeq)
	prio         priority // RFC 9218 (priority.go)

	body          *requestBody // nil when the request has none
	bodyBytes     int64        // DATA payload received
	declBodyBytes int64        // Content-Length, or -1
	trailer       http.Header  // request trailers received
	reqTrailer    http.Header  // the request's Trailer, declared ones
	gotTrailers   bool

	// the handler to run, set when the stream is queued
	rw      *responseWriter
	req     *http.Request
	handler func(http.ResponseWriter, *http.Request)

	// deadlines in Unix nanoseconds (0: none), set by the handler through
	// http.ResponseController and read under c.mu or by the handler
	writeDeadline atomic.Int64
	readDeadline  atomic.Int64
}

func (c *conn) newStreamLocked(id uint32, endStream bool, prio priority, ctx context.Context, cancel context.CancelFunc) *stream {
	st := &stream{
		c:             c,
		id:            id,
		ctx:           ctx,
		cancel:        cancel,
		sendWindow:    c.peerInitialWindow,
		sendHigh:      c.peerInitialWindow,
		remoteClosed:  endStream,
		declBodyBytes: -1,
		prio:          prio,
	}
	st.cond.L = &c.mu
	st.inflow.init(c.cfg.StreamWindow)
	now := time.Now()
	if c.cfg.WriteTimeout > 0 {
		st.writeDeadline.Store(now.Add(c.cfg.WriteTimeout).UnixNano())
	}
	if c.cfg.ReadTimeout > 0 {
		st.readDeadline.Store(now.Add(c.cfg.ReadTimeout).UnixNano())
	}
	c.streams[id] = st
	if c.idleTimer != nil && len(c.streams) == 1 {
		c.idleTimer.Stop()
	}
	return st
}

// closeStreamLocked removes st: its writes and body reads fail with err
// from now on, its context is cancelled, and waiters wake.
func (c *conn) closeStreamLocked(st *stream, err error) {
	if st.closed {
		return
	}
	st.closed = true
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
		st.body.closeWithErrorLocked(err)
	}
	st.cancel()
	st.cond.Broadcast()
	if len(c.streams) == 0 {
		if c.goingAway && c.goAwayCode == http2.ErrCodeNo {
			c.closeAfterLocked(goAwayTimeout)
		} else if c.idleTimer != nil && !c.closed {
			c.idleTimer.Reset(c.cfg.IdleTimeout)
		}
	}
}

// resetStreamLocked sends RST_STREAM with code and closes st. The
// stream is closed before the batch is written (the write releases the
// lock): its handler writes nothing more after the RST_STREAM.
func (c *conn) resetStreamLocked(st *stream, code http2.ErrCode, cause error) {
	send := !st.resetSent && !c.closed
	if send {
		st.resetSent = true
		c.batch.ensure()
		c.batch.appendRSTStream(st.id, wire.ErrCode(code))
	}
	c.closeStreamLocked(st, http2.StreamError{StreamID: st.id, Code: code, Cause: cause})
	if send {
		c.flushLocked()
	}
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
	if c.closed {
		return
	}
	c.batch.ensure()
	c.batch.appendRSTStream(id, wire.ErrCode(code))
	c.flushLocked()
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
func (st *stream) waitLocked() {
	c := st.c
	var t *time.Timer
	if d := st.writeDeadline.Load(); d != 0 {
		t = time.AfterFunc(time.Until(time.Unix(0, d)), func() {
			c.mu.Lock()
			st.cond.Broadcast()
			c.mu.Unlock()
		})
	}
	st.cond.Wait()
	if t != nil {
		t.Stop()
	}
}

// writeData sends p on st as DATA frames as the windows allow, with
// END_STREAM on the last when endStream. It returns once every byte is
// in the batch (or written), or with the reason it cannot be. With
// deferFlush, the last frames may wait in the batch for the caller's next
// frames (END_STREAM when its handler returns) or deferredFlushDelay.
func (c *conn) writeData(st *stream, p []byte, endStream, deferFlush bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// a writer that returns is in nobody's way
	defer c.leaveQueueLocked(st)
	for {
		if err := st.writeErrLocked(); err != nil {
			return err
		}
		if len(st.pending) > 0 {
			// what was buffered ahead goes first, in its turn
			if c.turnLocked(st) && c.sendPendingLocked(st) {
				c.turnTakenLocked(st, true)
				c.flushLocked()
				continue
			}
			if len(p) > 0 {
				if rest := c.bufferAheadLocked(st, p); len(rest) < len(p) {
					p = rest
					continue
				}
			} else if !endStream {
				// all of p is buffered ahead
				c.flushLocked()
				return nil
			}
			if st.sendWindow > 0 {
				// the connection's window or room: in line
				if c.queueLocked(st) {
					continue
				}
			} else {
				// its own window: the reading goroutine sends the buffer
				// when it opens
				c.leaveQueueLocked(st)
			}
			if c.flushIfIdleLocked() {
				continue
			}
			st.waitLocked()
			continue
		}
		if len(p) == 0 {
			if endStream {
				c.batch.ensure()
				c.batch.appendFrameHeader(0, wire.FrameData, wire.FlagEndStream, st.id)
				c.endLocalLocked(st)
			}
			c.flushLocked()
			return nil
		}
		if !c.turnLocked(st) {
			// others wait for the connection's window or room: in line
			if c.queueLocked(st) {
				continue
			}
			// a write of its own releases the lock: it may have become
			// first meanwhile, and been woken while it was not waiting
			if c.flushIfIdleLocked() {
				continue
			}
			st.waitLocked()
			continue
		}
		n := min(int64(len(p)), st.sendWindow, c.sendWindow, int64(c.roomLocked()))
		if len(c.waitq) > 1 {
			n = min(n, fairShare) // one turn, then back in line
		}
		if n <= 0 {
			if st.sendWindow <= 0 {
				// its own window: no turn at the connection is needed
				c.leaveQueueLocked(st)
			}
			if st.sendWindow <= 0 {
				// its own window is used up: buffer ahead, and go on
				if rest := c.bufferAheadLocked(st, p); len(rest) < len(p) {
					p = rest
					if len(p) == 0 && !endStream {
						c.flushLocked()
						return nil
					}
					// END_STREAM waits for the buffer to be sent
					continue
				}
			}
			if st.sendWindow > 0 {
				// the connection's window or room: wait in line
				if c.queueLocked(st) {
					continue
				}
			}
			// what is batched (this stream's HEADERS among it) goes
			// before waiting: the client may wait for it to open its
			// window
			if c.flushIfIdleLocked() {
				continue
			}
			st.waitLocked()
			continue
		}
		c.appendDataLocked(st, p[:n], n == int64(len(p)) && endStream)
		p = p[n:]
		c.turnTakenLocked(st, len(p) > 0)
		if len(p) == 0 && endStream {
			c.endLocalLocked(st)
		}
		if len(p) == 0 {
			if deferFlush && !endStream {
				c.deferFlushLocked()
			} else {
				c.flushLocked()
			}
			return nil
		}
		// write what is batched before waiting for more window (a writer
		// waiting with its own frames unsent would wait for ever)
		c.flushLocked()
	}
}

// appendDataLocked puts p into the batch as DATA frames of st, as large
// as the client allows, taking len(p) of st's and the connection's send
// windows (the caller checked them); END_STREAM goes on the last frame if
// endStream.
func (c *conn) appendDataLocked(st *stream, p []byte, endStream bool) {
	c.batch.ensure()
	st.sendWindow -= int64(len(p))
	c.sendWindow -= int64(len(p))
	for len(p) > 0 {
		k := min(len(p), c.peerMaxFrameSize)
		var flags wire.Flags
		if k == len(p) && endStream {
			flags = wire.FlagEndStream
		}
		c.batch.appendFrameHeader(k, wire.FrameData, flags, st.id)
		c.batch.buf = append(c.batch.buf, p[:k]...)
		p = p[k:]
	}
}

// endLocalLocked notes that END_STREAM went into the batch for st: the
// stream closes if the client had ended its side too; otherwise the
// client is told to stop sending (RST_STREAM NO_ERROR, as x/net).
func (c *conn) endLocalLocked(st *stream) {
	st.localClosed = true
	if st.remoteClosed {
		c.closeStreamLocked(st, errStreamClosed)
		return
	}
	c.resetStreamLocked(st, http2.ErrCodeNo, nil)
}

// inflow is a receive window we give the client (x/net's inflow).
type inflow struct {
	avail  int32
	unsent int32
}

// inflowMinRefresh is the smallest WINDOW_UPDATE sent, unless it at
// least doubles the window (x/net's rule).
const inflowMinRefresh = 4 << 10

func (f *inflow) init(n int32) { f.avail = n }

// add gives n bytes back; it returns the increment to send now, or 0.
func (f *inflow) add(n int) int32 {
	unsent := int64(f.unsent) + int64(n)
	if unsent+int64(f.avail) > 1<<31-1 {
		unsent = 1<<31 - 1 - int64(f.avail)
	}
	f.unsent = int32(unsent)
	if f.unsent < inflowMinRefresh && f.unsent < f.avail {
		return 0
	}
	f.avail += f.unsent
	f.unsent = 0
	return int32(unsent)
}

// take takes n bytes of window, or reports false when the client sent
// more than it was given.
func (f *inflow) take(n uint32) bool {
	if n > uint32(f.avail) {
		return false
	}
	f.avail -= int32(n)
	return true
}

// returnConnWindowLocked gives n bytes back to the connection window.
func (c *conn) returnConnWindowLocked(n int) {
	if inc := c.inflow.add(n); inc > 0 {
		c.batch.ensure()
		c.batch.appendWindowUpdate(0, uint32(inc))
	}
}

// returnStreamWindowLocked gives n bytes back to st's window.
func (c *conn) returnStreamWindowLocked(st *stream, n int) {
	if st.closed || st.remoteClosed {
		return
	}
	if inc := st.inflow.add(n); inc > 0 {
		c.batch.ensure()
		c.batch.appendWindowUpdate(st.id, uint32(inc))
	}
}
