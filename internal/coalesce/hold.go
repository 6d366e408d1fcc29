package coalesce

// The wrapper on both sides of TLS: while the wrapper above writes a
// small batch through TLS, the wrapper below holds the records TLS makes
// of it and then writes them with one writev, in the goroutine that
// wrote the batch. Large batches are not held: there the flusher below
// sending one record while TLS encrypts the next is worth its goroutine
// hop, and a small batch (a flow-controlled client's next window, the
// last bytes of a response) would only wait for that hop.

import (
	"crypto/tls"
	"net"
)

// holdMax is the largest batch above TLS whose records the
// wrapper below holds. With TLS's record overhead it still fits within
// the default max_pending (64 KiB), so holding makes no Write wait.
const holdMax = 48 << 10

// below returns this wrapper's connection under the TLS
// connection conn, or nil if conn is over some other connection.
func below(conn net.Conn) *Conn {
	nc, ok := conn.(interface{ NetConn() net.Conn })
	if !ok {
		return nil
	}
	below, _ := nc.NetConn().(*Conn)
	return below
}

// hold makes Writes queue without starting a flusher, until release, if
// no flusher runs and nothing is queued now. It reports whether it did;
// c may be nil (no wrapper below TLS).
func (c *Conn) hold() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flushing || c.direct || c.queuedBytes > 0 || c.err != nil || c.closed {
		return false
	}
	c.held = true
	return true
}

// release ends hold and writes what was held, in the calling goroutine,
// unless a flusher has taken it meanwhile (see releaseHeldLocked).
func (c *Conn) release() {
	c.mu.Lock()
	c.held = false
	if c.flushing || c.queuedBytes == 0 {
		c.mu.Unlock()
		return
	}
	c.flushing = true
	flushers.Add(1)
	c.mu.Unlock()
	c.flush()
}

// releaseHeldLocked ends hold and starts a flusher for what was held:
// for a Write that finds no room (it would wait for a flusher that never
// comes), Close and drain. The caller holds mu.
func (c *Conn) releaseHeldLocked() {
	if !c.held {
		return
	}
	c.held = false
	if !c.flushing && c.queuedBytes > 0 {
		c.startFlusherLocked()
	}
}

// startFlusherLocked starts a flusher goroutine. The caller holds mu and
// has checked that none runs.
func (c *Conn) startFlusherLocked() {
	c.flushing = true
	flushers.Add(1)
	go c.flush()
}

// handshakeDone reports whether the TLS connection c writes through has
// completed its handshake. Until then no batch is held below: a write can
// run the handshake, whose records the client must get before it answers
// the handshake's last read. It waits for a handshake another goroutine
// is running (as the write itself would); after the first true it is one
// atomic load. A connection that reports no TLS state has no handshake to
// wait for.
func (c *Conn) handshakeDone() bool {
	if c.tlsDone.Load() {
		return true
	}
	if st, ok := c.Conn.(interface{ ConnectionState() tls.ConnectionState }); ok && !st.ConnectionState().HandshakeComplete {
		return false
	}
	c.tlsDone.Store(true)
	return true
}
