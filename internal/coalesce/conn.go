package coalesce

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is a write-behind connection. Write copies the bytes into
// pooled chunks and returns; a flusher goroutine, started when bytes
// arrive at an idle connection and ending when nothing is left, writes
// them to the wrapped connection, everything that accumulated during the
// previous socket write at once (with writev where the connection has
// it).
//
// A Write waits only when maxPending bytes are queued (behind the batch
// being written; sparePending while the wrapper's budget has chunks to
// spare) or the budget is used up. A Write's bytes are sent
// under the write deadline that was set when it was called (a batch under
// the earliest deadline of its bytes); a write error of the wrapped
// connection is sticky.
type Conn struct {
	net.Conn // the wrapped connection
	limits   *Limits
	writev   bool // the wrapped connection sends a batch with one writev
	// peer is what an HTTP/2 client above TLS said of its windows (see
	// Peer); nil below TLS, where the bytes are encrypted
	peer *Peer
	// below is this wrapper's connection under TLS, when the wrapper is on
	// both sides of it: small batches hold its writes (see hold.go)
	below *Conn
	// tlsDone is set once the TLS connection under this one has completed
	// its handshake (see handshakeDone)
	tlsDone atomic.Bool

	// wmu is held for the whole of a Write, ReadFrom or CloseWrite, so
	// that the bytes of concurrent Writes do not interleave, and only
	// one goroutine waits on wake.
	wmu   sync.Mutex
	wake  chan struct{} // wakes the holder of wmu: room, error, close or deadline change
	timer *time.Timer   // the holder of wmu's deadline timer

	mu           sync.Mutex
	queued       []*chunk // bytes for the flusher; all chunks but the last are full
	tail         int      // bytes in the last queued chunk
	queuedBytes  int
	queuedWrites int       // Write calls with bytes in queued
	queuedDL     time.Time // earliest write deadline of the bytes in queued
	gen          uint64    // counts the flusher's takes
	spare        []*chunk
	pending      int  // bytes queued or being written
	flushing     bool // a flusher goroutine runs
	direct       bool // ReadFrom writes to the wrapped connection itself
	held         bool // Writes queue without starting a flusher (see hold)
	closed       bool
	wclosed      bool  // CloseWrite was called
	err          error // sticky error of the wrapped connection
	wdl          time.Time
	closeWait    chan struct{} // the flusher has ended after Close

	// Owned by the flusher (or ReadFrom, which runs only while no
	// flusher does).
	iov     [][]byte
	innerDL time.Time // write deadline set on the wrapped connection
}

// NewConn wraps conn. If conn has a TLS connection state, so
// does the result. A conn that is already a Conn is returned as
// it is: the wrapper on both sides of `tls` on a server without TLS,
// where `tls` leaves the connection alone, would only copy its own
// batches.
func NewConn(conn net.Conn, limits *Limits) net.Conn {
	if inner, ok := conn.(*Conn); ok {
		return inner
	}
	c := &Conn{
		Conn:      conn,
		limits:    limits,
		wake:      make(chan struct{}, 1),
		closeWait: make(chan struct{}, 1),
	}
	switch conn.(type) {
	case *net.TCPConn, *net.UnixConn:
		c.writev = true
	}
	if st, ok := conn.(tlsConnectionStater); ok {
		c.peer = new(Peer)
		c.below = below(conn)
		tc := &tlsConn{Conn: c, stater: st}
		tc.handshaker, _ = conn.(interface{ HandshakeContext(context.Context) error })
		return tc
	}
	return c
}

