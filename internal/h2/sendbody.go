package h2

import (
	"errors"

	"go.uber.org/zap"
	"golang.org/x/net/http2"

	"github.com/h2file/caddy-h2file/internal/h2/wire"
)

// A response's body and its end enter the batch here, and only here,
// under one rule: the bytes a stream buffered ahead of its window
// (pending.go) go before anything that ends the stream, whether
// END_STREAM rides on the last DATA frame or on trailers. HEADERS before
// the body (1xx, the response's own) go through writeHeaders
// (encode.go); once a byte of the body is written, nothing else of the
// stream's is sent but through writeBody, and a reset, which drops what
// was buffered.

// writeBody sends p on st as DATA frames as the windows allow; with end,
// the stream ends after it: with END_STREAM on the last DATA frame, or
// with trailers when they are given. It returns once every byte is in
// the batch, written or buffered ahead (then the connection sends the rest
// as the client's window opens, and a stream that ends waits for that),
// or with the reason it cannot be. With deferFlush, the last frames may
// wait in the batch for the caller's next frames (END_STREAM when its
// handler returns) or deferredFlushDelay.
func (c *conn) writeBody(st *stream, p []byte, end bool, trailers *responseHead, deferFlush bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st.writing = true
	defer c.writerLeavesLocked(st)
	for {
		if err := st.writeErrLocked(); err != nil {
			return err
		}
		if len(st.pending) > 0 {
			// what was buffered ahead goes first, in its turn
			if c.sendPendingLocked(st) {
				c.flushLocked()
				continue
			}
			if rest := c.bufferAheadLocked(st, p); len(rest) < len(p) {
				p = rest
				continue
			}
			if len(p) == 0 && !end {
				// all of p is buffered ahead: the connection sends it
				c.flushLocked()
				return nil
			}
			c.waitForWindowLocked(st)
			continue
		}
		if len(p) == 0 {
			if end {
				c.appendEndLocked(st, trailers)
			}
			c.flushLocked()
			return nil
		}
		n := c.sendableLocked(st, len(p))
		if n <= 0 {
			if st.sendWindow <= 0 {
				// its own window is used up: buffer ahead, and go on; the
				// connection sends it as the window opens
				c.leaveQueueLocked(st)
				if rest := c.bufferAheadLocked(st, p); len(rest) < len(p) {
					p = rest
					continue
				}
			} else if c.queueLocked(st) {
				continue // first in line at once: try again
			}
			c.waitForWindowLocked(st)
			continue
		}
		last := n == len(p) && end && trailers == nil
		if last && !c.mayEndLocked(st) {
			return st.writeErrLocked()
		}
		c.appendDataLocked(st, p[:n], last)
		p = p[n:]
		c.turnTakenLocked(st, len(p) > 0)
		if last {
			c.endLocalLocked(st)
		}
		switch {
		case len(p) > 0:
			// write what is batched before waiting for more window (a
			// writer waiting with its own frames unsent would wait for
			// ever)
			c.flushLocked()
		case end && !last:
			// the trailers, next time round
		case deferFlush && !end:
			c.deferFlushLocked()
			return nil
		default:
			c.flushLocked()
			return nil
		}
	}
}

// sendableLocked is how many of n bytes st may put into the batch now:
// in its turn at the connection (queue.go), within both windows and the
// batch's room, and at most fairShare while others wait.
func (c *conn) sendableLocked(st *stream, n int) int {
	if !c.turnLocked(st) {
		return 0
	}
	k := min(int64(n), st.sendWindow, c.sendWindow, int64(c.roomLocked()))
	if len(c.waitq) > 1 {
		k = min(k, fairShare)
	}
	return int(max(k, 0))
}

// waitForWindowLocked waits for what st's handler needs to go on. What
// is batched (this stream's HEADERS among it) is written first, unless
// another goroutine is writing: the client may wait for it before it
// gives window. A write of its own releases the lock, so the caller
// checks again either way.
func (c *conn) waitForWindowLocked(st *stream) {
	if c.flushIfIdleLocked() {
		return
	}
	st.waitLocked()
}

// writerLeavesLocked notes that st's handler left writeBody. A stream
// with bytes still buffered ahead stays in line: the line's dispatch
// sends them in its turn (queue.go).
func (c *conn) writerLeavesLocked(st *stream) {
	st.writing = false
	if len(st.pending) == 0 {
		c.leaveQueueLocked(st)
		return
	}
	c.dispatchLocked()
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
		c.noteDataSent(st, k)
		p = p[k:]
	}
}

// appendEndLocked ends st's response, once all its body is in the batch:
// with trailers (a HEADERS frame with END_STREAM) when they are given,
// else with an empty DATA frame with END_STREAM.
func (c *conn) appendEndLocked(st *stream, trailers *responseHead) {
	if !c.mayEndLocked(st) {
		return
	}
	if trailers != nil {
		c.encodeHeadLocked(trailers)
		c.appendHeaderBlockLocked(st.id, c.hbuf.Bytes(), true)
	} else {
		c.batch.appendFrameHeader(0, wire.FrameData, wire.FlagEndStream, st.id)
	}
	c.endLocalLocked(st)
}

// mayEndLocked checks the rule before END_STREAM goes into the batch:
// nothing of st's may still be buffered ahead. writeBody keeps it (what is
// buffered ahead goes first, in the same hold of the lock), so breaking it
// is a bug of the engine's, which would cut the body short with a clean
// end: the stream is reset instead (INTERNAL_ERROR) and the bug logged,
// and false returned. A panic would stop the process from handlerDone,
// which runs outside the handler's recover.
func (c *conn) mayEndLocked(st *stream) bool {
	if len(st.pending) == 0 {
		return true
	}
	c.cfg.Logger.Error("http2: END_STREAM with bytes still buffered ahead of the window; stream reset",
		zap.Uint32("stream", st.id), zap.Int("buffered", len(st.pending)))
	c.resetStreamLocked(st, http2.ErrCodeInternal, errEndBeforeBuffered)
	return false
}

var errEndBeforeBuffered = errors.New("h2: END_STREAM with bytes still buffered ahead of the window")

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
