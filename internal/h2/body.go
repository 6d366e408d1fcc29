package h2

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/net/http2"
)

var errBodyClosed = errors.New("http2: request body closed by handler")

// requestBody is a request's Body: the DATA the serve goroutine received
// and the handler has not read yet. What the handler reads is given back
// to the client's windows. It is guarded by c.mu.
type requestBody struct {
	st            *stream
	buf           bodyBuffer // received, not yet read
	err           error      // after buf: io.EOF, or why the body failed
	onEOF         func()     // run once, before the first io.EOF (trailers)
	closed        bool       // closed by the handler
	needsContinue bool       // Expect: 100-continue, not answered yet
}

// Read reads the body, waiting for DATA; it sends 100 Continue first
// when the client asked for it.
func (b *requestBody) Read(p []byte) (int, error) {
	st := b.st
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.needsContinue {
		b.needsContinue = false
		c.write100ContinueLocked(st)
	}
	for b.buf.Len() == 0 && b.err == nil {
		if b.closed {
			return 0, errBodyClosed
		}
		d := st.readDeadline.Load()
		if b.failPastDeadlineLocked(d) {
			break
		}
		// what is batched (window given back, the 100 Continue) goes
		// before waiting: the client may wait for it to send
		if c.flushIfIdleLocked() {
			continue // the write released the lock
		}
		st.waitUntilLocked(readWait, d)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if b.buf.Len() == 0 {
		if b.err == io.EOF && b.onEOF != nil {
			b.onEOF()
			b.onEOF = nil
		}
		return 0, b.err
	}
	n := b.buf.Read(p)
	c.returnConnWindowLocked(n)
	c.returnStreamWindowLocked(st, n)
	c.flushLocked()
	return n, nil
}

// Close discards what is left of the body: the connection window of the
// unread bytes goes back to the client (x/net's rule), and more DATA for
// the stream is discarded the same way.
func (b *requestBody) Close() error {
	c := b.st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	b.needsContinue = false
	if b.closeLocked() {
		c.flushLocked()
	}
	b.st.cond.Broadcast()
	return nil
}

// closeLocked marks the body closed and gives the connection window of
// its unread bytes back; it reports whether a WINDOW_UPDATE was batched
// for them.
func (b *requestBody) closeLocked() bool {
	if b.closed {
		return false
	}
	b.closed = true
	n := b.buf.Reset()
	if n == 0 {
		return false
	}
	b.st.c.returnConnWindowLocked(n)
	return true
}

// discardLocked drops what the handler has not read of a reset stream's
// body and gives its connection window back.
func (b *requestBody) discardLocked() {
	if n := b.buf.Reset(); n > 0 {
		b.st.c.returnConnWindowLocked(n)
		b.st.c.kickLocked()
	}
}

// failPastDeadlineLocked fails the body once its read deadline d (unix
// nanoseconds; 0: none) has passed, as x/net's timer closes its body then
// whether the handler reads or not: the bytes received stay to be read,
// then the error; DATA arriving afterwards is discarded, its connection
// window given back at once (processData). It reports whether the body
// has failed or ended.
func (b *requestBody) failPastDeadlineLocked(d int64) bool {
	if b.err == nil && d != 0 && time.Now().UnixNano() >= d {
		b.err = fmt.Errorf("%w", os.ErrDeadlineExceeded)
	}
	return b.err != nil
}

// closeWithErrorLocked ends the body: reads get err once the received
// bytes are read.
func (b *requestBody) closeWithErrorLocked(err error) {
	if b.err == nil {
		b.err = err
	}
	b.st.cond.Broadcast()
}

// processData handles a DATA frame: its payload goes to the stream's
// body, within the windows the client was given.
func (c *conn) processData(f *http2.DataFrame) error {
	id := f.StreamID
	data := f.Data()
	c.mu.Lock()
	defer c.mu.Unlock()
	// each DATA frame may be given its window back at once (discarded
	// bytes): a client that sends without reading would grow the batch
	// by a WINDOW_UPDATE per frame behind a write that cannot finish
	if err := c.backlogLocked(); err != nil {
		return err
	}
	st := c.streams[id]
	if c.idleLocked(id) {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if st == nil || st.remoteClosed {
		// not open: the connection window is still taken, and given back
		if !c.discardDataLocked(f.Length) {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
		}
		if st == nil {
			if known, within := c.recentResets.takeData(id, f.Length); known {
				// sent before the client read our RST_STREAM (RFC 9113
				// §5.1): ignored, unless more than it had room for
				if !within {
					c.flood.add("DATA on a reset stream past its window")
				}
				return nil
			}
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	}
	b := st.body
	if st.declBodyBytes != -1 && st.bodyBytes+int64(len(data)) > st.declBodyBytes {
		if !c.discardDataLocked(f.Length) {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
		}
		b.closeWithErrorLocked(fmt.Errorf("sender tried to send more than declared Content-Length of %d bytes", st.declBodyBytes))
		// reset now, under the same lock: the handler, woken by the body's
		// error, must not answer on the stream before it is reset (x/net
		// resets it before the handler's writes reach its serve loop)
		c.resetStreamLocked(st, http2.ErrCodeProtocol, nil)
		c.flood.add("stream error")
		return nil
	}
	// a handler that does not read finds its body failed at the deadline
	// all the same (Read checks it too, without DATA)
	b.failPastDeadlineLocked(st.readDeadline.Load())
	if f.Length > 0 {
		if f.Length > uint32(st.inflow.avail) || !c.inflow.take(f.Length) {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
		}
		st.inflow.take(f.Length)
		if len(data) > 0 {
			st.bodyBytes += int64(len(data))
			if b.closed || b.err != nil {
				// closed by the handler, or failed at its read deadline
				// (the only error of a body still open, as x/net's
				// CloseWithError): nobody reads it, so the connection
				// window goes back at once, as x/net's does
				c.returnConnWindowLocked(len(data))
			} else {
				b.buf.Write(data)
				st.cond.Broadcast()
			}
		}
		// padding is given back at once
		if pad := int(f.Length) - len(data); pad > 0 {
			c.returnConnWindowLocked(pad)
			c.returnStreamWindowLocked(st, pad)
		}
		c.kickLocked()
	}
	if f.StreamEnded() {
		c.endRemoteLocked(st)
	}
	return nil
}

// endRemoteLocked notes the end of the client's side of st (END_STREAM
// on DATA or trailers): the body ends, checked against Content-Length.
func (c *conn) endRemoteLocked(st *stream) {
	st.remoteClosed = true
	if b := st.body; b != nil {
		if st.declBodyBytes != -1 && st.declBodyBytes != st.bodyBytes {
			b.closeWithErrorLocked(fmt.Errorf("request declared a Content-Length of %d but only wrote %d bytes", st.declBodyBytes, st.bodyBytes))
		} else {
			b.onEOF = st.copyTrailers
			b.closeWithErrorLocked(io.EOF)
		}
	}
	if st.localClosed {
		c.closeStreamLocked(st, errStreamClosed)
	}
}

// copyTrailers copies the request trailers that were declared into the
// request's Trailer, just before the body's io.EOF (as x/net).
func (st *stream) copyTrailers() { copyDeclaredTrailers(st.reqTrailer, st.trailer) }