// Write queues p to be sent and returns, unless too many bytes are
// pending; then it waits, until the write deadline, for the flusher to
// make room. It returns the error of an earlier failed socket write.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	n := 0
	counted, gen, waited := false, uint64(0), false
	for {
		if err := c.writeErrLocked(); err != nil {
			c.mu.Unlock()
			return n, err
		}
		if n == len(p) {
			break
		}
		dl := c.wdl
		if !dl.IsZero() && !time.Now().Before(dl) {
			c.mu.Unlock()
			return n, c.opError("write", os.ErrDeadlineExceeded)
		}
		if k := c.appendLocked(p[n:]); k > 0 {
			n += k
			if !counted || gen != c.gen {
				c.queuedWrites++
				counted, gen = true, c.gen
			}
			if !dl.IsZero() && (c.queuedDL.IsZero() || dl.Before(c.queuedDL)) {
				c.queuedDL = dl
			}
			if !c.flushing && !c.held {
				c.startFlusherLocked()
			}
			continue
		}
		c.releaseHeldLocked() // no room: the held bytes must go now
		c.mu.Unlock()
		if !waited {
			waited = true
			Metrics.Waits.Inc()
		}
		c.waitWake(dl)
		c.mu.Lock()
	}
	c.mu.Unlock()
	return n, nil
}

// writeErrLocked is the error a write gets now, if any.
func (c *Conn) writeErrLocked() error {
	switch {
	case c.err != nil:
		return c.err
	case c.closed:
		return c.opError("write", net.ErrClosed)
	case c.wclosed:
		return c.opError("write", errWriteClosed)
	}
	return nil
}

var errWriteClosed = errors.New("write after CloseWrite")

// appendLocked copies as much of p into the queue as the limits allow and
// returns how many bytes it copied. The queue holds at most maxPending
// bytes, or sparePending while the budget has chunks to spare; with the
// batch being written (which was queued, so no larger), a connection has
// at most twice that pending.
func (c *Conn) appendLocked(p []byte) int {
	room := c.limits.maxPending - c.queuedBytes
	spare := false
	if room <= 0 && c.limits.sparePending > c.limits.maxPending {
		// beyond max_pending, with chunks the budget can spare
		room, spare = c.limits.sparePending-c.queuedBytes, true
	}
	if room <= 0 {
		return 0
	}
	p = p[:min(len(p), room)]
	n := 0
	for n < len(p) {
		if len(c.queued) == 0 || c.tail == ChunkSize {
			if !c.takeChunk(spare) {
				break
			}
			c.queued = append(c.queued, getChunk())
			c.tail = 0
		}
		k := copy(c.queued[len(c.queued)-1][c.tail:], p[n:])
		c.tail += k
		n += k
	}
	c.pending += n
	c.queuedBytes += n
	return n
}

// takeChunk reserves a chunk from the budget: one it can spare, without
// waiting, for bytes beyond maxPending; else one within the budget (when
// none is left, wake is signalled once one is given back).
func (c *Conn) takeChunk(spare bool) bool {
	if spare {
		return c.limits.budget.spare()
	}
	return c.limits.budget.take(c.wake)
}

// waitWake waits for a signal on wake or for the deadline dl.
func (c *Conn) waitWake(dl time.Time) {
	if dl.IsZero() {
		<-c.wake
		return
	}
	d := time.Until(dl)
	if d <= 0 {
		return
	}
	if c.timer == nil {
		c.timer = time.NewTimer(d)
	} else {
		c.timer.Reset(d)
	}
	select {
	case <-c.wake:
		c.timer.Stop()
	case <-c.timer.C:
	}
}

// flush is the flusher goroutine: it writes what is queued, batch by
// batch, until nothing is left or writing fails.
func (c *Conn) flush() {
	defer flushers.Add(-1)
	for {
		c.mu.Lock()
		if c.err != nil || c.queuedBytes == 0 {
			c.dropQueuedLocked()
			c.flushing = false
			if c.closed {
				signal(c.closeWait)
			}
			c.mu.Unlock()
			signal(c.wake)
			return
		}
		batch, last, n, writes, dl := c.takeLocked()
		c.mu.Unlock()
		signal(c.wake) // the queue has room again

		held := n <= holdMax && c.below != nil && c.handshakeDone() && c.below.hold()
		socketWrites, err := c.writeBatch(batch, last, dl)
		if held {
			c.below.release()
		}

		for i, ch := range batch {
			putChunk(ch)
			batch[i] = nil
		}
		c.limits.budget.give(int64(len(batch)))
		c.mu.Lock()
		c.spare = batch[:0]
		c.pending -= n
		if err != nil && c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
		signal(c.wake)

		Metrics.Batches.Add(float64(socketWrites))
		Metrics.Bytes.Add(float64(n))
		if writes > socketWrites {
			Metrics.Coalesced.Add(float64(writes - socketWrites))
		}
	}
}

// takeLocked removes everything queued, to be written as one batch. It
// returns the chunks, the length of the last one, the bytes, the Write
// calls they came from and the earliest of their deadlines.
func (c *Conn) takeLocked() (batch []*chunk, last, n, writes int, dl time.Time) {
	batch, last, n, writes, dl = c.queued, c.tail, c.queuedBytes, c.queuedWrites, c.queuedDL
	c.queued, c.tail, c.queuedBytes, c.queuedWrites, c.queuedDL = c.spare, 0, 0, 0, time.Time{}
	c.spare = nil
	c.gen++
	return batch, last, n, writes, dl
}

// dropQueuedLocked discards what is queued, after a write error.
func (c *Conn) dropQueuedLocked() {
	for i, ch := range c.queued {
		putChunk(ch)
		c.queued[i] = nil
	}
	c.limits.budget.give(int64(len(c.queued)))
	c.pending -= c.queuedBytes
	c.queued, c.tail, c.queuedBytes, c.queuedWrites = c.queued[:0], 0, 0, 0
}

// writeBatch writes a batch to the wrapped connection under the write
// deadline dl, and returns the number of socket writes it took.
func (c *Conn) writeBatch(batch []*chunk, last int, dl time.Time) (int, error) {
	if !dl.Equal(c.innerDL) {
		if err := c.Conn.SetWriteDeadline(dl); err != nil {
			return 0, err
		}
		c.innerDL = dl
	}
	c.iov = c.iov[:0]
	for i, ch := range batch {
		if i == len(batch)-1 {
			c.iov = append(c.iov, ch[:last])
		} else {
			c.iov = append(c.iov, ch[:])
		}
	}
	bufs := net.Buffers(c.iov)
	_, err := bufs.WriteTo(c.Conn)
	if c.writev {
		return 1, err
	}
	return len(batch), err
}

// SetDeadline sets the read deadline of the wrapped connection and the
// write deadline.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetWriteDeadline sets the deadline for future Writes: a Write waiting
// for room fails when it passes, and so does the socket write of the
// bytes of Writes made from now on. Bytes already written keep the
// deadline they were written under, so that what was written just before
// the deadline was moved into the past (TLS's close_notify) is still
// sent.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	var err error
	c.mu.Lock()
	c.wdl = t
	if c.direct {
		err = c.Conn.SetWriteDeadline(t)
		c.innerDL = t
	}
	c.mu.Unlock()
	signal(c.wake)
	return err
}

// LocalAddr returns the wrapped connection's local address, marked as a
// coalescing connection's (see Addr).
func (c *Conn) LocalAddr() net.Addr {
	a := c.Conn.LocalAddr()
	if a == nil {
		return nil
	}
	if below, ok := a.(Addr); ok {
		// coalesce on both sides of TLS: one mark, this side's windows
		a = below.Addr
	}
	return Addr{Addr: a, peer: c.peer}
}

// NetConn returns the wrapped connection. Bytes written to it directly
// overtake those still pending here.
func (c *Conn) NetConn() net.Conn {
	return c.Conn
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Interface guards
var (
	_ net.Conn                        = (*Conn)(nil)
	_ io.ReaderFrom                   = (*Conn)(nil)
	_ interface{ CloseWrite() error } = (*Conn)(nil)
	_ interface{ NetConn() net.Conn } = (*Conn)(nil)
)
